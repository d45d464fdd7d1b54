"""Property tests: valid specs always yield valid requests; invalid ones never do and always name the field."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import hyperparameters
import job_requests
import naming
import preflight
import pytest
import run_spec
from errors import PreflightError, SpecError
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lambda_testlib import SETTINGS, all_requests, sagemaker_request_errors, settings_dict, valid_specs
from runs import prepare_run
from settings import Settings

PLAIN = Settings.from_dict(settings_dict())
WITH_FSX = Settings.from_dict(settings_dict(fsx={"file_system_id": "fs-0123456789abcdef0", "mount_name": "abcdefgh",
                                                 "subnet_id": "subnet-0fsx3333"}))
PROFILE = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
# A problem starts with a JSON path (keys, [index]) or (root)/(input), then ": ".
PROBLEM_RE = re.compile(r"^(\(root\)|\(input\)|[A-Za-z0-9_:.\-/=+@ ]+(\[\d+\])?(\.[A-Za-z0-9_:\-/=+@ ]+(\[\d+\])?)*): .+",
                        re.DOTALL)


def _check_run(raw: dict[str, Any], settings_obj: Settings) -> None:
    run = prepare_run(raw, settings_obj)
    spec = run["spec"]
    assert run_spec.parse_spec(spec, settings_obj) == spec  # defaults are a fixed point
    requests = all_requests(run, settings_obj)
    assert len(requests) == run["max_attempts"] + (2 if run["tokenizer_stage"] else 0)
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
            assert not set(spec["hyperparameters"]) & {k for k in hps if k.startswith("sagemaker_")}
            assert request["CheckpointConfig"]["S3Uri"] == run["uris"]["checkpoint"]
            if request["EnableManagedSpotTraining"]:
                stop = request["StoppingCondition"]
                assert stop["MaxWaitTimeInSeconds"] >= stop["MaxRuntimeInSeconds"]
        else:
            assert preflight.processing_request_problems(request) == []
    json.dumps(run)  # the run travels in the Step Functions state


@PROFILE
@given(valid_specs())
def test_valid_specs_always_yield_valid_requests(raw):
    _check_run(raw, PLAIN)


@PROFILE
@given(valid_specs(with_fsx=True))
def test_valid_specs_with_fsx_channels_yield_valid_requests(raw):
    _check_run(raw, WITH_FSX)


# --- invalid specs: (mutation, field path the error must name) -------------------------------------------
UNKNOWN_KEYS = st.text("abcdefghijklmnopqrstuvwxyz_", min_size=1, max_size=12)


def _set(path: list[Any], value: Any):
    def apply(spec: dict[str, Any]) -> None:
        target = spec
        for key in path[:-1]:
            target = target.setdefault(key, {})
        target[path[-1]] = value
    return apply


@st.composite
def invalid_specs(draw: Any) -> tuple[dict[str, Any], str]:
    spec = draw(valid_specs())
    spec = copy.deepcopy(spec)
    kind = draw(st.sampled_from([
        "unknown_top", "unknown_compute", "unknown_channel_field", "unknown_channel", "version", "task", "name",
        "missing", "count_type", "type_not_allowed", "count_over_limit", "sagemaker_hp", "unknown_hp", "hp_type",
        "reserved_tag", "wait_below_runtime", "smddp_type", "fsx_without_fsx", "distribution_type",
        "none_multi_node", "foreign_bucket", "fallback_unknown", "tokenizer_type", "model", "runtime_range",
    ]))
    if kind == "unknown_top":
        key = draw(UNKNOWN_KEYS.filter(lambda k: k not in {"version", "name", "task", "model", "data", "description",
                                                     "tokenizer", "compute", "distribution", "spot", "checkpoint",
                                                     "max_runtime_seconds", "fallback", "hyperparameters", "tags",
                                                     "local"}))
        spec[key] = draw(st.integers())
        return spec, key
    if kind == "unknown_compute":
        key = draw(UNKNOWN_KEYS.filter(lambda k: k not in {"instance_type", "instance_count", "volume_size_gb",
                                                           "processes_per_host"}))
        spec["compute"][key] = 1
        return spec, f"compute.{key}"
    if kind == "unknown_channel_field":
        key = draw(UNKNOWN_KEYS.filter(lambda k: k not in {"s3", "fsx", "distribution", "input_mode"}))
        spec["data"]["train"][key] = "x"
        return spec, f"data.train.{key}"
    if kind == "unknown_channel":
        key = draw(UNKNOWN_KEYS.filter(lambda k: k not in run_spec.CHANNELS))
        spec["data"][key] = {"s3": "datasets/x/"}
        return spec, f"data.{key}"
    if kind == "version":
        spec["version"] = draw(st.integers().filter(lambda v: v != 1) | st.just("1") | st.just(True))
        return spec, "version"
    if kind == "task":
        spec["task"] = draw(st.text(max_size=20).filter(lambda t: t not in run_spec.TASKS))
        return spec, "task"
    if kind == "name":
        spec["name"] = draw(st.sampled_from(["", "Upper", "1abc", "a" * 33, "has_underscore", "sp ace"]))
        return spec, "name"
    if kind == "missing":
        key = draw(st.sampled_from(["version", "name", "task", "model", "data"]))
        if key == "data":
            spec.pop("tokenizer", None)  # its channel check would need data
        del spec[key]
        return spec, key
    if kind == "count_type":
        spec["compute"]["instance_count"] = draw(st.sampled_from([0, -1, "2", 1.5, None, True]))
        return spec, "compute.instance_count"
    if kind == "type_not_allowed":
        spec["compute"]["instance_type"] = draw(st.sampled_from(["ml.g4dn.xlarge", "ml.c5.xlarge", "ml.p3.2xlarge"]))
        return spec, "compute.instance_type"
    if kind == "count_over_limit":
        if spec["distribution"]["strategy"] == "none":
            spec["distribution"]["strategy"] = "ddp"
        spec["compute"]["instance_count"] = draw(st.integers(SETTINGS["max_instance_count"] + 1, 64))
        return spec, "compute.instance_count"
    if kind == "sagemaker_hp":
        key = "sagemaker_" + draw(UNKNOWN_KEYS)
        spec["hyperparameters"][key] = "x"
        return spec, f"hyperparameters.{key}"
    if kind == "unknown_hp":
        key = draw(UNKNOWN_KEYS.filter(lambda k: k not in hyperparameters.schema()))
        spec["hyperparameters"][key] = 1
        return spec, f"hyperparameters.{key}"
    if kind == "hp_type":
        spec["hyperparameters"]["per_device_train_batch_size"] = draw(st.sampled_from(["8", 1.5, True, None, [8]]))
        return spec, "hyperparameters.per_device_train_batch_size"
    if kind == "reserved_tag":
        key = draw(st.sampled_from(run_spec.RESERVED_TAG_KEYS))
        spec["tags"][key] = "x"
        return spec, f"tags.{key}"
    if kind == "wait_below_runtime":
        spec["max_runtime_seconds"] = 7200
        spec["spot"] = {"enabled": True, "max_wait_seconds": draw(st.integers(1, 7199))}
        return spec, "spot.max_wait_seconds"
    if kind == "smddp_type":
        spec["distribution"] = {"strategy": "smddp"}
        spec["compute"]["instance_type"] = "ml.g5.2xlarge"
        return spec, "compute.instance_type"
    if kind == "fsx_without_fsx":
        spec["data"]["validation"] = {"fsx": "/data/val"}
        return spec, "data.validation.fsx"
    if kind == "distribution_type":
        spec["data"]["train"] = {"s3": "datasets/x/", "distribution": draw(st.sampled_from(["Sharded", "none", 1]))}
        return spec, "data.train.distribution"
    if kind == "none_multi_node":
        spec["distribution"] = {"strategy": "none"}
        spec["compute"] = {"instance_type": "ml.g5.2xlarge", "instance_count": draw(st.integers(2, 4))}
        return spec, "distribution.strategy"
    if kind == "foreign_bucket":
        spec["data"]["train"] = {"s3": "s3://some-other-bucket/data/"}
        return spec, "data.train.s3"
    if kind == "fallback_unknown":
        spec["fallback"] = {"options": [{"instance_typ": "ml.g5.2xlarge"}]}
        return spec, "fallback.options[0].instance_typ"
    if kind == "tokenizer_type":
        spec["tokenizer"] = {"type": draw(st.sampled_from(["unigram", "BPE", "", 3]))}
        return spec, "tokenizer.type"
    if kind == "model":
        spec["model"] = draw(st.sampled_from(["", "a b", "s3:/x", "https://hf.co/x", "org/name/extra", 5]))
        return spec, "model"
    spec["max_runtime_seconds"] = draw(st.sampled_from([0, -5, 28 * 86400 + 1, "3600", 1.5]))
    return spec, "max_runtime_seconds"


@PROFILE
@given(invalid_specs())
def test_invalid_specs_never_yield_a_run_and_always_name_the_field(case):
    raw, field = case
    built: list[Any] = []
    original = job_requests.training_request
    with pytest.raises((SpecError, PreflightError)) as info:
        run = prepare_run(raw, PLAIN)
        built.append(original(run, PLAIN))  # unreachable when the spec is rejected
    assert built == []
    problems = info.value.problems
    assert any(p == field or p.startswith(f"{field}: ") for p in problems), (field, problems)
    for problem in problems:
        assert PROBLEM_RE.match(problem), problem
    assert str(info.value).count("\n- ") == len(problems)
