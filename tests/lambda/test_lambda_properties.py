"""Property tests: valid specs always yield valid requests; a spec with one field broken never yields a run and
its first problem names that field. Examples per test: the hypothesis profile (tests/conftest.py: dev, ci)."""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from testkit.lambdas import (
    FREE_HPS,
    HP_META,
    SETTINGS,
    all_requests,
    declared,
    sagemaker_request_errors,
    settings_dict,
    valid_specs,
)

from hfsm_lambda import naming
from hfsm_lambda.errors import PreflightError, SpecError
from hfsm_lambda.plan import preflight
from hfsm_lambda.plan import run as planned
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.settings import Settings
from hfsm_lambda.spec import run_spec, typed

PLAIN = Settings.from_dict(settings_dict())
WITH_FSX = Settings.from_dict(settings_dict(fsx={"file_system_id": "fs-0123456789abcdef0", "mount_name": "abcdefgh",
                                                 "subnet_id": "subnet-0fsx3333"}))
# A problem starts with a JSON path (keys, [index], ["quoted key"]) or (root)/(input), then ": ".
_SEGMENT = r'(?:[A-Za-z0-9_][A-Za-z0-9_:/=+@-]*|\["(?:[^"\\]|\\.)*"\]|\[\d+\])'
PROBLEM_RE = re.compile(rf"^(\(root\)|\(input\)|{_SEGMENT}(?:\.?{_SEGMENT})*): .+", re.DOTALL)


def _check_run(raw: dict[str, Any], settings_obj: Settings) -> None:
    run = prepare_run(raw, settings_obj)
    spec = typed.to_json(run.spec)
    assert run_spec.parse_spec(spec, settings_obj) == spec  # defaults are a fixed point
    assert prepare_run(run_spec.parse_spec_text(json.dumps(raw)), settings_obj).spec == run.spec  # the text path
    requests = all_requests(run, settings_obj)
    assert len(requests) == run.max_attempts + (2 if run.tokenizer_stage else 0)
    names = [r.get("TrainingJobName") or r["ProcessingJobName"] for _, r in requests]
    assert len(set(names)) == len(names) and all(naming.is_job_name(n) for n in names)
    for operation, request in requests:
        assert sagemaker_request_errors(operation, request) == [], (operation, request)
        if operation == "CreateTrainingJob":
            assert preflight.training_request_problems(request) == []
            hps = request["HyperParameters"]
            assert all(isinstance(v, str) for v in hps.values())
            assert json.loads(hps["sagemaker_program"]) == "train.py"
            assert json.loads(hps["sagemaker_job_name"]) == request["TrainingJobName"]
            assert request["CheckpointConfig"]["S3Uri"] == run.uris.checkpoint
            if request["EnableManagedSpotTraining"]:
                stop = request["StoppingCondition"]
                assert stop["MaxWaitTimeInSeconds"] >= stop["MaxRuntimeInSeconds"]
        else:
            assert preflight.processing_request_problems(request) == []
    json.dumps(planned.to_json(run), allow_nan=False)  # the run travels in the Step Functions state


@given(valid_specs())
def test_valid_specs_always_yield_valid_requests(raw):
    _check_run(raw, PLAIN)


@given(valid_specs(with_fsx=True))
def test_valid_specs_with_fsx_channels_yield_valid_requests(raw):
    _check_run(raw, WITH_FSX)


# --- one field broken: (mutation, path of the field the first problem must name) ---------------------------
UNKNOWN_KEYS = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)
TOP = set(run_spec.SPEC.fields)
TRAILING = ["\n", "\r\n", " ", "\u2028", "\x85"]
BAD_DESCRIPTION_CHARS = ["\u200d", "\ufeff", "\u202e", "\x85", "\ud800", "\x00", "\n", "\ue000"]
BAD_HUB_IDS = ["org/a--b", "bert-", "-bert", "a..b", "org/x.git", "org/name/extra", "café", ".x", "a b", "", "x" * 97,
               "bert-base-uncased\n", "org/-x", "org-/x"]


def _train_s3(spec: dict[str, Any]) -> bool:
    return "s3" in spec["data"]["train"]


Broken = tuple[dict[str, Any], str]  # a spec with one field broken, and the path of that field


def _unknown_top(draw: Any, spec: dict[str, Any]) -> Broken:
    key = draw(UNKNOWN_KEYS.filter(lambda k: k not in TOP))
    spec[key] = draw(st.integers())
    return spec, key


def _unknown_compute(draw: Any, spec: dict[str, Any]) -> Broken:
    key = draw(UNKNOWN_KEYS.filter(lambda k: k not in run_spec.SPEC.fields["compute"].fields))
    spec["compute"][key] = 1
    return spec, f"compute.{key}"


def _unknown_channel_field(draw: Any, spec: dict[str, Any]) -> Broken:
    key = draw(UNKNOWN_KEYS.filter(lambda k: k not in {"s3", "fsx", "distribution", "input_mode"}))
    spec["data"]["train"][key] = "x"
    return spec, f"data.train.{key}"


def _unknown_channel(draw: Any, spec: dict[str, Any]) -> Broken:
    key = draw(UNKNOWN_KEYS.filter(lambda k: k not in run_spec.CHANNELS))
    spec["data"][key] = {"s3": "datasets/x/"}
    return spec, f"data.{key}"


def _version(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["version"] = draw(st.integers().filter(lambda v: v != 1) | st.sampled_from(["1", True, 1.0, None]))
    return spec, "version"


def _task(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["task"] = draw(st.text(max_size=20).filter(lambda t: t not in run_spec.TASKS))
    return spec, "task"


def _name(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["name"] = draw(st.sampled_from(["", "Upper", "1abc", "a" * 33, "has_underscore", "sp ace", "r\n"]))
    return spec, "name"


def _missing(draw: Any, spec: dict[str, Any]) -> Broken:
    key = draw(st.sampled_from(["version", "name", "task", "model", "data"]))
    del spec[key]
    return spec, key


def _count_type(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["compute"]["instance_count"] = draw(st.sampled_from([0, -1, "2", 1.5, None, True, 2.0]))
    return spec, "compute.instance_count"


def _type_not_allowed(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["compute"]["instance_type"] = draw(st.sampled_from(["ml.g4dn.xlarge", "ml.c5.xlarge", "ml.p3.2xlarge"]))
    spec["hyperparameters"].pop("tf32", None)
    spec["compute"].pop("processes_per_host", None)  # 2 on a 1-GPU type would be a second broken field
    return spec, "compute.instance_type"


def _count_over_limit(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["distribution"]["strategy"] = "ddp" if spec["distribution"]["strategy"] == "none" else \
        spec["distribution"]["strategy"]
    spec["compute"]["instance_count"] = draw(st.integers(SETTINGS["max_instance_count"] + 1, 64))
    return spec, "compute.instance_count"


def _sagemaker_hp(draw: Any, spec: dict[str, Any]) -> Broken:
    key = "sagemaker_" + draw(UNKNOWN_KEYS)
    spec["hyperparameters"][key] = "x"
    return spec, f"hyperparameters.{key}"


def _unknown_hp(draw: Any, spec: dict[str, Any]) -> Broken:
    key = draw(UNKNOWN_KEYS.filter(lambda k: k not in HP_META))
    spec["hyperparameters"][key] = 1
    return spec, f"hyperparameters.{key}"


def _hp_type(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["hyperparameters"]["per_device_train_batch_size"] = draw(st.sampled_from(["8", 1.5, True, None, [8], 8.0]))
    return spec, "hyperparameters.per_device_train_batch_size"


def _reserved_tag(draw: Any, spec: dict[str, Any]) -> Broken:
    key = draw(st.sampled_from([*run_spec.RESERVED_TAG_KEYS, "aws:x", "AWS:cost"]))
    spec["tags"] = {key: "x"}
    return spec, f"tags.{key}"


def _wait_below_runtime(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["max_runtime_seconds"] = 86400  # above the runtime floor of any every_minutes drawn (<= 600)
    spec["spot"] = {"enabled": True, "max_wait_seconds": draw(st.integers(1, 86399))}
    return spec, "spot.max_wait_seconds"


def _smddp_type(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["distribution"] = {"strategy": "smddp"}
    spec["compute"]["instance_type"] = "ml.g5.2xlarge"
    spec["compute"].pop("processes_per_host", None)  # 2 on a 1-GPU type would be a second broken field
    spec["fallback"]["options"] = []
    return spec, "compute.instance_type"


def _fsx_without_fsx(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["data"]["validation"] = {"fsx": "/data/val"}
    if spec.get("tokenizer", {}).get("channel") == "validation":
        spec["tokenizer"]["channel"] = "train"  # one broken field: an FSx tokenizer channel is a second problem
    return spec, "data.validation.fsx"


def _distribution_type(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["data"]["train"] = {"s3": "datasets/x/", "distribution": draw(st.sampled_from(["Sharded", "none", 1]))}
    return spec, "data.train.distribution"


def _none_multi_node(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["distribution"] = {"strategy": "none"}
    spec["compute"] = {"instance_type": "ml.g5.2xlarge", "instance_count": draw(st.integers(2, 4))}
    return spec, "distribution.strategy"


def _foreign_bucket(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["data"]["train"] = {"s3": "s3://some-other-bucket/data/"}
    return spec, "data.train.s3"


def _fallback_unknown(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["fallback"] = {"options": [{"instance_typ": "ml.g5.2xlarge"}]}
    return spec, "fallback.options[0].instance_typ"


def _tokenizer_type(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["tokenizer"] = {"type": draw(st.sampled_from(["unigram", "BPE", "", 3]))}
    return spec, "tokenizer.type"


def _model(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["model"] = draw(st.sampled_from(["", "a b", "s3:/x", "https://hf.co/x", "org/name/extra", 5,
                                          "s3://hfsm-dev-artifacts/models/base (1)/", "s3://hfsm-dev-artifacts/"]))
    return spec, "model"


def _trailing_newline(draw: Any, spec: dict[str, Any]) -> Broken:
    path, value = draw(st.sampled_from([
        ("name", spec["name"]), ("data.train.s3", "datasets/x/"), ("compute.instance_type", "ml.g5.2xlarge"),
        ("model", "bert-base-uncased"), ("tags.team", "nlp"), ("description", "a run")]))
    # Spaces (and U+2028, a separator) are tag and description characters for AWS; line breaks are not.
    value += draw(st.sampled_from(TRAILING if path in ("name", "data.train.s3", "compute.instance_type", "model")
                                  else ["\n", "\r\n", "\x85"]))
    target, key = _parent(spec, path)
    target[key] = value
    return spec, path


def _description_chars(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["description"] = "fine " + draw(st.sampled_from(BAD_DESCRIPTION_CHARS)) + " tune"
    return spec, "description"


def _hub_id(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["model"] = draw(st.sampled_from(BAD_HUB_IDS))
    return spec, "model"


def _hp_dash(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["hyperparameters"]["text_column"] = draw(st.sampled_from(["-x", "--text", "-1e-5", "- 1", "-"]))
    return spec, "hyperparameters.text_column"


def _hp_line_break(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["hyperparameters"]["text_column"] = "text" + draw(st.sampled_from(TRAILING[:2] + TRAILING[3:]))
    return spec, "hyperparameters.text_column"


def _save_on_each_node(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["hyperparameters"]["save_on_each_node"] = True
    return spec, "hyperparameters.save_on_each_node"


def _fp16_bf16(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["hyperparameters"].update({"fp16": True, "bf16": True})
    return spec, "hyperparameters.bf16"


def _eval_without_validation(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["data"] = {"train": spec["data"]["train"]}
    spec.get("tokenizer", {})["channel"] = "train"
    spec["hyperparameters"]["eval_strategy"] = draw(st.sampled_from(["steps", "epoch"]))
    if not _train_s3(spec):
        spec["data"]["train"] = {"s3": "datasets/x/"}
    return spec, "hyperparameters.eval_strategy"


def _doc_stride(draw: Any, spec: dict[str, Any]) -> Broken:
    spec["task"] = "question-answering"
    length = draw(st.integers(8, 512))
    spec["hyperparameters"].update({"max_seq_length": length, "doc_stride": draw(st.integers(length, 2 * length))})
    return spec, "hyperparameters.doc_stride"


def _integral_float(draw: Any, spec: dict[str, Any]) -> Broken:
    path = draw(st.sampled_from(["max_runtime_seconds", "checkpoint.every_steps", "compute.volume_size_gb"]))
    target, key = _parent(spec, path)
    target[key] = 3600.0
    return spec, path


def _empty_key(draw: Any, spec: dict[str, Any]) -> Broken:
    spec[""] = 1
    return spec, '[""]'


def _non_finite(draw: Any, spec: dict[str, Any]) -> Broken:
    value = draw(st.sampled_from([float("nan"), float("inf"), float("-inf")]))
    spec["hyperparameters"]["lr_scheduler_kwargs"] = {"power": value}
    return spec, "hyperparameters.lr_scheduler_kwargs.power"


def _hp_bounds(draw: Any, spec: dict[str, Any]) -> Broken:
    name, value = draw(st.sampled_from([("max_seq_length", 7), ("per_device_train_batch_size", 0), ("seed", -1),
                                        ("learning_rate", -0.1), ("doc_stride", 0), ("warmup_steps", -1)]))
    spec["hyperparameters"][name] = value
    return spec, f"hyperparameters.{name}"


def _runtime_range(draw: Any, spec: dict[str, Any]) -> Broken:
    limit = declared("max_runtime_seconds").high
    spec["max_runtime_seconds"] = draw(st.sampled_from([0, -5, "3600", 1.5, limit + 1]))
    spec.get("spot", {}).pop("max_wait_seconds", None)  # a wait below the runtime would be a second broken field
    return spec, "max_runtime_seconds"


# The kinds of broken field, each drawn as often as the others.
MUTATORS: dict[str, Callable[[Any, dict[str, Any]], Broken]] = {
    "unknown_top": _unknown_top, "unknown_compute": _unknown_compute,
    "unknown_channel_field": _unknown_channel_field, "unknown_channel": _unknown_channel, "version": _version,
    "task": _task, "name": _name, "missing": _missing, "count_type": _count_type,
    "type_not_allowed": _type_not_allowed, "count_over_limit": _count_over_limit, "sagemaker_hp": _sagemaker_hp,
    "unknown_hp": _unknown_hp, "hp_type": _hp_type, "reserved_tag": _reserved_tag,
    "wait_below_runtime": _wait_below_runtime, "smddp_type": _smddp_type, "fsx_without_fsx": _fsx_without_fsx,
    "distribution_type": _distribution_type, "none_multi_node": _none_multi_node, "foreign_bucket": _foreign_bucket,
    "fallback_unknown": _fallback_unknown, "tokenizer_type": _tokenizer_type, "model": _model,
    "runtime_range": _runtime_range, "trailing_newline": _trailing_newline, "description_chars": _description_chars,
    "hub_id": _hub_id, "hp_dash": _hp_dash, "hp_line_break": _hp_line_break,
    "save_on_each_node": _save_on_each_node, "fp16_bf16": _fp16_bf16,
    "eval_without_validation": _eval_without_validation, "doc_stride": _doc_stride,
    "integral_float": _integral_float, "empty_key": _empty_key, "non_finite": _non_finite, "hp_bounds": _hp_bounds,
}
MUTATIONS = list(MUTATORS)


@st.composite
def broken_specs(draw: Any) -> Broken:
    spec = copy.deepcopy(draw(valid_specs()))
    spec["hyperparameters"] = {k: v for k, v in spec["hyperparameters"].items() if k in FREE_HPS}
    return MUTATORS[draw(st.sampled_from(MUTATIONS))](draw, spec)


def _parent(spec: dict[str, Any], path: str) -> tuple[dict[str, Any], str]:
    *parents, key = path.split(".")
    target = spec
    for part in parents:
        target = target.setdefault(part, {})
    return target, key


@given(broken_specs())
def test_a_broken_field_never_yields_a_run_and_its_first_problem_names_it(case):
    raw, field = case
    with pytest.raises((SpecError, PreflightError)) as info:
        prepare_run(raw, PLAIN)
    problems = info.value.problems
    assert problems and re.match(rf"{re.escape(field)}(: |\.|\[)", problems[0]), (field, problems)
    for problem in problems:
        assert PROBLEM_RE.match(problem), problem
    assert str(info.value).count("\n- ") == len(problems)
