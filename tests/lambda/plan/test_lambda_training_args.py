"""The hyperparameters of every example request reach training_code's parser as it accepts them (slow: torch)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sagemaker_training import environment as toolkit_env
from sagemaker_training import mapping as toolkit_mapping
from sagemaker_training import params as toolkit_params
from testkit.lambdas import settings_dict

from hfsm_lambda.plan import job_requests
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.settings import Settings

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = sorted((REPO / "examples").glob("*.json"))


@pytest.mark.slow
def test_example_hyperparameters_parse_in_the_training_script(tmp_path, monkeypatch):
    hf_args = pytest.importorskip("hftrain.args")
    settings = Settings.from_dict(settings_dict())
    for example in EXAMPLES:
        spec = json.loads(example.read_text())
        spec["hyperparameters"].pop("bf16", None)  # bf16 needs a GPU; this machine may have none
        run = prepare_run(spec, settings, now=datetime(2025, 1, 1, tzinfo=UTC))
        request = job_requests.training_request(run, settings)
        path = tmp_path / f"{example.stem}.json"
        path.write_text(json.dumps(request["HyperParameters"]))
        monkeypatch.setattr(toolkit_env, "hyperparameters_file_dir", str(path))
        _, user = toolkit_mapping.split_by_criteria(toolkit_env.read_hyperparameters(),
                                                    keys=toolkit_params.SAGEMAKER_HYPERPARAMETERS,
                                                    prefix=toolkit_params.SAGEMAKER_PREFIX)
        model, data, training = hf_args.parse_args(toolkit_mapping.to_cmd_args(user))
        assert data.task == spec["task"]
        assert training.save_steps == run.spec.checkpoint.every_steps
        if run.spec.distribution.strategy == "fsdp":
            assert training.fsdp and isinstance(training.fsdp_config, dict)
            assert training.fsdp_config["transformer_layer_cls_to_wrap"] == \
                spec["distribution"]["fsdp"]["config"]["transformer_layer_cls_to_wrap"]
