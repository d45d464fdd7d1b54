"""Shared helpers for the Lambda tests: settings, a strict SageMaker request validator, spec strategies."""

from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

import botocore.session
import pytest
import regex  # Java-style \p{L} classes in the service model's patterns (installed with transformers)
from botocore.validate import ParamValidator
from hypothesis import strategies as st
from moto.sagemaker.models import sagemaker_backends

from hfsm_lambda import aws, handlers
from hfsm_lambda.errors import SpecError
from hfsm_lambda.plan import instance_types, job_requests, runtime_limits
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.spec import hp_paths, hyperparameters, run_spec
from hfsm_lambda.training_contract import hp_rules
from hfsm_lambda.watch import durability

ACCOUNT = "123456789012"  # moto's default account
REGION = "us-east-1"
KMS = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/1234abcd-12ab-34cd-56ef-1234567890ab"
SETTINGS: dict[str, Any] = {
    "project": "hfsm", "environment": "dev", "region": REGION, "account": ACCOUNT,
    "data_bucket": "hfsm-dev-data", "artifacts_bucket": "hfsm-dev-artifacts", "kms_key_arn": KMS,
    "sagemaker_role_arn": f"arn:aws:iam::{ACCOUNT}:role/hfsm-dev-sagemaker",
    "training_image_uri": "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:"
                          "2.9.0-transformers5.3.0-gpu-py312-cu130-ubuntu22.04",
    "processing_image_uri": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-cpu-py312",
    "inference_image_uri": "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-inference:"
                           "2.6.0-transformers4.51.3-gpu-py312-cu124-ubuntu22.04",
    "code_s3_prefix": "s3://hfsm-dev-artifacts/code/0123456789abcdef/",
    "subnet_ids": ["subnet-0aaa1111", "subnet-0bbb2222"], "security_group_ids": ["sg-0123456789abcdef0"],
    "fsx": None,
    "allowed_instance_types": ["ml.g5.2xlarge", "ml.g5.12xlarge", "ml.g6.2xlarge", "ml.p4d.24xlarge",
                               "ml.p5.48xlarge"],
    "tokenizer_instance_types": ["ml.c5.2xlarge", "ml.m5.xlarge"],
    "max_instance_count": 4,
    "spot_default": True, "inter_container_encryption": False,
    "default_max_runtime_seconds": 86400, "default_max_wait_seconds": 172800, "poll_seconds": 60,
    "model_package_group": "hfsm-dev-models",
    "topic_arn": f"arn:aws:sns:{REGION}:{ACCOUNT}:hfsm-dev-runs",
}
FSX = {"file_system_id": "fs-0123456789abcdef0", "mount_name": "abcdefgh", "subnet_id": "subnet-0fsx3333"}
SMDDP_TYPES = ("ml.p4d.24xlarge", "ml.p5.48xlarge")
# A training image that ships the SMDDP library (PyTorch 2.5 base; see lambda/plan/smddp_support.py)
SMDDP_IMAGE = ("763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:"
               "2.5.1-transformers4.49.0-gpu-py311-cu124-ubuntu22.04")
# The run spec of the handler tests (test_lambda_handlers.py and its siblings) and where its data lies
SPEC = {"version": 1, "name": "squad", "task": "question-answering", "model": "distilbert/distilbert-base-uncased",
        "data": {"train": {"s3": "datasets/squad/train/", "distribution": "ShardedByS3Key"},
                 "validation": {"s3": "datasets/squad/val/"}},
        "compute": {"instance_type": "ml.g5.2xlarge", "instance_count": 2},
        "spot": {"enabled": True, "max_wait_seconds": 7200}, "max_runtime_seconds": 3600,
        "fallback": {"max_attempts": 3, "options": [{"instance_type": "ml.g6.2xlarge"}, {"spot": False}]}}
DATA = f"s3://{SETTINGS['data_bucket']}/datasets/squad/"


def strict_json(value: Any) -> Any:
    """What the Lambda runtime does with a handler's return value (NaN is not JSON)."""
    return json.loads(json.dumps(value, allow_nan=False))


def settings_dict(**overrides: Any) -> dict[str, Any]:
    return {**copy.deepcopy(SETTINGS), **overrides}


@dataclass
class FakeContext:
    """The parts of the Lambda context object a handler might touch."""

    function_name: str = "hfsm-dev-handler"
    aws_request_id: str = "00000000-0000-0000-0000-000000000000"
    memory_limit_in_mb: int = 256
    invoked_function_arn: str = f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:hfsm-dev-handler"

    def get_remaining_time_in_millis(self) -> int:
        return 60_000


# --- request validation ----------------------------------------------------------------------------------
@lru_cache(maxsize=1)
def _sagemaker_model() -> Any:
    return botocore.session.get_session().get_service_model("sagemaker")


def _walk(shape: Any, value: Any, path: str, errors: list[str]) -> None:
    """What botocore's ParamValidator leaves out: max lengths/sizes, patterns, enums, integer ranges."""
    check = _CHECKS.get(shape.type_name)
    if check is not None:
        check(shape, value, path, errors)


def _walk_structure(shape: Any, value: Any, path: str, errors: list[str]) -> None:
    for name, member in shape.members.items():
        if isinstance(value, dict) and name in value:
            _walk(member, value[name], f"{path}.{name}", errors)


def _walk_list(shape: Any, value: Any, path: str, errors: list[str]) -> None:
    meta = shape.metadata
    if "max" in meta and len(value) > meta["max"]:
        errors.append(f"{path}: {len(value)} items > max {meta['max']}")
    for i, item in enumerate(value):
        _walk(shape.member, item, f"{path}[{i}]", errors)


def _walk_map(shape: Any, value: Any, path: str, errors: list[str]) -> None:
    meta = shape.metadata
    if "max" in meta and len(value) > meta["max"]:
        errors.append(f"{path}: {len(value)} entries > max {meta['max']}")
    for key, item in value.items():
        _walk(shape.key, key, f"{path}<key {key}>", errors)
        _walk(shape.value, item, f"{path}.{key}", errors)


def _check_string(shape: Any, value: Any, path: str, errors: list[str]) -> None:
    meta = shape.metadata
    if "max" in meta and len(value) > meta["max"]:
        errors.append(f"{path}: length {len(value)} > max {meta['max']}")
    if "min" in meta and len(value) < meta["min"]:
        errors.append(f"{path}: length {len(value)} < min {meta['min']}")
    if getattr(shape, "enum", None) and value not in shape.enum:
        errors.append(f"{path}: {value!r} not in enum")
    pattern = meta.get("pattern")
    if pattern and not regex.fullmatch(java_pattern(pattern), value):
        errors.append(f"{path}: {value!r} does not match {pattern}")


def _check_integer(shape: Any, value: Any, path: str, errors: list[str]) -> None:
    meta = shape.metadata
    if "max" in meta and value > meta["max"]:
        errors.append(f"{path}: {value} > max {meta['max']}")


# The checks by the shape's type; other types (booleans, timestamps, blobs, ...) have none here.
_CHECKS = {"structure": _walk_structure, "list": _walk_list, "map": _walk_map, "string": _check_string,
           "integer": _check_integer, "long": _check_integer}


JAVA_DOT = "[^\\n\\r\\x85\\u2028\\u2029]"


def java_pattern(pattern: str) -> str:
    """The service model's patterns are Java regexes: there `.` stops at every line terminator."""
    return re.sub(r"(?<!\\)\.(?=[*+?{])", lambda _: JAVA_DOT, pattern)


def sagemaker_request_errors(operation: str, params: dict[str, Any]) -> list[str]:
    """botocore's client-side validation plus the service model's max/pattern/enum constraints."""
    shape = _sagemaker_model().operation_model(operation).input_shape
    report = ParamValidator().validate(params, shape)
    errors = [report.generate_report()] if report.has_errors() else []
    _walk(shape, params, operation, errors)
    json.dumps(params)  # must be JSON-serializable (it travels through Step Functions state)
    return errors


# --- spec strategies -------------------------------------------------------------------------------------
# Built from alphabets (much faster to generate than st.from_regex).
LOWER = "abcdefghijklmnopqrstuvwxyz"
DIGITS = "0123456789"
NAMES = st.builds(str.__add__, st.sampled_from(LOWER), st.text(LOWER + DIGITS + "-", max_size=31))
_HUB_WORD = LOWER + LOWER.upper() + DIGITS + "_"
_HUB_PART = st.builds(lambda a, mid, b: a + mid + b, st.sampled_from(_HUB_WORD), st.text(_HUB_WORD + ".-", max_size=12),
                      st.sampled_from(_HUB_WORD)).filter(lambda p: "--" not in p and ".." not in p)
HUB_IDS = st.sampled_from(["bert-base-uncased", "distilbert/distilbert-base-uncased", "google-t5/t5-small",
                           "deepset/roberta-base-squad2", "facebook/bart-base", "org.x/model_v1.2", "_x/y"]) | \
    st.builds(lambda ns, name: f"{ns}/{name}" if ns else name, st.none() | _HUB_PART, _HUB_PART).filter(
        lambda i: not i.endswith(".git"))
# Descriptions and tags may hold any letters, digits (and for descriptions symbols, punctuation, marks).
DESCRIPTIONS = st.text(st.characters(categories=("L", "M", "Zs", "S", "N", "P")), max_size=256)
S3_KEYS = st.builds("datasets/{}/".format, st.text(LOWER + DIGITS + "_-", min_size=1, max_size=20))
WORDS = st.text(LOWER + DIGITS + "_", min_size=1, max_size=10)
HP_META = hyperparameters.schema()
# Names a rule across hyperparameters reads are left to the equivalence test (test_lambda_hp_equivalence.py), and
# names the code-execution policy judges by environment to tests/lambda/plan/test_lambda_code_policy.py, and names of
# paths (lambda/spec/hp_paths.py) to tests/lambda/spec/test_lambda_hp_paths.py: here any value of the others is valid on its own.
RULE_FIELDS = {f for rule in hp_rules.RULES for f in rule["fields"]} | {"precision", "task"}
SETTABLE_HPS = hyperparameters.settable()
FREE_HPS = sorted(set(SETTABLE_HPS) - RULE_FIELDS - set(hyperparameters.POLICED) - set(hp_paths.RULES))
LINE_BREAKS = "\n\r\x85\u2028\u2029"


def _hp_value(name: str, meta: dict[str, Any]) -> st.SearchStrategy[Any]:
    bounds = hp_rules.BOUNDS.get(name, {})
    if meta.get("choices"):
        return st.sampled_from(meta["choices"])
    kind = meta["type"]
    if kind == "integer":
        low = int(bounds.get("minimum", bounds.get("exclusiveMinimum", -2) + 1))
        return st.integers(low, int(bounds.get("maximum", 10**6)))
    if kind == "number":
        low = bounds.get("minimum", bounds.get("exclusiveMinimum", -10))
        high = min(10, bounds.get("maximum", 10))
        if "exclusiveMaximum" in bounds:
            values = st.floats(low, bounds["exclusiveMaximum"], exclude_max=True, allow_nan=False)
        else:
            values = st.floats(low, high, exclude_min="exclusiveMinimum" in bounds, allow_nan=False,
                               allow_infinity=False) | st.integers(
                max(int(low) + 1, 0), int(high))
        return values if low >= 0 else values | st.sampled_from([-1e-05, -2.5e-07, -3.0])
    if kind == "boolean":
        return st.booleans()
    if kind == "object":
        keys = st.sampled_from(meta["keys"]) if "keys" in meta else WORDS
        return st.dictionaries(keys, st.integers(-10**9, 10**9) | st.booleans(), max_size=3)
    if kind == "array":
        return st.builds(lambda v: [v], WORDS)
    text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",), exclude_characters=LINE_BREAKS + "\x00"),
                   max_size=40)
    return text.filter(lambda t: not t.startswith("-")) | st.sampled_from(["-1", "-0.5", ""])


HYPERPARAMETERS = st.lists(st.sampled_from(FREE_HPS), unique=True, max_size=8).flatmap(
    lambda names: st.fixed_dictionaries({n: _hp_value(n, HP_META[n]) for n in names}))
TAG_CHARS = LOWER + LOWER.upper() + DIGITS + " _.:/=+@-"
TAG_TEXT = st.text(TAG_CHARS, max_size=20) | st.text(st.characters(categories=("L", "N", "Zs")), max_size=20)
TAG_KEYS = st.builds(str.__add__, st.sampled_from(LOWER.upper()), TAG_TEXT).filter(
    lambda k: k not in run_spec.RESERVED_TAG_KEYS and not k.lower().startswith("aws:"))
TAGS = st.dictionaries(TAG_KEYS, TAG_TEXT, max_size=5)


def _maybe(draw: Any, target: dict[str, Any], key: str, strategy: st.SearchStrategy[Any]) -> None:
    if draw(st.booleans()):
        target[key] = draw(strategy)


def declared(path: str) -> Any:
    """The run spec's declaration of the field at `path` (run_spec.SPEC), e.g. "compute.volume_size_gb"."""
    kind = run_spec.SPEC
    for part in path.split("."):
        kind = kind.fields[part]
    return getattr(kind, "number", kind)  # a number-or-word field: its number's bounds


def declared_numbers(path: str, *, low: float | None = None, high: float | None = None) -> Any:
    """Values the declaration of `path` accepts, from its own bounds (narrowed only where the caller says why):
    the generators hold no copy of the spec's limits."""
    kind = declared(path)
    lo, hi = max(kind.low, low if low is not None else kind.low), min(kind.high, high if high is not None else kind.high)
    if isinstance(kind.low, int) and isinstance(kind.high, int):
        return st.integers(int(lo), int(hi))
    return st.floats(lo, hi, allow_nan=False) | st.integers(int(lo) + 1, int(hi))


@st.composite
def valid_specs(draw: Any, with_fsx: bool = False) -> dict[str, Any]:
    """Specs that must pass validation and pre-flight (data present) in SETTINGS (+FSX when with_fsx)."""
    spec: dict[str, Any] = {"version": 1, "name": draw(NAMES), "task": draw(st.sampled_from(run_spec.TASKS))}
    spec["model"] = draw(HUB_IDS | st.builds(lambda k: f"s3://{SETTINGS['artifacts_bucket']}/{k}",
                                             st.sampled_from(["models/base/", "models/base/model.tar.gz"])))
    # smddp is valid only where the training image ships the library; SETTINGS' image (PyTorch 2.9) does not
    # (tests/lambda/plan/test_lambda_smddp.py covers it with an image that does)
    strategy = draw(st.sampled_from([s for s in run_spec.STRATEGIES if s != "smddp"]))
    types = SMDDP_TYPES if strategy == "smddp" else tuple(SETTINGS["allowed_instance_types"])
    spec["compute"] = compute = _draw_compute(draw, strategy, types)
    spec["distribution"] = _draw_distribution(draw, strategy)
    spec["data"] = data = _draw_data(draw, with_fsx)
    # every_minutes below is at most 600: a runtime above its floor
    runtime = draw(declared_numbers("max_runtime_seconds", low=runtime_limits.floor(600)))
    _maybe(draw, spec, "max_runtime_seconds", st.just(runtime))
    spec["spot"] = _draw_spot(draw, runtime if "max_runtime_seconds" in spec else None)
    checkpoint = _draw_checkpoint(draw)
    if checkpoint:
        spec["checkpoint"] = checkpoint
    spec["fallback"] = fallback = _draw_fallback(draw, types)
    if strategy != "none":
        _maybe_processes_per_host(draw, compute, fallback["options"])
    spec["hyperparameters"] = draw(HYPERPARAMETERS)
    spec["tags"] = draw(TAGS)
    if draw(st.booleans()):
        spec["tokenizer"] = _draw_tokenizer(draw, [n for n, c in data.items() if "s3" in c])
    if draw(st.booleans()):
        spec["local"] = {"interrupt_at_step": draw(declared_numbers("local.interrupt_at_step"))}
    _maybe(draw, spec, "description", DESCRIPTIONS)
    _maybe(draw, spec, "$schema", st.just("../docs/run-spec.schema.json"))
    return spec


def _draw_compute(draw: Any, strategy: str, types: tuple[str, ...]) -> dict[str, Any]:
    """compute without processes_per_host (drawn once the fallback options are: _maybe_processes_per_host)."""
    count = 1 if strategy == "none" else draw(st.integers(1, SETTINGS["max_instance_count"]))
    compute: dict[str, Any] = {"instance_type": draw(st.sampled_from(types)), "instance_count": count}
    _maybe(draw, compute, "volume_size_gb", declared_numbers("compute.volume_size_gb"))
    return compute


def _draw_distribution(draw: Any, strategy: str) -> dict[str, Any]:
    distribution: dict[str, Any] = {"strategy": strategy}
    if strategy == "fsdp" and draw(st.booleans()):
        distribution["fsdp"] = {"sharding": draw(st.sampled_from(["full_shard auto_wrap", "shard_grad_op",
                                                                  "hybrid_shard offload auto_wrap"])),
                                "config": draw(st.sampled_from([{}, {"backward_prefetch": "backward_pre"},
                                                                {"transformer_layer_cls_to_wrap": ["BertLayer"]}]))}
    return distribution


def _draw_data(draw: Any, with_fsx: bool) -> dict[str, Any]:
    """train, and maybe validation and test: each on S3, or (with_fsx, not train) maybe on FSx."""
    data: dict[str, Any] = {}
    for name in ("train", *draw(st.lists(st.sampled_from(["validation", "test"]), unique=True))):
        channel: dict[str, Any]
        if with_fsx and name != "train" and draw(st.booleans()):
            channel = {"fsx": "/" + "/".join(draw(st.lists(WORDS, min_size=1, max_size=3)))}
        else:
            channel = {"s3": f"s3://{SETTINGS['data_bucket']}/{draw(S3_KEYS)}"}
            _maybe(draw, channel, "distribution", st.sampled_from(run_spec.DISTRIBUTION_TYPES))
            _maybe(draw, channel, "input_mode", st.sampled_from(run_spec.INPUT_MODES))
        data[name] = channel
    return data


def _draw_spot(draw: Any, runtime: Any) -> dict[str, Any]:
    """runtime: the spec's max_runtime_seconds, None where the spec leaves it out."""
    spot: dict[str, Any] = {}
    _maybe(draw, spot, "enabled", st.booleans())
    if draw(st.booleans()):
        spot["max_wait_seconds"] = draw(declared_numbers(  # the wait covers the runtime (a rule across fields)
            "spot.max_wait_seconds", low=runtime if runtime is not None else 86400))
    return spot


def _draw_checkpoint(draw: Any) -> dict[str, Any]:
    checkpoint: dict[str, Any] = {}
    _maybe(draw, checkpoint, "every_steps", declared_numbers("checkpoint.every_steps"))
    _maybe(draw, checkpoint, "every_minutes", declared_numbers("checkpoint.every_minutes", high=600))
    if checkpoint.get("every_minutes", 30) and draw(st.booleans()):
        checkpoint["watchdog"] = draw(st.fixed_dictionaries({}, optional={
            "intervals": declared_numbers("checkpoint.watchdog.intervals"),
            "action": st.sampled_from(["warn", "off"])}))
    return checkpoint


def _draw_fallback(draw: Any, types: tuple[str, ...]) -> dict[str, Any]:
    options = draw(st.lists(st.fixed_dictionaries({}, optional={"instance_type": st.sampled_from(types),
                                                                "spot": st.booleans()}).filter(bool), max_size=3))
    fallback: dict[str, Any] = {"options": options}
    _maybe(draw, fallback, "max_attempts", declared_numbers("fallback.max_attempts"))
    return fallback


def _maybe_processes_per_host(draw: Any, compute: dict[str, Any], options: list[dict[str, Any]]) -> None:
    """At most the GPUs of every attempt's instance type (lambda/plan/instance_types.py)."""
    gpus = min(instance_types.GPUS[t] for t in [compute["instance_type"]]
               + [o["instance_type"] for o in options if "instance_type" in o])
    _maybe(draw, compute, "processes_per_host", declared_numbers("compute.processes_per_host", high=gpus))


def _draw_tokenizer(draw: Any, s3_channels: list[str]) -> dict[str, Any]:
    tokenizer: dict[str, Any] = {"type": draw(st.sampled_from(run_spec.TOKENIZER_TYPES)),
                                 "channel": draw(st.sampled_from(s3_channels))}
    # at least the byte-level alphabet plus the special tokens (a tokenizer rule across fields)
    _maybe(draw, tokenizer, "vocab_size", declared_numbers("tokenizer.vocab_size", low=300))
    _maybe(draw, tokenizer, "instance_count", st.integers(1, SETTINGS["max_instance_count"]))
    _maybe(draw, tokenizer, "lowercase", st.booleans())
    _maybe(draw, tokenizer, "instance_type", st.sampled_from(SETTINGS["tokenizer_instance_types"]))
    return tokenizer


def all_requests(run: Any, settings: Any) -> list[tuple[str, dict[str, Any]]]:
    """Every request a run can send: each attempt's CreateTrainingJob and the tokenizer jobs."""
    return job_requests.build_requests(run, settings)


def stand_in_state_machine(monkeypatch: Any) -> str:
    """A one-Pass-state fine-tune machine on moto, named as the stack names it; STATE_MACHINE_ARN points at it."""
    from hfsm_lambda import aws

    definition = {"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}
    arn = aws.client("stepfunctions").create_state_machine(
        name="hfsm-dev-fine-tune", roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn", definition=json.dumps(definition))[
        "stateMachineArn"]
    monkeypatch.setenv("STATE_MACHINE_ARN", arn)
    return arn


def sm_backend():
    return sagemaker_backends[ACCOUNT][REGION]


T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)  # the watched job's Training start (start_watched_job)


def start_watched_job(spec: dict, put_data, context, monkeypatch) -> tuple:
    """Prepare and StartTraining of `spec` against moto, the job Training since T0, CheckJob's clock at T0 (advance
    clock["now"]), and its StopTrainingJob calls recorded: (run, job, moto's job, clock, stopped job names)."""
    put_data(DATA + "train/", 4)
    put_data(DATA + "val/", 1)
    run = strict_json(handlers.prepare({"spec": spec}, context))["run"]
    job = strict_json(handlers.start_training({"run": run, "attempt": 0}, context))
    fake = sagemaker_backends[ACCOUNT][REGION].training_jobs[job["job_name"]]
    fake.training_job_status, fake.secondary_status = "InProgress", "Training"
    fake.secondary_status_transitions = [{"Status": "Starting", "StartTime": T0 - timedelta(minutes=5)},
                                         {"Status": "Training", "StartTime": T0}]
    clock = {"now": T0}
    monkeypatch.setattr(durability, "utc_now", lambda: clock["now"])
    stops: list[str] = []

    def stop_training_job(TrainingJobName: str) -> dict:  # noqa: N803 - boto3's parameter name
        stops.append(TrainingJobName)
        fake.training_job_status = "Stopping"
        return {}

    monkeypatch.setattr(aws.client("sagemaker"), "stop_training_job", stop_training_job)
    return run, job, fake, clock, stops


# a distributed QA run planned at NOW (tests/lambda/plan/test_lambda_requests.py, watch/test_lambda_stalls.py)
NOW = datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
BASE = {"version": 1, "name": "dist", "task": "question-answering", "model": "distilbert/distilbert-base-uncased",
        "data": {"train": {"s3": "datasets/squad/train/"}, "validation": {"s3": "datasets/squad/val/"}},
        "compute": {"instance_type": "ml.p4d.24xlarge", "instance_count": 2},
        "spot": {"enabled": True, "max_wait_seconds": 7200}, "max_runtime_seconds": 3600,
        "hyperparameters": {"num_train_epochs": 1, "bf16": True}}


def run_for(settings, **changes):
    raw = copy.deepcopy(BASE)
    raw.update(changes)
    return prepare_run(raw, settings, now=NOW)


def training(settings, attempt=0, **changes):
    return job_requests.training_request(run_for(settings, **changes), settings, attempt)


MINIMAL = {"version": 1, "name": "tiny", "task": "text-classification", "model": "bert-base-uncased",
           "data": {"train": {"s3": "s3://hfsm-dev-data/datasets/x/"}}}


def problems_of(raw, settings) -> list[str]:
    with pytest.raises(SpecError) as info:
        run_spec.parse_spec(raw, settings)
    return info.value.problems
