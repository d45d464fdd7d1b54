"""Prepare opens the pipeline run's MLflow run and its id travels in the run's state to every attempt and to
Finish. Finish's MLflow record through the REST API: the request shape SageMaker's managed MLflow needs (endpoint,
tracking server ARN header, SigV4 for `sagemaker-mlflow`), and against a real MLflow server the run the training
job logged to gets the spec as params, the goodput ledger, cost and final metrics, the verdict and the model
package ARN, and ends FINISHED; signed requests (an ARN with the plugin's custom endpoint) reach it too."""

from __future__ import annotations

import io
import json

import pytest
from botocore.credentials import Credentials
from mlflow import MlflowClient
from testkit.lambdas import SPEC as PIPELINE_SPEC
from testkit.lambdas import strict_json
from testkit.tracking import mlflow_server

from contract import tracking
from hfsm_lambda import handlers
from hfsm_lambda.plan import job_requests
from hfsm_lambda.plan import run as planned
from hfsm_lambda.settings import load_settings
from hfsm_lambda.tracking import record
from hfsm_lambda.tracking.rest import ARN_HEADER, MlflowRest, MlflowRestError, endpoint
from local_mode.tracking_server import free_port

ARN = "arn:aws:sagemaker:eu-west-1:123456789012:mlflow-tracking-server/hfsm-prod"
CREDENTIALS = Credentials("AKIDEXAMPLE", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
SUMMARY = {
    "run_id": "qa-20260101000000-0123456789abcdef", "job_name": "qa-train0", "model_uri": "s3://a/models/m.tar.gz",
    "registered_model_uri": "s3://a/registry/m.tar.gz",
    "model_package_arn": "arn:aws:sagemaker:eu-west-1:123456789012:model-package/hfsm-prod/3",
    "metrics": {"eval_f1": 0.61, "train_loss": 1.2}, "cost": {"cost_usd": 1.25, "billable_instance_seconds": 900.0},
    "goodput": {"ratio": 0.83, "billed_seconds": 1000.0, "parts": {"productive": 830.0, "checkpointing": 20.0},
                "attempts": [{"job_name": "qa-train0", "instance_type": "ml.g5.2xlarge", "spot": True}]},
    "verdict": {"verdict": "beat", "text": "eval_f1 0.61 beat the trivial baseline 0.05"},
}
SPEC = {"name": "qa", "task": "question-answering", "compute": {"instance_type": "ml.g5.2xlarge", "instance_count": 1},
        "spot": {"enabled": True}}


class Recorder:
    def __init__(self, answer: dict) -> None:
        self.requests, self.answer = [], answer

    def __call__(self, request, timeout):
        self.requests.append((request, timeout))
        return io.BytesIO(json.dumps(self.answer).encode())


def test_an_arn_is_sent_to_the_regional_endpoint_signed_for_sagemaker_mlflow():
    recorder = Recorder({"run": {"info": {"run_id": "r1"}}})
    MlflowRest(ARN, credentials=CREDENTIALS, opener=recorder, timeout=3).call("GET", "runs/get", {"run_id": "r1"})
    (request, timeout), = recorder.requests
    assert request.full_url == "https://eu-west-1.experiments.sagemaker.amazonaws.com/api/2.0/mlflow/runs/get?run_id=r1"
    headers = {k.lower(): v for k, v in request.header_items()}
    assert headers[ARN_HEADER] == ARN and timeout == 3
    assert "/eu-west-1/sagemaker-mlflow/aws4_request" in headers["authorization"]
    assert "x-mlflow-sm-tracking-server-arn" in headers["authorization"]  # the ARN header is signed
    assert "x-amz-date" in headers


def test_local_urls_are_plain_and_unsigned_and_bad_uris_are_named():
    assert endpoint("http://127.0.0.1:5000/", custom="") == ("http://127.0.0.1:5000", {}, "")
    with pytest.raises(MlflowRestError, match="tracking server ARN"):
        endpoint("arn:aws:s3:::bucket", custom="")
    with pytest.raises(MlflowRestError, match="expected a tracking server ARN or an http"):
        endpoint("file:///tmp/mlruns", custom="")


def test_finish_data_has_the_ledger_cost_verdict_and_package():
    params, metrics, tags = record.finish_data(SUMMARY, SPEC)
    assert params["spec.compute.instance_type"] == "ml.g5.2xlarge" and params["spec.spot.enabled"] == "true"
    assert metrics["goodput.ratio"] == 0.83 and metrics["goodput.productive_seconds"] == 830.0
    assert metrics["cost.cost_usd"] == 1.25 and metrics["final.eval_f1"] == 0.61
    assert tags["verdict"] == "beat" and tags["model_package_arn"].endswith("/3")
    assert tags[tracking.attempt_tag("qa-train0", "spot")] == "true"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as running:
        yield running


@pytest.mark.parametrize("signed", [False, True])
def test_finish_completes_the_run_the_job_logged(server, monkeypatch, signed):
    client = MlflowClient(server.uri)
    pipeline_run = f"qa-run-{'signed' if signed else 'plain'}"
    experiment_id = client.create_experiment(f"question-answering-{signed}")
    job_run = client.create_run(experiment_id, tags={tracking.PIPELINE_RUN_TAG: pipeline_run}).info.run_id
    client.log_metric(job_run, "loss", 2.0, step=40)
    if signed:  # the ARN's requests, signed, to the local server through the plugin's endpoint override
        monkeypatch.setenv("SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT", server.uri)
        rest = MlflowRest(ARN, credentials=CREDENTIALS, timeout=60)
    else:
        rest = MlflowRest(server.uri, timeout=60)
    assert record.record_finish(rest, f"question-answering-{signed}", pipeline_run, SUMMARY, SPEC) == job_run
    run = client.get_run(job_run)
    assert run.info.status == "FINISHED"
    assert run.data.params["spec.task"] == "question-answering"
    assert run.data.metrics["goodput.ratio"] == 0.83 and run.data.metrics["cost.cost_usd"] == 1.25
    assert [m.step for m in client.get_metric_history(job_run, "goodput.ratio")] == [40]  # at the last step
    assert run.data.tags["verdict"] == "beat" and run.data.tags["model_package_arn"] == SUMMARY["model_package_arn"]


def test_finish_creates_the_run_when_no_job_reached_the_server(server):
    rest = MlflowRest(server.uri, timeout=60)
    run_id = record.record_finish(rest, "fresh-experiment", "never-logged-1", SUMMARY, SPEC)
    run = MlflowClient(server.uri).get_run(run_id)
    assert run.data.tags[tracking.PIPELINE_RUN_TAG] == "never-logged-1" and run.data.tags["verdict"] == "beat"


# --- the MLflow run id travels in the run's state: Prepare opens it, every attempt's job and Finish use it --------
def test_prepare_opens_the_run_and_its_id_travels_to_every_attempt_and_finish(server, data, set_settings, context):
    set_settings(tracking_uri=server.uri)
    state = strict_json(handlers.prepare({"spec": PIPELINE_SPEC}, context))
    mlflow_run_id = state["run"]["mlflow_run_id"]
    client = MlflowClient(server.uri)
    opened = client.get_run(mlflow_run_id)
    assert opened.data.tags[tracking.PIPELINE_RUN_TAG] == state["run"]["run_id"]
    assert client.get_experiment(opened.info.experiment_id).name == PIPELINE_SPEC["task"]  # default: the task
    run, settings = planned.from_json(state["run"]), load_settings()
    for attempt in range(run.max_attempts):  # the same run for each attempt, named, not searched for
        env = job_requests.training_request(run, settings, attempt)["Environment"]
        assert env[tracking.RUN_ID_VARIABLE] == mlflow_run_id and env[tracking.URI_VARIABLE] == server.uri
    handlers._record_tracking(settings, run, {**SUMMARY, "run_id": run.run_id})
    finished = client.get_run(mlflow_run_id)
    assert finished.info.status == "FINISHED" and finished.data.tags["verdict"] == "beat"
    tagged = client.search_runs([opened.info.experiment_id],
                                filter_string=f"tags.`{tracking.PIPELINE_RUN_TAG}` = '{run.run_id}'")
    assert [r.info.run_id for r in tagged] == [mlflow_run_id]  # one MLflow run per pipeline run


def test_a_tracking_server_that_does_not_answer_prepare_never_stops_the_run(data, set_settings, context):
    set_settings(tracking_uri=f"http://127.0.0.1:{free_port()}")  # nothing listens there
    state = handlers.prepare({"spec": PIPELINE_SPEC}, context)
    assert state["run"]["mlflow_run_id"] == ""
    env = job_requests.training_request(planned.from_json(state["run"]), load_settings(), 0)["Environment"]
    assert tracking.RUN_ID_VARIABLE not in env and env[tracking.PIPELINE_RUN_VARIABLE] == state["run"]["run_id"]
