"""Issue 23, finding 1: every hyperparameter that names a file is confined to what it is meant for, in Prepare
(SpecError) and again in the start handlers' request guard (lambda/spec/hp_paths.py). The exploit itself, end to end in
a job: tests/hftrain/checkpoint/test_resume_confinement.py."""

from __future__ import annotations

import re
from typing import Any

import pytest
from moto.sagemaker.models import sagemaker_backends
from testkit.lambdas import SETTINGS, settings_dict

from hfsm_lambda import handlers
from hfsm_lambda import settings as settings_module
from hfsm_lambda.errors import RequestRejected, SpecError
from hfsm_lambda.plan import job_requests, request_guard
from hfsm_lambda.plan import run as run_json
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.spec import hp_paths, hyperparameters
from hfsm_lambda.training_contract import hp_rules

# The finding's spec: FSDP, and a checkpoint anyone who may write datasets/ can craft.
FINDING = {"version": 1, "name": "ckpt", "task": "summarization", "model": "s3://hfsm-dev-data/base-models/t5/",
           "data": {"train": {"s3": "datasets/sum/train/"}},
           "distribution": {"strategy": "fsdp"}, "compute": {"instance_type": "ml.g5.12xlarge"},
           "hyperparameters": {"resume_from_checkpoint": "/opt/ml/input/data/train/ckpt/checkpoint-10"}}


def env() -> settings_module.Settings:
    return settings_module.Settings.from_dict(settings_dict())


def spec_error(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(SpecError) as info:
        prepare_run(raw, env())
    return info.value.problems


def with_hp(**hps: Any) -> dict[str, Any]:
    return {**FINDING, "hyperparameters": hps}


def test_the_finding_s_spec_is_refused_by_prepare_naming_the_hyperparameter() -> None:
    (problem,) = spec_error(FINDING)
    assert problem.startswith("hyperparameters.resume_from_checkpoint: '/opt/ml/input/data/train/ckpt/checkpoint-10' "
                              "is outside what resume_from_checkpoint may name"), problem
    assert "/opt/ml/checkpoints" in problem


def test_every_hyperparameter_that_names_a_file_has_a_path_rule() -> None:
    """A new `*_path`/`*_dir`/`*_file` hyperparameter (or one documented as a path) fails here until it is given a
    rule, or is owned by the pipeline, unsettable, or an object (whose path form Prepare refuses)."""
    schema = hyperparameters.schema()
    named = {n for n in schema if re.search(r"(_path|_dir|_file|_or_path)$", n)}
    documented = {n for n, meta in schema.items() if re.search(r"\b(path|directory|folder|file)\b", meta["help"],
                                                               re.I) and meta["type"] in ("string", "object")
                  and "choices" not in meta}  # a fixed choice names no file
    handled = (set(hp_paths.RULES) | set(hp_paths.MANAGED) | set(hp_rules.UNSETTABLE) | set(hyperparameters.PIPELINE)
               | set(hyperparameters.HUB_PUSH))  # refused whatever their value
    objects = {n for n in named | documented if schema[n]["type"] == "object"}
    assert named | documented, "the schema lists path hyperparameters"
    assert (named | documented) - handled - objects == set()
    for name in objects - handled:  # e.g. accelerator_config: "a path to a JSON config file or a dict"
        assert hyperparameters.value_problem(name, "/opt/ml/input/data/train/config.json", name)
    assert {"resume_from_checkpoint", "generation_config", "tokenizer_name_or_path", "train_path", "cache_dir"} <= set(
        hp_paths.RULES)


REFUSED = [
    ("resume_from_checkpoint", "/opt/ml/input/data/train/ckpt/checkpoint-10", "outside what"),
    ("resume_from_checkpoint", "/opt/ml/input/data/model/checkpoint-1", "outside what"),
    ("resume_from_checkpoint", "/opt/ml/checkpoints/../input/data/train/checkpoint-10", "not in normal form"),
    ("resume_from_checkpoint", "/opt/ml/checkpointsX/checkpoint-1", "outside what"),
    ("resume_from_checkpoint", "//opt/ml/checkpoints/checkpoint-1", "not in normal form"),
    ("resume_from_checkpoint", "checkpoint-10", "not an absolute path"),
    ("resume_from_checkpoint", "s3://hfsm-dev-artifacts/checkpoints/other-run/checkpoint-10", "not an absolute path"),
    ("train_path", "/opt/ml/checkpoints/checkpoint-10", "outside what"),
    ("train_path", "/opt/ml/input/data/model/", "outside what"),
    ("validation_path", "/etc/passwd", "outside what"),
    ("tokenizer_name_or_path", "/opt/ml/input/data/train/tok", "outside what"),
    ("tokenizer_name_or_path", "../input/data/train/tok", "neither a Hub id nor an absolute path"),
    ("tokenizer_name_or_path", "./tok", "neither a Hub id nor an absolute path"),
    ("tokenizer_name_or_path", "org/name/../../x", "neither a Hub id nor an absolute path"),
    ("generation_config", "/opt/ml/input/data/train/generation_config.json", "outside what"),
    ("generation_config", "acme/gen", "not an absolute path"),
    ("cache_dir", "/opt/ml/input/data/train/hub", "outside what"),
    ("cache_dir", "/opt/ml/checkpoints/hub", "outside what"),
    ("cache_dir", "/tmp/../opt/ml/input/data/train", "not in normal form"),
    ("dataset_name", "/opt/ml/input/data/train", "is a path"),
    ("dataset_name", "../data", "neither a Hub id nor an absolute path"),
    ("logging_dir", "/opt/ml/model/tb", "outside what"),
]


@pytest.mark.parametrize(("name", "value", "why"), REFUSED, ids=[f"{n}={v}" for n, v, _ in REFUSED])
def test_a_path_outside_what_the_hyperparameter_is_meant_for_is_a_spec_error(name: str, value: str, why: str) -> None:
    problems = spec_error(with_hp(**{name: value}))
    assert any(p.startswith(f"hyperparameters.{name}: ") and why in p for p in problems), problems


@pytest.mark.parametrize(("name", "value"), [
    ("resume_from_checkpoint", "/opt/ml/checkpoints/checkpoint-10"),
    ("resume_from_checkpoint", "/opt/ml/checkpoints/checkpoint-10/"),
    ("train_path", "/opt/ml/input/data/train/part-0001.jsonl"),
    ("train_path", "/opt/ml/input/data/test"),
    ("validation_path", "/opt/ml/input/data/validation/dev.csv"),
    ("tokenizer_name_or_path", "/opt/ml/input/data/tokenizer"),
    ("tokenizer_name_or_path", "/opt/ml/input/data/model/tokenizer"),
    ("generation_config", "/opt/ml/input/data/model/generation_config.json"),
    ("cache_dir", "/tmp/hf-cache"),
    ("logging_dir", "/opt/ml/output/tensorboard"),
])
def test_paths_inside_what_the_hyperparameter_is_meant_for_pass(name: str, value: str) -> None:
    assert prepare_run(with_hp(**{name: value}), env()).spec.hyperparameters[name] == value


def test_hub_ids_are_left_to_the_code_execution_policy() -> None:
    for value in ("acme/tokenizer", "bert-base-uncased", "org/name.v2"):
        assert hp_paths.problem("tokenizer_name_or_path", value) is None
        assert hp_paths.problem("dataset_name", value) is None


# --- the request guard: the same rules on the request a start handler is about to send --------------------------


@pytest.fixture
def planned() -> tuple[settings_module.Settings, dict[str, Any]]:
    settings = env()
    return settings, prepare_run({**FINDING, "hyperparameters": {}}, settings)


def _forged(run: run_json.Run, **hps: Any) -> run_json.Run:
    out = run_json.to_json(run)
    out["spec"]["hyperparameters"].update(hps)
    return run_json.from_json(out)


@pytest.mark.parametrize(("hps", "fragment"), [
    ({"resume_from_checkpoint": "/opt/ml/input/data/train/ckpt/checkpoint-10"},
     "HyperParameters.resume_from_checkpoint: '/opt/ml/input/data/train/ckpt/checkpoint-10' is outside"),
    ({"checkpoint_dir": "/opt/ml/input/data/train/ckpt"}, "HyperParameters.checkpoint_dir: set by the pipeline only"),
    ({"output_dir": "/opt/ml/input/data/train"}, "HyperParameters.output_dir: set by the pipeline only"),
    ({"cache_dir": "/opt/ml/input/data/train/hub"}, "HyperParameters.cache_dir"),
    ({"sagemaker_program": "evil.py"}, "HyperParameters.sagemaker_program: 'evil.py' is not the pipeline's"),
    ({"sagemaker_mpi_custom_mpi_options": "-x LD_PRELOAD=/opt/ml/input/data/train/x.so"},
     "HyperParameters.sagemaker_mpi_custom_mpi_options: not a reserved name the pipeline sends"),
    ({"sagemaker_job_name": "hfsm-dev-other-run-train0"}, "HyperParameters.sagemaker_job_name"),
    ({"LD_PRELOAD": "/opt/ml/input/data/train/x.so"}, "HyperParameters.LD_PRELOAD: not a hyperparameter train.py"),
])
def test_the_guard_refuses_forged_path_and_reserved_hyperparameters(planned, hps: dict[str, Any],
                                                                    fragment: str) -> None:
    settings, run = planned
    bad = _forged(run, **hps)
    request = job_requests.training_request(bad, settings, 0)
    problems = request_guard.training_request_problems(request, bad, settings, 0)
    assert any(fragment in p for p in problems), problems
    assert request_guard.training_request_problems(job_requests.training_request(run, settings, 0), run, settings,
                                                   0) == []


@pytest.mark.parametrize("variable", ["PYTHONPATH", "LD_PRELOAD", "NCCL_NET_PLUGIN", "NCCL_DEBUG"])
def test_the_guard_refuses_environment_variables_the_pipeline_does_not_set(planned, variable: str) -> None:
    settings, run = planned
    request = job_requests.training_request(run, settings, 0)
    request["Environment"] = {**request.get("Environment", {}), variable: "/opt/ml/input/data/train/x"}
    problems = request_guard.training_request_problems(request, run, settings, 0)
    assert any(p.startswith("Environment:") and variable in p for p in problems), problems


def test_start_training_refuses_the_forged_resume_before_calling_sagemaker(aws_account: dict[str, Any],
                                                                          context: Any) -> None:
    settings = env()
    run = prepare_run({**FINDING, "hyperparameters": {}}, settings)
    with pytest.raises(RequestRejected) as info:
        handlers.start_training({"run": run_json.to_json(_forged(run, **FINDING["hyperparameters"])), "attempt": 0},
                                context)
    assert "HyperParameters.resume_from_checkpoint" in str(info.value)
    assert sagemaker_backends[SETTINGS["account"]][SETTINGS["region"]].training_jobs == {}
