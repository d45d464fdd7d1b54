"""Run spec v1: validation messages, defaults, the examples."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from testkit.lambdas import MINIMAL, problems_of, settings_dict

from hfsm_lambda.errors import PreflightError, SpecError
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.settings import Settings
from hfsm_lambda.spec import run_spec

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples").glob("*.json"))
SETTINGS_PLAIN = Settings.from_dict(settings_dict())
def test_minimal_spec_gets_environment_defaults(settings):
    spec = run_spec.parse_spec(MINIMAL, settings)
    assert spec["compute"] == {"instance_type": "ml.g5.2xlarge", "instance_count": 1, "volume_size_gb": 100}
    assert spec["spot"] == {"enabled": True, "max_wait_seconds": 172800}
    assert spec["max_runtime_seconds"] == 86400
    assert spec["distribution"] == {"strategy": "ddp"}
    assert spec["checkpoint"] == {"every_steps": 500, "every_minutes": "auto",
                                  "watchdog": {"intervals": 3, "action": "warn"}}
    assert spec["fallback"] == {"max_attempts": 1, "options": []}
    assert spec["data"]["train"] == {"s3": "s3://hfsm-dev-data/datasets/x/", "distribution": "FullyReplicated",
                                     "input_mode": "File"}
    assert "tokenizer" not in spec and spec["hyperparameters"] == {} and spec["tags"] == {}
    assert run_spec.parse_spec(spec, settings) == spec  # resolving twice changes nothing


def test_bare_key_prefix_is_in_the_data_bucket(settings):
    spec = run_spec.parse_spec({**MINIMAL, "data": {"train": {"s3": "datasets/x/"}}}, settings)
    assert spec["data"]["train"]["s3"] == "s3://hfsm-dev-data/datasets/x/"


def test_default_max_wait_covers_a_longer_runtime(settings):
    spec = run_spec.parse_spec({**MINIMAL, "max_runtime_seconds": 200000}, settings)
    assert spec["spot"]["max_wait_seconds"] == 200000


def test_unknown_fields_are_named_with_their_path_and_the_allowed_names(settings):
    raw = copy.deepcopy(MINIMAL)
    raw["compute"] = {"instance_typ": "ml.g5.2xlarge"}
    raw["data"]["train"]["mode"] = "File"
    raw["extra"] = 1
    problems = problems_of(raw, settings)
    assert ("compute.instance_typ: unknown field; allowed: instance_count, instance_type, processes_per_host, "
            "volume_size_gb (did you mean 'instance_type'?)") in problems
    assert any(p.startswith("data.train.mode: unknown field; allowed: distribution, fsx, input_mode, s3")
               for p in problems)
    assert any(p.startswith("extra: unknown field") for p in problems)


def test_every_problem_is_reported_at_once(settings):
    raw = {"version": 2, "name": "Bad_Name", "task": "qa", "model": "not a model id!",
           "data": {"train": {"s3": "http://x"}, "eval": {}}, "compute": {"instance_count": 0},
           "distribution": {"strategy": "deepspeed"}, "hyperparameters": {"sagemaker_program": "x.py",
                                                                          "learning_rate": "fast", "lr": 1},
           "tags": {"project": "other"}, "fallback": {"max_attempts": 11, "options": [{}]}}
    problems = problems_of(raw, settings)
    fields = [p.split(":", 1)[0] for p in problems]
    for expected in ("version", "name", "task", "model", "data.train.s3", "data.eval", "compute.instance_count",
                     "distribution.strategy", "hyperparameters.sagemaker_program", "hyperparameters.learning_rate",
                     "hyperparameters.lr", "tags.project", "fallback.max_attempts", "fallback.options[0]"):
        assert expected in fields, (expected, problems)
    message = str(SpecError(problems))
    assert message.startswith(f"invalid run spec ({len(problems)} problems):\n- ")


def test_task_error_lists_the_allowed_values(settings):
    assert run_spec.TASKS[:3] == ("question-answering", "text-classification", "summarization")
    assert f"task: 'qa' is not allowed; allowed: {', '.join(run_spec.TASKS)}" in \
        problems_of({**MINIMAL, "task": "qa"}, settings)


def test_required_fields(settings):
    problems = problems_of({}, settings)
    for name in ("version", "name", "task", "model", "data"):
        assert f"{name}: required field is missing" in problems


def test_not_an_object_and_not_json(settings):
    assert problems_of([], settings)[0].startswith("(root): expected an object")
    with pytest.raises(SpecError, match=r"\(root\): not valid JSON"):
        run_spec.parse_spec_text("{nope")


@pytest.mark.parametrize(("hp", "value", "message"), [
    ("sagemaker_program", "x.py", "reserved for SageMaker"),
    ("model_name_or_path", "x", "set by the pipeline from model"),
    ("save_steps", 10, "set by the pipeline from checkpoint.every_steps"),
    ("fsdp_config", "{}", "set by the pipeline from distribution.fsdp.config"),
    ("learning_rat", 0.1, "unknown hyperparameter: the training script accepts the names in "),
    ("hub_token", "hf_x", "secrets must not be hyperparameters"),
    ("output_dir", "/tmp", "set by the pipeline from the checkpoint LocalPath"),
    ("lr_scheduler_kwargs", "not json", "expected a JSON object"),
    ("label_names", ["a", "b"], "expected one value"),
    ("num_train_epochs", "3", "expected a number"),
    ("bf16", "true", "expected true or false"),
    ("per_device_train_batch_size", 1.5, "expected an integer"),
    ("lr_scheduler_kwargs", {"num_cycles": 2}, None),
    ("lr_scheduler_kwargs", '{"num_cycles": 2}', None),
    ("label_names", ["start_positions"], None),
    ("lr_scheduler_type", "warm", "is not allowed; allowed: linear, cosine"),
])
def test_hyperparameter_checks(settings, hp, value, message):
    raw = {**MINIMAL, "hyperparameters": {hp: value}}
    if message is None:
        assert run_spec.parse_spec(raw, settings)["hyperparameters"] == {hp: value}
        return
    problems = problems_of(raw, settings)
    assert any(p.startswith(f"hyperparameters.{hp}: ") and message in p for p in problems), problems


def test_unknown_hyperparameter_suggests_the_closest_name(settings):
    problems = problems_of({**MINIMAL, "hyperparameters": {"learning_rat": 0.1}}, settings)
    assert "did you mean 'learning_rate'" in problems[0]


def test_distribution_cross_field_rules(settings):
    problems = problems_of({**MINIMAL, "compute": {"instance_count": 2, "processes_per_host": 2},
                            "distribution": {"strategy": "none", "fsdp": {}}}, settings)
    assert any(p.startswith("distribution.strategy: 'none' runs one process") for p in problems)
    assert any(p.startswith("compute.processes_per_host: only used by a distributed strategy") for p in problems)
    assert any(p.startswith("distribution.fsdp: only allowed with strategy 'fsdp'") for p in problems)


@pytest.mark.parametrize(("sharding", "ok"), [("full_shard auto_wrap", True), ("shard_grad_op", True),
                                              ("hybrid_shard offload auto_wrap", True), ("auto_wrap", False),
                                              ("full_shard no_shard", False), ("full_shard zero3", False),
                                              ("", False)])
def test_fsdp_sharding_options(settings, sharding, ok):
    raw = {**MINIMAL, "distribution": {"strategy": "fsdp", "fsdp": {"sharding": sharding}}}
    if ok:
        assert run_spec.parse_spec(raw, settings)["distribution"]["fsdp"]["sharding"] == sharding
    else:
        assert problems_of(raw, settings)[0].startswith("distribution.fsdp.sharding: ")


def test_fsx_channel_rules(settings):
    raw = {**MINIMAL, "data": {"train": {"s3": "s3://hfsm-dev-data/x/"},
                               "validation": {"fsx": "/data/val", "distribution": "ShardedByS3Key",
                                              "input_mode": "FastFile"},
                               "test": {"fsx": "/a", "s3": "s3://hfsm-dev-data/y/"}}}
    problems = problems_of(raw, settings)
    assert any(p.startswith("data.validation.input_mode: FSx channels support only File") for p in problems)
    assert any(p.startswith("data.validation.distribution: FSx channels support only FullyReplicated")
               for p in problems)
    assert any(p.startswith("data.test: give exactly one of s3") for p in problems)


def test_tokenizer_defaults_and_rules(settings):
    spec = run_spec.parse_spec({**MINIMAL, "tokenizer": {"type": "wordpiece"}}, settings)
    assert spec["tokenizer"] == {
        "type": "wordpiece", "vocab_size": 32000, "min_frequency": 2,
        "special_tokens": ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"], "text_field": "text", "lowercase": False,
        "model_max_length": 512, "channel": "train", "instance_type": "ml.c5.2xlarge", "instance_count": 1,
        "volume_size_gb": 30, "max_runtime_seconds": 86400}
    problems = problems_of({**MINIMAL, "tokenizer": {"type": "unigram", "channel": "validation",
                                                     "special_tokens": ["<s>", "<s>"], "vocab_size": 5}}, settings)
    fields = [p.split(":", 1)[0] for p in problems]
    assert {"tokenizer.type", "tokenizer.channel", "tokenizer.special_tokens", "tokenizer.vocab_size"} <= set(fields)
    assert "tokenizer.type: required field is missing" in problems_of({**MINIMAL, "tokenizer": {}}, settings)


def test_tags_rules(settings):
    problems = problems_of({**MINIMAL, "tags": {"run": "x", "aws:x": "y", "ok": "bad\nvalue"}}, settings)
    assert [p.split(": ", 1)[0] for p in problems] == ["tags.run", "tags.aws:x", "tags.ok"]


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_examples_are_valid_and_pass_static_preflight(settings, example):
    raw = json.loads(example.read_text())
    run = prepare_run(raw, settings)
    assert run.spec.task in run_spec.TASKS
    assert run.tokenizer_stage == ("tokenizer" in raw)


def test_examples_cover_every_task_and_a_tokenizer_stage():
    specs = [json.loads(p.read_text()) for p in EXAMPLES]
    assert {s["task"] for s in specs} == set(run_spec.TASKS)
    assert any("tokenizer" in s for s in specs)


def test_preflight_static_problems_name_fields(settings):
    raw = {**MINIMAL, "compute": {"instance_type": "ml.g4dn.xlarge", "instance_count": 9},
           "distribution": {"strategy": "smddp"}, "spot": {"enabled": True, "max_wait_seconds": 3000},
           "max_runtime_seconds": 3600, "model": "s3://someone-elses-bucket/model/",
           "data": {"train": {"s3": "s3://hfsm-dev-data/x/"}, "validation": {"fsx": "/val"}},
           "fallback": {"options": [{"instance_type": "ml.g5.2xlarge"}]}}
    with pytest.raises(PreflightError) as info:
        prepare_run(raw, settings)
    problems = info.value.problems
    text = "\n".join(problems)
    assert "compute.instance_type: ml.g4dn.xlarge is not allowed in environment dev; allowed: ml.g5.2xlarge" in text
    assert "fallback.options[0].instance_type: (distribution.strategy smddp) SMDDP does not run on ml.g5.2xlarge" \
        in text
    assert "distribution.strategy: smddp: the training image (huggingface-pytorch-training:2.9.0-" in text
    assert "compute.instance_count: 9 is over environment dev's limit of 4" in text
    assert "spot.max_wait_seconds: 3000 is less than max_runtime_seconds=3600" in text
    assert "data.validation.fsx: environment dev has no FSx for Lustre file system" in text
    assert "model: bucket someone-elses-bucket is not one of this environment's buckets" in text


def test_spot_wait_is_not_checked_when_no_attempt_uses_spot(settings):
    raw = {**MINIMAL, "spot": {"enabled": False, "max_wait_seconds": 60}, "max_runtime_seconds": 3600}
    assert prepare_run(raw, settings).spec.spot.max_wait_seconds == 60


def test_oversized_fsdp_config_is_reported_against_its_field(settings):
    raw = {**MINIMAL, "distribution": {"strategy": "fsdp", "fsdp": {"config": {"x": "y" * 3000}}}}
    with pytest.raises(PreflightError, match=r"distribution\.fsdp\.config: JSON-encoded value is \d+ characters"):
        prepare_run(raw, settings)


HUB_ALPHABET = "abZ09_.-/é"


@given(st.text(HUB_ALPHABET, min_size=1, max_size=12) | st.sampled_from(["org/a--b", "bert-", "a" * 96, "a" * 97,
                                                                          "o/" + "b" * 96, "x.git", "_a/_b"]))
def test_hub_ids_follow_the_hubs_own_rules(model_id):
    """Prepare takes a model id exactly when huggingface_hub's validate_repo_id does (the Hub's rules), ASCII
    only: later huggingface_hub releases add re.ASCII to that check, mirroring the Hub's own validation; the
    pinned 1.10.0 (the training image's) still lets `\\w` match non-ASCII letters."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(model_id)
        hub = model_id.isascii()
    except HFValidationError:
        hub = False
    try:
        run_spec.parse_spec({**MINIMAL, "model": model_id}, SETTINGS_PLAIN)
        ours = True
    except SpecError as err:
        assert err.problems[0].startswith("model: "), err.problems
        ours = False
    assert ours == hub, model_id


# --- checkpoint.every_minutes and checkpoint.watchdog (issue 9) ---------------------------------------------
def test_checkpoint_time_interval_and_watchdog(settings):
    spec = run_spec.parse_spec({**MINIMAL, "checkpoint": {"every_minutes": 10, "watchdog": {
        "intervals": 2.5, "action": "stop"}}, "fallback": {"max_attempts": 2}}, settings)
    assert spec["checkpoint"] == {"every_steps": 500, "every_minutes": 10,
                                  "watchdog": {"intervals": 2.5, "action": "stop"}}
    assert run_spec.parse_spec({**MINIMAL, "checkpoint": {"every_minutes": 0}}, settings)["checkpoint"][
        "watchdog"]["action"] == "off"
    assert problems_of({**MINIMAL, "checkpoint": {"every_minutes": -1, "watchdog": {"intervals": 1, "action": "x",
                                                                                     "after": 3}}}, settings) == [
        "checkpoint.every_minutes: expected \"auto\" or an integer from 0 to 10080, got -1",
        "checkpoint.watchdog.after: unknown field; allowed: action, intervals",
        "checkpoint.watchdog.intervals: expected a number from 1.5 to 100 (checkpoint intervals without a new "
        "checkpoint in S3 before the watchdog acts), got 1",
        "checkpoint.watchdog.action: 'x' is not allowed; allowed: warn, stop, off",
    ]
    (problem,) = problems_of({**MINIMAL, "checkpoint": {"watchdog": {"action": "stop"}}}, settings)
    assert problem.startswith("checkpoint.watchdog.action: 'stop' ends the job") and "max_attempts is 1" in problem
    (problem,) = problems_of({**MINIMAL, "checkpoint": {"every_minutes": 0, "watchdog": {"action": "warn"}}},
                             settings)
    assert problem.startswith("checkpoint.watchdog: needs checkpoint.every_minutes > 0")
    (problem,) = problems_of({**MINIMAL, "hyperparameters": {"save_every_minutes": 5}}, settings)
    assert "set by the pipeline from checkpoint.every_minutes" in problem


@pytest.mark.parametrize(("fields", "path", "floor"), [
    ({"max_runtime_seconds": 5}, "max_runtime_seconds", 900),  # auto: its first interval is its 5 min lower bound
    ({"max_runtime_seconds": 899}, "max_runtime_seconds", 900),
    ({"max_runtime_seconds": 5, "checkpoint": {"every_minutes": 30}}, "max_runtime_seconds", 2400),
    ({"max_runtime_seconds": 500, "checkpoint": {"every_minutes": 0}}, "max_runtime_seconds", 600),
    ({"max_runtime_seconds": 3000, "spot": {"enabled": True, "max_wait_seconds": 1000},
      "checkpoint": {"every_minutes": 30}}, "spot.max_wait_seconds", 2400),
    ({"max_runtime_seconds": 3000, "spot": {"enabled": True, "max_wait_seconds": 800}}, "spot.max_wait_seconds",
     900),
    ({"spot": {"enabled": False}, "fallback": {"options": [{"spot": True}]}, "max_runtime_seconds": 2400,
      "checkpoint": {"every_minutes": 60}}, "max_runtime_seconds", 4200),
])
def test_a_runtime_limit_below_start_up_and_one_checkpoint_is_refused(settings, fields, path, floor):
    with pytest.raises(SpecError) as info:
        prepare_run({**MINIMAL, **fields}, settings)
    (problem,) = info.value.problems
    assert problem.startswith(f"{path}: ") and f"is below {floor} s: 600 s for the job's start-up" in problem
    assert f"raise it to at least {floor}" in problem


def test_a_runtime_limit_at_the_floor_is_accepted(settings):
    assert prepare_run({**MINIMAL, "max_runtime_seconds": 900}, settings)  # every_minutes auto (the default)
    assert prepare_run({**MINIMAL, "max_runtime_seconds": 2400, "checkpoint": {"every_minutes": 30}}, settings)
    # no attempt on spot: the wait is never used, so it is not held to the floor
    assert prepare_run({**MINIMAL, "max_runtime_seconds": 2400, "spot": {"enabled": False, "max_wait_seconds": 60}},
                       settings)
