"""Tracking in the CreateTrainingJob request: the tracking URI (and the run's experiment) in the job's environment
when the environment has a tracking server and the spec keeps tracking on; TensorBoardOutputConfig to a per-run
prefix when TensorBoard is on; neither when off. Valid against botocore's service model; the request guard
accepts what the pipeline sets and refuses another server or prefix."""

from __future__ import annotations

import pytest
from testkit.lambdas import run_for, sagemaker_request_errors, settings_dict

from contract import tracking
from hfsm_lambda.plan import job_requests, request_guard
from hfsm_lambda.settings import Settings

SERVER = "arn:aws:sagemaker:us-east-1:123456789012:mlflow-tracking-server/hfsm-prod"
S3_MODEL = "s3://hfsm-dev-data/base-models/bert/"


@pytest.fixture
def tracked() -> Settings:
    return Settings.from_dict(settings_dict(tracking_uri=SERVER))


def _request(settings: Settings, **changes):
    run = run_for(settings, **changes)
    request = job_requests.training_request(run, settings, 0)
    assert sagemaker_request_errors("CreateTrainingJob", request) == []
    assert request_guard.training_request_problems(request, run, settings, 0) == []
    return run, request


def test_no_tracking_server_no_tracking_variables_and_no_tensorboard(settings):
    _, request = _request(settings, model=S3_MODEL)
    assert not set(request.get("Environment", {})) & {tracking.URI_VARIABLE, tracking.EXPERIMENT_VARIABLE,
                                                      "TENSORBOARD_LOGGING_DIR"}
    assert "TensorBoardOutputConfig" not in request
    assert request["EnableNetworkIsolation"] is True  # a model from S3, nothing else to reach


def test_tracking_on_names_the_server_the_experiment_and_the_run(tracked):
    run, request = _request(tracked, model=S3_MODEL, tracking={"experiment": "team-a/sweep"})
    env = request["Environment"]
    assert env[tracking.URI_VARIABLE] == SERVER and env[tracking.EXPERIMENT_VARIABLE] == "team-a/sweep"
    assert env[tracking.PIPELINE_RUN_VARIABLE] == run.run_id
    assert request["EnableNetworkIsolation"] is False  # isolation would cut the job off the tracking endpoint
    assert "TensorBoardOutputConfig" not in request


def test_the_spec_can_turn_tracking_off(tracked):
    _, request = _request(tracked, model=S3_MODEL, tracking={"enabled": False})
    assert tracking.URI_VARIABLE not in request.get("Environment", {})
    assert request["EnableNetworkIsolation"] is True


@pytest.mark.parametrize("how", [{"tracking": {"tensorboard": True}},
                                 {"hyperparameters": {"report_to": "tensorboard"}}])
def test_tensorboard_output_goes_to_the_run_s_prefix(settings, how):
    run, request = _request(settings, **how)
    assert request["TensorBoardOutputConfig"] == {
        "S3OutputPath": f"s3://hfsm-dev-artifacts/tensorboard/{run.run_id}/", "LocalPath": "/opt/ml/output/tensorboard"}
    assert request["Environment"]["TENSORBOARD_LOGGING_DIR"] == "/opt/ml/output/tensorboard"
    assert "tensorboard" in request["HyperParameters"]["report_to"]


def test_the_guard_refuses_another_server_or_prefix(tracked):
    run = run_for(tracked, tracking={"tensorboard": True})
    request = job_requests.training_request(run, tracked, 0)
    request["Environment"][tracking.URI_VARIABLE] = "http://198.51.100.7:5000"
    request["TensorBoardOutputConfig"]["S3OutputPath"] = "s3://elsewhere/tb/"
    problems = request_guard.training_request_problems(request, run, tracked, 0)
    assert any(p.startswith("Environment:") for p in problems), problems
    assert any(p.startswith("TensorBoardOutputConfig:") for p in problems), problems
