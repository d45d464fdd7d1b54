"""Prepare accepts exactly the hyperparameters the training script's own parser accepts (slow: transformers).

The script side is the real path of a job: the request's HyperParameters as SageMaker stores them (values
within the API's length and `.*` pattern), decoded by the sagemaker-training toolkit into `--name value`
arguments, parsed by `hftrain.args.parse_args` (our argument classes and transformers' TrainingArguments) on a
host like the job's: an Ampere-or-newer GPU (the probes for CUDA, bf16 and TF32 answer yes), dataloader workers
available, a `validation` channel when the spec has one.

What Prepare refuses on purpose although argparse would take it is outside this corpus and tested elsewhere:
values of another JSON type (`"3"` for a number: the spec is typed), names the pipeline sets, secrets, NaN.
One rule is the issue's own, applied on both sides: a value starting with '-' that is not a negative number is
refused (argparse reads most such values as option names, and takes `-` or `-a b` as values only by heuristics).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from testkit.lambdas import FREE_HPS, HP_META, _hp_value, java_pattern, settings_dict, valid_specs

from hfsm_lambda.errors import PreflightError, SpecError
from hfsm_lambda.plan import job_requests
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.settings import Settings
from hfsm_lambda.spec import hyperparameters, run_spec

pytestmark = pytest.mark.slow
hf_args = pytest.importorskip("hftrain.args")

import regex  # noqa: E402
from sagemaker_training import environment as toolkit_env  # noqa: E402
from sagemaker_training import mapping as toolkit_mapping  # noqa: E402
from sagemaker_training import params as toolkit_params  # noqa: E402

SETTINGS = Settings.from_dict(settings_dict())
VALUE_PATTERN = java_pattern(".*")  # HyperParameterValue in botocore's SageMaker model
# The names the rules read, with values around every edge of every rule; then any other settable names.
EDGES: dict[str, list[Any]] = {
    "fp16": [True, False], "bf16": [True, False], "fp16_full_eval": [True], "bf16_full_eval": [True],
    "tf32": [True, False], "load_best_model_at_end": [True, False], "save_on_each_node": [True, False],
    "eval_strategy": ["no", "steps", "epoch"], "save_strategy": ["no", "steps", "epoch", "best"],
    "logging_strategy": ["no", "steps", "epoch"], "eval_steps": [0, 0.5, 1, 2.5, 10, 50, 100, 250, -5],
    "logging_steps": [0, 0.5, 1, 2.5, 10, 50, 100, -1], "lr_scheduler_type": ["linear", "reduce_lr_on_plateau"],
    "metric_for_best_model": ["loss", "eval_f1"], "warmup_steps": [0, 0.1, -1, 5], "warmup_ratio": [0, 0.1, -0.5],
    "dataloader_num_workers": [-1, 0, 2], "dataloader_prefetch_factor": [2], "torch_empty_cache_steps": [0, 1, -3],
    "doc_stride": [0, 1, 64, 128, 383, 384, 500], "max_seq_length": [7, 8, 64, 128, 384, 512],
    "precision": ["auto", "bf16", "fp16", "fp32"], "per_device_train_batch_size": [0, 1, 8, -1],
    "per_device_eval_batch_size": [-2, -1, 0, 1, 16],
    "seed": [-1, 0, 42, 2**32 - 1, 2**32], "learning_rate": [-1e-05, 0, 3e-05],
    "text_column": ["text", "-x", "-1", "-0.5", "--y", "", "a b", "-1e-5", "-.5", "-"],
    "null_score_diff_threshold": [-1e-05, -0.5, 0.0, 2.5e-07, -3], "max_grad_norm": [1.0, -1.0],
    "validation_path": ["/opt/ml/input/data/validation/val.jsonl"], "dataset_name": ["squad"], "validation_split": ["", "validation"],
    "label_names": [["a"], "b", ["-c"], "-d"], "debug": ["underflow_overflow", "x", ["tpu_metrics_debug"]],
    "accelerator_config": [{"split_batches": True}, {"nope": 1}, '{"even_batches": false}'],
    "max_train_samples": [0, 1, 100], "val_max_target_length": [0, 16], "n_best_size": [0, 20],
}
EDGE_VALUES = st.lists(st.sampled_from(sorted(EDGES)), unique=True, min_size=1, max_size=7).flatmap(
    lambda names: st.fixed_dictionaries({n: st.sampled_from(EDGES[n]) for n in names}))
OTHERS = st.lists(st.sampled_from(sorted(set(FREE_HPS) - set(EDGES))), unique=True, max_size=3).flatmap(
    lambda names: st.fixed_dictionaries({n: _hp_value(n, HP_META[n]) for n in names}))


@pytest.fixture(scope="module", autouse=True)
def gpu_host(tmp_path_factory):
    import transformers.training_args as training_args

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hf_args, "_cuda_info", lambda: (True, True))
        patch.setattr(hf_args, "_auto_workers", lambda has_cuda: 4)
        patch.setattr(training_args, "is_torch_bf16_gpu_available", lambda: True)
        patch.setattr(training_args, "is_torch_tf32_available", lambda: True)
        patch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path_factory.mktemp("job")))
        yield


def _spec(task: str, validation: bool, every: int, hps: dict[str, Any]) -> dict[str, Any]:
    data = {"train": {"s3": "datasets/e/train/"}}
    if validation:
        data["validation"] = {"s3": "datasets/e/val/"}
    return {"version": 1, "name": "equiv", "task": task, "model": "bert-base-uncased", "data": data,
            "spot": {"enabled": False}, "checkpoint": {"every_steps": every}, "hyperparameters": hps}


def _sent(hps: dict[str, str], validation: bool, tmp: Path) -> tuple[bool, str]:
    """Does the job start? SageMaker's limits on the values, then the toolkit and the script's parser."""
    for name, value in hps.items():
        if len(value) > 2500 or not regex.fullmatch(VALUE_PATTERN, value):
            return False, f"SageMaker refuses the value of {name}"
        arg = json.loads(value)
        if isinstance(arg, str) and arg.startswith("-") and not regex.fullmatch(r"-\d+|-\d*\.\d+", arg):
            return False, f"{name}: a value starting with '-' (the dash rule)"
    path = tmp / "hyperparameters.json"
    path.write_text(json.dumps(hps))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(toolkit_env, "hyperparameters_file_dir", str(path))
        decoded = toolkit_env.read_hyperparameters()
    _, user = toolkit_mapping.split_by_criteria(decoded, keys=toolkit_params.SAGEMAKER_HYPERPARAMETERS,
                                                prefix=toolkit_params.SAGEMAKER_PREFIX)
    environ = {"SAGEMAKER_BASE_DIR": str(tmp / "none"), **({"SM_CHANNEL_VALIDATION": "/v"} if validation else {})}
    try:
        hf_args.parse_args(toolkit_mapping.to_cmd_args(user), environ=environ)
    except (hf_args.ArgumentError, ValueError, TypeError) as err:
        return False, f"{type(err).__name__}: {str(err)[:200]}"
    return True, ""


def _script_accepts(spec: dict[str, Any], tmp: Path) -> tuple[bool, str]:
    base = run_spec.parse_spec({**spec, "hyperparameters": {}}, SETTINGS)
    values = {**hyperparameters.pipeline_values(base),
              **{k: hyperparameters.argument(k, v) for k, v in spec["hyperparameters"].items()}}
    return _sent(job_requests.encode_hyperparameters(values), "validation" in spec["data"], tmp)


@given(task=st.sampled_from(run_spec.TASKS), validation=st.booleans(), every=st.sampled_from([100, 250, 300, 500]),
       hps=st.builds(lambda a, b: {**b, **a}, EDGE_VALUES, OTHERS))
def test_prepare_accepts_exactly_what_the_script_accepts(task, validation, every, hps, tmp_path_factory):
    spec = _spec(task, validation, every, hps)
    try:
        prepare_run(copy.deepcopy(spec), SETTINGS)
        prepare, why_not = True, ""
    except (SpecError, PreflightError) as err:
        prepare, why_not = False, "; ".join(err.problems)
    script, reason = _script_accepts(spec, tmp_path_factory.mktemp("hp"))
    assert prepare == script, (f"Prepare {'accepts' if prepare else 'rejects: ' + why_not}; the job "
                               f"{'starts' if script else 'fails: ' + reason}; hyperparameters {hps}")


@given(raw=valid_specs())
def test_every_request_of_a_valid_spec_parses_in_the_script(raw, tmp_path_factory):
    run = prepare_run(raw, SETTINGS)
    for attempt in range(run.max_attempts):
        request = job_requests.training_request(run, SETTINGS, attempt)
        # ddp_backend smddp needs an SMDDP host (its library and process group), not a question of parsing.
        sent = {k: v for k, v in request["HyperParameters"].items() if k != "ddp_backend"}
        ok, reason = _sent(sent, run.spec.data.validation is not None,
                           tmp_path_factory.mktemp("req"))
        assert ok, reason
