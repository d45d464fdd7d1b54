"""What a run spec may make a job import, fetch or send out. Pure: no AWS calls.

A job runs with the SageMaker execution role, so code it imports at run time runs with that role. By default a
spec cannot make a job run code that is not the project's own training code, nor send data anywhere but the
project's buckets:

- `trust_remote_code` (transformers imports the model repository's Python) is refused unless the environment
  lists Hub organizations in `remote_code_hub_orgs`; then only for a Hub model of one of those organizations,
  pinned to a commit (`model_revision`, 40 hex digits: a branch or tag can be moved after review). A model from
  S3 never: whoever can write the folder would choose the code.
- Pushing to the Hub (`push_to_hub`, `hub_*`) and Trackio Spaces (`trackio_space_id`) send the model or metrics
  out, and a job has no Hub credentials anyway (`hub_token` is refused as a secret): always refused.
- `report_to` may name only local integrations (`none`, `tensorboard`) unless the environment lists others in
  `allowed_report_to`.
- `generation_config` may only be a file path inside the job (a Hub id or URL is fetched at run time).
- A Hub tokenizer (`tokenizer_name_or_path`) or dataset (`dataset_name`) is data, not code, but needs internet:
  refused where the environment has none. With `trust_remote_code` the tokenizer must come from the model's
  own pinned repository (AutoTokenizer would import a second repository's code).

`network_isolated` says whether a training job needs no internet at all (a model from S3, no Hub downloads, no
remote reporting): such jobs run with EnableNetworkIsolation, the code arriving as the `code` channel as the
SageMaker Python SDK sends it.
"""

from __future__ import annotations

import json
import re
from typing import Any

from settings import Settings

COMMIT_RE = re.compile(r"^[0-9a-f]{40}$")
LOCAL_REPORTERS = ("none", "tensorboard")
# Hyperparameters that only matter when pushing to the Hub (TrainingArguments' hub_* group).
HUB_PUSH = ("push_to_hub", "hub_model_id", "hub_strategy", "hub_private_repo", "hub_always_push", "hub_revision",
            "trackio_space_id")
# Every hyperparameter whose value this policy judges (the rest cannot import, fetch or send anything).
POLICED = ("trust_remote_code", "model_revision", "tokenizer_name_or_path", "dataset_name", "report_to",
           "generation_config", *HUB_PUSH)
ISOLATED_CODE_DIR = "/opt/ml/input/data/code"
CODE_CHANNEL = "code"


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def _is_hub_id(value: Any) -> bool:
    """A string the job would resolve on the Hub (anything that is not an absolute path inside the job)."""
    return isinstance(value, str) and bool(value) and not value.startswith("/")


def _reporters(value: Any) -> list[str]:
    items = [str(v) for v in value] if isinstance(value, list) else [str(value)]
    return [part for item in items for part in re.split(r"[\s,]+", item.strip()) if part]


def hub_org(model: str) -> str | None:
    """`org` of a Hub id `org/name` (a bare `name` has no organization)."""
    return model.split("/", 1)[0] if "/" in model and not model.startswith("s3://") else None


def hyperparameter_problems(hyperparameters: dict[str, Any], model: str | None, settings: Settings) -> list[str]:
    """Problems with what the hyperparameters would make the job import, fetch or send out.

    `model` is the spec's model (a Hub id or an s3:// URI); None when unknown (treated as not a Hub model).
    """
    hp = hyperparameters
    problems: list[str] = []
    hub_model = isinstance(model, str) and not model.startswith("s3://")
    orgs = settings.remote_code_hub_orgs
    if _truthy(hp.get("trust_remote_code", False)):
        path = "hyperparameters.trust_remote_code"
        if not orgs:
            problems.append(f"{path}: the job would import the model repository's Python with the SageMaker "
                            f"role; environment {settings.environment} allows no remote code (set "
                            "remote_code_hub_orgs in cdk.json to allow reviewed Hub organizations)")
        elif not hub_model:
            problems.append(f"{path}: only a Hub model of {', '.join(orgs)} may run its own code; the code of an "
                            "S3 model folder is whatever its last writer put there")
        else:
            org = hub_org(model or "")
            if org not in orgs:
                problems.append(f"{path}: model {model} is not from a Hub organization allowed to run its code in "
                                f"environment {settings.environment} ({', '.join(orgs)})")
            revision = hp.get("model_revision")
            if not (isinstance(revision, str) and COMMIT_RE.match(revision)):
                problems.append("hyperparameters.model_revision: with trust_remote_code the model must be pinned to "
                                "a commit (40 hex digits); a branch or tag can change after review")
            if _is_hub_id(hp.get("tokenizer_name_or_path")):
                problems.append("hyperparameters.tokenizer_name_or_path: with trust_remote_code the tokenizer comes "
                                "from the model's pinned repository (or the tokenizer stage); a second Hub "
                                "repository would run its own code")
    for name in HUB_PUSH:
        if name in hp and (name != "push_to_hub" or _truthy(hp[name])):
            problems.append(f"hyperparameters.{name}: pushing to the Hugging Face Hub sends the model out of the "
                            "project and the job has no Hub credentials; the pipeline registers the model in the "
                            "model registry instead")
    if "report_to" in hp:
        remote = [r for r in _reporters(hp["report_to"]) if r not in LOCAL_REPORTERS
                  and r not in settings.allowed_report_to]
        if remote:
            allowed = ", ".join([*LOCAL_REPORTERS, *settings.allowed_report_to])
            problems.append(f"hyperparameters.report_to: {', '.join(remote)} would send metrics out of the "
                            f"project; allowed in environment {settings.environment}: {allowed} (add reviewed "
                            "services to allowed_report_to in cdk.json)")
    generation_config = hp.get("generation_config")
    if generation_config is not None and (not isinstance(generation_config, str)
                                          or not generation_config.startswith("/")):
        problems.append("hyperparameters.generation_config: only a file path inside the job (e.g. in the model "
                        "channel) is allowed; a Hub id or URL is fetched at run time")
    if not settings.internet_access:
        for name in ("tokenizer_name_or_path", "dataset_name"):
            if _is_hub_id(hp.get(name)):
                problems.append(f"hyperparameters.{name}: {hp[name]!r} is downloaded from the Hub, but environment "
                                f"{settings.environment} has no internet access; stage it in S3 (tokenizer stage or "
                                "a data channel) instead")
    return problems


def spec_problems(spec: dict[str, Any], settings: Settings) -> list[str]:
    return hyperparameter_problems(spec.get("hyperparameters") or {}, spec.get("model"), settings)


def needs_internet(model: str | None, hyperparameters: dict[str, Any], settings: Settings) -> bool:
    """Whether the job must reach anything but SageMaker's own channels (the Hub, a remote reporter)."""
    hp = hyperparameters
    if not isinstance(model, str) or not model.startswith("s3://"):
        return True
    if any(_is_hub_id(hp.get(n)) for n in ("tokenizer_name_or_path", "dataset_name")):
        return True
    return any(r not in LOCAL_REPORTERS for r in _reporters(hp.get("report_to", "none")))


def network_isolated(spec: dict[str, Any], settings: Settings) -> bool:
    return not needs_internet(spec.get("model"), spec.get("hyperparameters") or {}, settings)


def isolate_training_request(request: dict[str, Any], spec: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """Sets EnableNetworkIsolation from the spec; an isolated job gets its code as the `code` channel.

    With network isolation the container cannot download `sourcedir.tar.gz` itself: SageMaker copies it in as a
    channel and `sagemaker_submit_directory` names the file inside the container (what the SDK v2 does).
    """
    isolated = network_isolated(spec, settings)
    request["EnableNetworkIsolation"] = isolated
    if isolated:
        tarball = f"{settings.code_s3_prefix}sourcedir.tar.gz"
        request["InputDataConfig"].append({
            "ChannelName": CODE_CHANNEL,
            "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": tarball,
                                            "S3DataDistributionType": "FullyReplicated"}},
            "InputMode": "File",
        })
        request["HyperParameters"]["sagemaker_submit_directory"] = json.dumps(
            f"{ISOLATED_CODE_DIR}/sourcedir.tar.gz")
    return request
