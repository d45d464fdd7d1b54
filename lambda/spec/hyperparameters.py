"""The training script's hyperparameters as Prepare checks them, before any job starts. Pure.

Everything here comes from their owner, training_code: names, types, choices and defaults from its exported
schema (training_code/hyperparameters.json), bounds and the rules across hyperparameters from its `hp_rules`
(training_code/hftrain/hp_rules.py); `training_contract` finds both (the asset's copies made at synth, or the
checkout's training_code/). What this module adds is
the pipeline's side: the names it sets from other spec fields, and how values travel through SageMaker and the
toolkit's `--name value` arguments so that the script's argparse reads them as given, and the code-execution
policy (`policy_problems`): what the hyperparameters may make a job import, fetch or send out in an environment.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from typing import Any

from hfsm_lambda.plan import instance_types
from hfsm_lambda.settings import Settings
from hfsm_lambda.spec import hp_paths, strict_json
from hfsm_lambda.spec.charsets import LINE_TERMINATORS
from hfsm_lambda.spec.schema import INVALID, Context, Kind, describe
from hfsm_lambda.training_contract import SCHEMA_FILE, hp_rules

# Hyperparameters the pipeline sets -> the spec field they come from (the spec's `hyperparameters` may not set them).
PIPELINE = {
    "task": "task",
    "model_name_or_path": "model",
    "save_steps": "checkpoint.every_steps",
    "save_every_minutes": "checkpoint.every_minutes",
    "save_interval": "checkpoint.every_minutes (\"auto\")",
    "interruption_prior_hours": "checkpoint.every_minutes (\"auto\": per instance type and capacity)",
    "stall_minutes": "stall.minutes (\"off\" with stall.action off)",
    "stall_startup_minutes": "stall.startup_minutes",
    "in_job_restarts": "recovery.in_job_restarts",
    "stall_stragglers": "stall.stragglers",
    "stall_straggler_minutes": "stall.straggler_minutes",
    "fsdp": "distribution.fsdp.sharding",
    "fsdp_config": "distribution.fsdp.config",
    "ddp_backend": "distribution.strategy",
    "checkpoint_dir": "the checkpoint LocalPath (/opt/ml/checkpoints)",
    "output_dir": "the checkpoint LocalPath (/opt/ml/checkpoints); the training code manages it",
}
# Never as hyperparameters: they are visible to anyone who can call DescribeTrainingJob.
SECRETS = ("hub_token",)
# argparse takes an argument starting with '-' as a value only when it looks like a negative number.
_NEGATIVE_NUMBER = re.compile(r"-\d+|-\d*\.\d+")
# A string value as the JSON Schema states it (ASCII digits: stricter than argparse's \d, never looser).
STRING_VALUE = r"(?!-)[^\u0000\n\r\u0085\u2028\u2029]*|-[0-9]+|-[0-9]*\.[0-9]+"


@lru_cache(maxsize=1)
def schema() -> dict[str, dict[str, Any]]:
    """name -> {"type", "help", "choices"?, "default"?, "keys"?}: what the training script accepts."""
    return json.loads(SCHEMA_FILE.read_text())


def tasks() -> tuple[str, ...]:
    """The training code's tasks (its task registry, exported as the `task` hyperparameter's choices)."""
    return tuple(schema()["task"]["choices"])


def task_metrics() -> dict[str, tuple[str, ...]]:
    """task -> the metric names its evaluation logs (`METRIC eval_... =` lines), from the same schema."""
    return {task: tuple(names) for task, names in schema()["task"]["metrics"].items()}


def settable() -> list[str]:
    blocked = set(PIPELINE) | set(SECRETS) | set(hp_rules.UNSETTABLE)
    return sorted(set(schema()) - blocked)


def pipeline_values(spec: dict[str, Any]) -> dict[str, Any]:
    """The hyperparameters the pipeline derives from the spec (unencoded)."""
    values: dict[str, Any] = {"task": spec["task"]}
    if not spec["model"].startswith("s3://"):
        values["model_name_or_path"] = spec["model"]
    values["save_steps"] = spec["checkpoint"]["every_steps"]
    every = spec["checkpoint"].get("every_minutes")
    if every == "auto":
        values["save_interval"] = "auto"  # and per attempt interruption_prior_hours (job_requests)
    elif every:
        values["save_every_minutes"] = every
    stall = spec.get("stall") or {}
    if stall.get("action") == "off":
        values["stall_minutes"] = "off"
    elif isinstance(stall, dict) and stall:
        minutes = stall.get("minutes", "auto")
        if minutes == "auto" or isinstance(minutes, int | float):  # (values that failed their check: none)
            values["stall_minutes"] = minutes if minutes == "auto" else f"{minutes:g}"
        startup = stall.get("startup_minutes", "auto")
        if isinstance(startup, int | float) and not isinstance(startup, bool):  # auto is the code's own default
            values["stall_startup_minutes"] = startup
        if stall.get("stragglers") == "end":  # the default (warn) is the training code's own
            values["stall_stragglers"] = "end"
        if isinstance(stall.get("straggler_minutes"), int | float) and stall["straggler_minutes"] != 5:
            values["stall_straggler_minutes"] = stall["straggler_minutes"]  # the default (5) is the code's own
    recovery = spec.get("recovery") or {}
    if isinstance(recovery, dict) and isinstance(recovery.get("in_job_restarts", 2), int):
        values["in_job_restarts"] = recovery.get("in_job_restarts", 2)
    distribution = spec["distribution"]
    if distribution["strategy"] == "fsdp":
        values["fsdp"] = distribution["fsdp"]["sharding"]
        values["fsdp_config"] = json.dumps(distribution["fsdp"]["config"], sort_keys=True, separators=(",", ":"))
    elif distribution["strategy"] == "smddp":
        values["ddp_backend"] = "smddp"
    return values


def argument(name: str, value: Any) -> Any:
    """The value to JSON-encode for SageMaker so the script's parser receives exactly it.

    Objects travel as compact JSON text (the toolkit would render a dict as `k=v,k=v`), also when the spec gives
    them as JSON text (re-encoded: its line breaks and indentation do not reach the script), a one-element array
    as its element, and a negative number in exponent form (`-1e-05`, which argparse would take for an option)
    as plain decimal text (`"-0.00001"`).
    """
    kind = schema().get(name, {}).get("type")
    if kind == "object" and isinstance(value, str):
        parsed, problems = strict_json.loads(value, name)
        value = parsed if not problems and isinstance(parsed, dict) else value
    if kind == "object" and isinstance(value, dict):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    if kind == "array" and isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, float) and value < 0 and not _NEGATIVE_NUMBER.fullmatch(str(value)):
        from decimal import Decimal  # rare: only negative numbers in exponent form

        return format(Decimal(repr(value)), "f")
    return value


def _string_problem(value: str) -> str | None:
    if "\x00" in value:
        return ("holds a NUL character, which no command-line argument can carry (the SageMaker toolkit passes "
                "each hyperparameter to the script as one)")
    if LINE_TERMINATORS & set(value):
        return "holds a line break, which SageMaker refuses in hyperparameter values (its pattern `.*` stops there)"
    if value.startswith("-") and not _NEGATIVE_NUMBER.fullmatch(value):
        return ("starts with '-': the training script's argument parser would read it as an option name, not a "
                "value (negative numbers are fine); rejected")
    return None


def _object_problem(value: Any, meta: dict[str, Any], path: str) -> str | None:
    if isinstance(value, str):
        value, problems = strict_json.loads(value, path)
        if problems:
            where, why = problems[0]
            return f"expected a JSON object, or JSON text of one; {why}" + (f" (at {where})" if where != path else "")
    if not isinstance(value, dict):
        return f"expected a JSON object (or its JSON text), got {describe(value)}"
    unknown = sorted(set(value) - set(meta.get("keys", value)))
    if unknown:
        return f"unknown key(s) {', '.join(map(repr, unknown[:5]))}; allowed: {', '.join(meta['keys'])}"
    return None


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


# schema type -> (accepts the JSON value, what to say otherwise)
_TYPES: dict[str, tuple[Any, str]] = {
    "integer": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "number": (lambda v: _is_scalar(v) and not isinstance(v, str), "a number"),
    "boolean": (lambda v: isinstance(v, bool), "true or false"),
    "string": (lambda v: isinstance(v, str), "a string"),
    "array": (_is_scalar, "one value (the SageMaker toolkit passes a single argument per hyperparameter)"),
}
_ANY_SCALAR = (lambda v: _is_scalar(v) or isinstance(v, bool), "a string, number or boolean")


def value_problem(name: str, value: Any, path: str) -> str | None:
    """Why the script (or SageMaker) would refuse `value` for hyperparameter `name`, or None."""
    meta = schema()[name]
    if meta["type"] == "object":
        return _object_problem(value, meta, path)
    if meta["type"] == "array" and isinstance(value, list) and len(value) == 1:
        value = value[0]
    accepts, what = _TYPES.get(meta["type"], _ANY_SCALAR)
    if not accepts(value):
        return f"expected {what}, got {describe(value)}"
    if isinstance(value, str) and (problem := _string_problem(value)):
        return problem
    choices = meta.get("choices")
    if choices and str(value) not in choices:
        return f"{describe(value)} is not allowed; allowed: {', '.join(choices)}"
    return hp_rules.bound_problem(name, value) or hp_paths.problem(name, value)


def _name_problem(name: str) -> str | None:
    if name.startswith("sagemaker_"):
        return "names starting with 'sagemaker_' are reserved for SageMaker"
    if name in SECRETS:
        return "secrets must not be hyperparameters (DescribeTrainingJob shows them); stage the model in S3 instead"
    if name in PIPELINE:
        return f"set by the pipeline from {PIPELINE[name]}; remove it here"
    if name in hp_rules.UNSETTABLE:
        return f"cannot be set as a hyperparameter: {hp_rules.UNSETTABLE[name]}"
    if name not in schema():
        return (f"unknown hyperparameter: the training script accepts the names in training_code/hyperparameters.json "
                f"({len(settable())} settable here)")
    return None


def _hints(name: str) -> str:
    import difflib  # only for unknown names

    close = difflib.get_close_matches(name[:100], settable(), n=3)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""


class Hyperparameters(Kind):
    """The `hyperparameters` object: name -> value, checked against the training script's schema."""

    def check(self, value: Any, path: str, ctx: Context) -> Any:
        if not isinstance(value, dict):
            ctx.problems.add(path, f"expected an object of name -> value, got {describe(value)}")
            return INVALID
        ok = True
        for name, item in value.items():
            where = strict_json.join(path, name)
            problem = _name_problem(name)
            if problem and problem.startswith("unknown") and not ctx.problems.full:
                problem += _hints(name)
            problem = problem or value_problem(name, item, where)
            if problem:
                ctx.problems.add(where, problem)
                ok = False
        return dict(value) if ok else INVALID

    def schema(self) -> dict[str, Any]:
        return self.annotate({"type": "object", "additionalProperties": False,
                              "properties": {n: value_schema(n) for n in settable()}})

    def type_doc(self) -> str:
        return "object"

    def allowed_doc(self) -> str:
        return "name -> value, passed to `training_code/train.py` as `--name value`; see below"


def value_schema(name: str) -> dict[str, Any]:
    meta = schema()[name]
    string = {"type": "string", "pattern": f"^(?:{STRING_VALUE})(?![\\s\\S])"}
    numeric = {k: v for k, v in hp_rules.BOUNDS.get(name, {}).items()}
    kind = meta["type"]
    if kind == "object":
        obj: dict[str, Any] = {"type": "object"}
        if "keys" in meta:
            obj["propertyNames"] = {"enum": meta["keys"]}
        out: dict[str, Any] = {"anyOf": [obj, {"type": "string", "pattern": "^[ \\t\\n\\r]*\\{"}]}
    elif kind in ("integer", "number"):
        out = {"type": kind, **numeric}
    elif kind == "boolean":
        out = {"type": "boolean"}
    else:
        one: dict[str, Any] = string if kind == "string" else {"anyOf": [string, {"type": "number"}]}
        if meta.get("choices"):
            one = {**one, "enum": meta["choices"]}
        out = one if kind == "string" else {"anyOf": [one, {"type": "array", "items": one, "minItems": 1,
                                                             "maxItems": 1}]}
    out["description"] = meta.get("help", "")
    return out


def _facts(spec: dict[str, Any], values: dict[str, Any]) -> tuple[dict[str, bool], list[str]]:
    """hp_rules.FACTS as the spec tells them, and the instance types without bf16 (for the message)."""
    options = spec["fallback"]["options"]
    types = [spec["compute"]["instance_type"]] + [o["instance_type"] for o in options if "instance_type" in o]
    old_gpus = sorted({t for t in types if not instance_types.has_bf16(t)})
    validation = "validation" in spec["data"] or values.get("validation_path") or (
        values.get("dataset_name") and values.get("validation_split"))
    stop = spec["checkpoint"]["watchdog"]["action"] == "stop"
    spot = spec["spot"]["enabled"] or any(o.get("spot") for o in options)
    return {"validation_data": bool(validation), "bf16_gpu": not old_gpus, "resumes": spot or stop,
            "watchdog_stop": stop}, old_gpus


def rule_problems(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, message) for each hp_rules rule the run's hyperparameters break, the pipeline's own included.

    The path is the first of the rule's fields the spec sets, else the spec field a pipeline value comes from."""
    given = spec["hyperparameters"]
    values = {n: m["default"] for n, m in schema().items() if "default" in m}
    values.update(pipeline_values(spec))
    values.update({n: v[0] if isinstance(v, list) and len(v) == 1 else v for n, v in given.items()})
    facts, old_gpus = _facts(spec, values)
    problems = []
    for rule, message in hp_rules.broken_rules(values, facts):
        paths = [f"hyperparameters.{f}" for f in rule["fields"] if f in given]
        paths += [PIPELINE[f] for f in rule["fields"] if f in PIPELINE] + ["hyperparameters"]
        if old_gpus and any("@bf16_gpu" in c for c in rule["then"]):
            message += f" ({', '.join(map(instance_types.describe, old_gpus))}: no bf16 or TF32)"
        problems.append((paths[0], message))
        if old_gpus and any("@bf16_gpu" in c for c in rule["then"]):
            problems += bf16_option_problems(spec, paths[0])
    return problems


def bf16_option_problems(spec: dict[str, Any], field: str) -> list[tuple[str, str]]:
    """The fallback options whose instance type lacks bf16/TF32, each named by its own path, for a `field`
    (e.g. hyperparameters.bf16) that needs them on every attempt (issue 36: name the option, not only the field)."""
    out = []
    for i, option in enumerate(spec["fallback"]["options"]):
        kind = option.get("instance_type")
        if kind and not instance_types.has_bf16(kind):
            out.append((f"fallback.options[{i}].instance_type",
                        f"{instance_types.describe(kind)} has no bf16 or TF32, which {field} needs on every "
                        "attempt; choose an Ampere-or-newer GPU type for this option or drop the setting"))
    return out


# --- the code-execution policy: what the hyperparameters may make a job import, fetch or send out ---------------
# A job runs with the SageMaker execution role, so code it imports at run time runs with that role. By default a
# spec cannot make a job run code that is not the project's own training code, nor send data anywhere but the
# project's buckets:
# - `trust_remote_code` (transformers imports the model repository's Python) is refused unless the environment
#   lists Hub organizations in `remote_code_hub_orgs`; then only for a Hub model of one of them, pinned to a commit
#   (`model_revision`, 40 hex digits: a branch or tag can be moved after review). A model from S3 never: whoever
#   can write the folder would choose the code.
# - Pushing to the Hub (`push_to_hub`, `hub_*`) and Trackio Spaces (`trackio_space_id`) send the model or metrics
#   out, and a job has no Hub credentials anyway (`hub_token` is a secret): always refused.
# - `report_to` may name only local integrations (`none`, `tensorboard`) unless the environment lists others in
#   `allowed_report_to`.
# - `generation_config` may only be a file path inside the job (a Hub id or URL is fetched at run time).
# - A Hub tokenizer (`tokenizer_name_or_path`) or dataset (`dataset_name`) is data, not code, but needs internet:
#   refused where the environment has none. With `trust_remote_code` the tokenizer must come from the model's own
#   pinned repository (AutoTokenizer would import a second repository's code).
# These depend on the environment, so pre-flight applies them (PreflightError), and the start handlers' request
# guard applies them again to the hyperparameters of the request itself.
COMMIT_RE = re.compile(r"[0-9a-f]{40}")  # fullmatch
LOCAL_REPORTERS = ("none", "tensorboard")
# Hyperparameters that only matter when pushing to the Hub (TrainingArguments' hub_* group).
HUB_PUSH = ("push_to_hub", "hub_model_id", "hub_strategy", "hub_private_repo", "hub_always_push", "hub_revision",
            "trackio_space_id")
# Every hyperparameter whose value the policy judges (the rest cannot import, fetch or send anything).
POLICED = ("trust_remote_code", "model_revision", "tokenizer_name_or_path", "dataset_name", "report_to",
           "generation_config", *HUB_PUSH)


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def _is_hub_id(value: Any) -> bool:
    """A string the job would resolve on the Hub (anything that is not an absolute path inside the job)."""
    return isinstance(value, str) and bool(value) and not value.startswith("/")


def reporters(value: Any) -> list[str]:
    """The integrations a `report_to` value names (a string of names separated by commas or spaces, or a list)."""
    return _reporters(value)


def _reporters(value: Any) -> list[str]:
    items = [str(v) for v in value] if isinstance(value, list) else [str(value)]
    return [part for item in items for part in re.split(r"[\s,]+", item.strip()) if part]


def hub_org(model: str) -> str | None:
    """`org` of a Hub id `org/name` (a bare `name` has no organization)."""
    return model.split("/", 1)[0] if "/" in model and not model.startswith("s3://") else None


def _remote_code_problems(hp: dict[str, Any], model: str | None, settings: Settings) -> list[str]:
    path, orgs = "hyperparameters.trust_remote_code", settings.remote_code_hub_orgs
    if not orgs:
        return [f"{path}: the job would import the model repository's Python with the SageMaker role; environment "
                f"{settings.environment} allows no remote code (set remote_code_hub_orgs in cdk.json to allow "
                "reviewed Hub organizations)"]
    if not (isinstance(model, str) and not model.startswith("s3://")):
        return [f"{path}: only a Hub model of {', '.join(orgs)} may run its own code; the code of an S3 model "
                "folder is whatever its last writer put there"]
    problems = []
    if hub_org(model) not in orgs:
        problems.append(f"{path}: model {model} is not from a Hub organization allowed to run its code in "
                        f"environment {settings.environment} ({', '.join(orgs)})")
    revision = hp.get("model_revision")
    if not (isinstance(revision, str) and COMMIT_RE.fullmatch(revision)):
        problems.append("hyperparameters.model_revision: with trust_remote_code the model must be pinned to a commit "
                        "(40 hex digits); a branch or tag can change after review")
    if _is_hub_id(hp.get("tokenizer_name_or_path")):
        problems.append("hyperparameters.tokenizer_name_or_path: with trust_remote_code the tokenizer comes from the "
                        "model's pinned repository (or the tokenizer stage); a second Hub repository would run its "
                        "own code")
    return problems


def policy_problems(values: dict[str, Any], model: str | None, settings: Settings) -> list[str]:
    """What `values` (hyperparameters, decoded) would make the job import, fetch or send out, against the
    environment. `model`: the spec's model (Hub id or s3:// URI); None when unknown (not a Hub model)."""
    hp = values
    problems = _remote_code_problems(hp, model, settings) if _truthy(hp.get("trust_remote_code", False)) else []
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


def needs_internet(model: str | None, values: dict[str, Any]) -> bool:
    """Whether the job must reach anything but SageMaker's own channels (a Hub model, tokenizer or dataset, a
    remote reporter); a job that needs nothing else runs with network isolation (job_requests)."""
    if not isinstance(model, str) or not model.startswith("s3://"):
        return True
    if any(_is_hub_id(values.get(n)) for n in ("tokenizer_name_or_path", "dataset_name")):
        return True
    return any(r not in LOCAL_REPORTERS for r in _reporters(values.get("report_to", "none")))
