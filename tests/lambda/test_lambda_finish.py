"""Finish and NotifyFailure against moto: the registered frozen model, the verdict against the trivial baseline,
the summary and the notifications."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from typing import Any

import pytest
from moto.sns.models import sns_backends
from testkit.lambdas import ACCOUNT, REGION, SETTINGS, SPEC, sagemaker_request_errors, sm_backend, strict_json

from contract import verdict_metrics as names
from hfsm_lambda import aws, handlers, naming


def sent_messages() -> list[tuple]:
    return sns_backends[ACCOUNT][REGION].topics[SETTINGS["topic_arn"]].sent_notifications


# --- finish / notify_failure -----------------------------------------------------------------------------
def test_finish_registers_the_model_and_notifies(state, context, set_settings):
    set_settings(instance_prices={"ml.g5.2xlarge": 1.5, "ml.g6.2xlarge": 1.2})
    run = state["run"]
    first = handlers.start_training({"run": run, "attempt": 0}, context)
    failed = sm_backend().training_jobs[first["job_name"]]
    failed.training_job_status, failed.secondary_status = "Stopped", "MaxWaitTimeExceeded"
    failed.billable_time_in_seconds, failed.training_time_in_seconds = 0, 0
    job = handlers.start_training({"run": run, "attempt": 1}, context)
    fake = sm_backend().training_jobs[job["job_name"]]
    fake.billable_time_in_seconds, fake.training_time_in_seconds = 1200, 3600
    fake.final_metric_data_list = [{"MetricName": "eval_f1", "Value": 71.25}, {"MetricName": "train_loss", "Value": 0.5},
                                   {"MetricName": "eval_loss", "Value": float("nan")}]
    fake.resource_config = {**fake.resource_config, "InstanceCount": 2}
    # What SageMaker writes at the end of the job.
    model_uri = sm_backend().describe_training_job(job["job_name"])["ModelArtifacts"]["S3ModelArtifacts"]
    model_bucket, model_key = model_uri.removeprefix("s3://").split("/", 1)
    aws.client("s3").put_object(Bucket=model_bucket, Key=model_key, Body=b"the trained weights")
    fake.training_end_time = datetime.now(UTC)  # the upload ends the job: the version it wrote is in the window
    moment = datetime(2025, 1, 1, tzinfo=UTC)
    fake.secondary_status_transitions = [{"Status": s, "StartTime": moment, "StatusMessage": s} for s in
                                         ("Starting", "Training", "Interrupted", "Starting", "Training", "Completed")]
    sent: dict[str, Any] = {}
    aws.client("sagemaker").meta.events.register(
        "provide-client-params.sagemaker.CreateModelPackage", lambda params, **_: sent.update(params))
    summary = strict_json(handlers.finish({"run": run, "job": job}, context))
    assert sagemaker_request_errors("CreateModelPackage", sent) == []

    _assert_succeeded_summary(summary, job)
    _assert_registered_a_frozen_copy(summary, run, sent, model_bucket, model_key)
    _assert_metrics_and_summary_written(run)
    _assert_a_metrics_rewrite_changes_nothing_recorded(summary, run)
    _assert_success_notification(summary, run, job)


def _assert_succeeded_summary(summary: dict[str, Any], job: dict[str, Any]) -> None:
    """The second attempt (ml.g6.2xlarge x2, spot) completed after the first stopped at MaxWaitTimeExceeded."""
    assert summary["status"] == "Succeeded" and summary["metrics"] == {"eval_f1": 71.25, "train_loss": 0.5,
                                                                       "eval_loss": "nan"}
    assert summary["cost"]["billable_instance_seconds"] == 2400
    assert summary["cost"]["spot_saving"] == pytest.approx(1 - 1200 / 3600, abs=1e-4)
    assert summary["cost"]["cost_usd"] == pytest.approx(2400 / 3600 * 1.2)
    assert [a["outcome"] for a in summary["attempts"]] == ["retryable", "completed"]
    assert summary["model_uri"].endswith(f"{job['job_name']}/output/model.tar.gz")


def _assert_registered_a_frozen_copy(summary: dict[str, Any], run: dict[str, Any], sent: dict[str, Any],
                                     model_bucket: str, model_key: str) -> None:
    """One package pending approval, pointing at a frozen copy of the job's model that a later job cannot swap."""
    sm = aws.client("sagemaker")
    packages = sm.list_model_packages(ModelPackageGroupName=SETTINGS["model_package_group"])["ModelPackageSummaryList"]
    assert len(packages) == 1 and packages[0]["ModelApprovalStatus"] == "PendingManualApproval"
    package = sm.describe_model_package(ModelPackageName=summary["model_package_arn"])
    container = package["InferenceSpecification"]["Containers"][0]
    # The package points at a frozen copy under registry/ (no job can write there), pinned by its ETag.
    assert container["ModelDataUrl"] == summary["registered_model_uri"] != summary["model_uri"]
    assert container["ModelDataUrl"].startswith(f"s3://{SETTINGS['artifacts_bucket']}/registry/{run['run_id']}/")
    assert sent["InferenceSpecification"]["Containers"][0]["ModelDataETag"] == summary["registered_model_etag"]
    aws.client("s3").put_object(Bucket=model_bucket, Key=model_key, Body=b"swapped by a later job")
    frozen_key = container["ModelDataUrl"].split("/", 3)[3]
    frozen = aws.client("s3").get_object(Bucket=SETTINGS["artifacts_bucket"], Key=frozen_key)
    assert frozen["Body"].read() == b"the trained weights"
    assert frozen["ETag"].strip('"') == summary["registered_model_etag"]
    assert package["InferenceSpecification"]["Containers"][0]["Image"] == SETTINGS["inference_image_uri"]
    # The metrics the package records are a copy under registry/ with its digest: a job rewriting the user's
    # outputs/<run>/metrics.json after registration changes nothing the registry or the summary says (issue 36, 2).
    statistics = package["ModelMetrics"]["ModelQuality"]["Statistics"]
    assert statistics["S3Uri"] == summary["metrics_uri"] != run["uris"]["metrics"]
    assert statistics["S3Uri"].startswith(f"s3://{SETTINGS['artifacts_bucket']}/registry/{run['run_id']}/")
    assert statistics["ContentDigest"] == f"sha256:{summary['metrics_sha256']}"
    assert package["CustomerMetadataProperties"]["eval_f1"] == "71.25"


def _assert_metrics_and_summary_written(run: dict[str, Any]) -> None:
    s3 = aws.client("s3")
    key = run["uris"]["metrics"].split("/", 3)[3]
    assert json.loads(s3.get_object(Bucket=SETTINGS["artifacts_bucket"], Key=key)["Body"].read())["eval_f1"] == 71.25
    key = run["uris"]["summary"].split("/", 3)[3]
    assert json.loads(s3.get_object(Bucket=SETTINGS["artifacts_bucket"], Key=key)["Body"].read())["run_id"] == \
        run["run_id"]


def _assert_a_metrics_rewrite_changes_nothing_recorded(summary: dict[str, Any], run: dict[str, Any]) -> None:
    s3 = aws.client("s3")
    s3.put_object(Bucket=SETTINGS["artifacts_bucket"], Key=run["uris"]["metrics"].split("/", 3)[3],
                  Body=b'{"eval_f1": 99.9}')
    recorded = s3.get_object(Bucket=SETTINGS["artifacts_bucket"],
                             Key=summary["metrics_uri"].split("/", 3)[3])["Body"].read()
    assert hashlib.sha256(recorded).hexdigest() == summary["metrics_sha256"]
    assert json.loads(recorded)["eval_f1"] == 71.25


def _assert_success_notification(summary: dict[str, Any], run: dict[str, Any], job: dict[str, Any]) -> None:
    """The last message on the topic: a text a person reads, with the run's outcome, cost and attempts."""
    (_, message, subject, attributes, _) = sent_messages()[-1]
    assert subject == f"[hfsm-dev] run {run['run_id']} succeeded"
    assert attributes["status"]["Value"] == "Succeeded" or attributes["status"]["StringValue"] == "Succeeded"
    assert [a["interruptions"] for a in summary["attempts"]] == [0, 1]
    assert message.splitlines()[0] == (f"Run {run['run_id']} succeeded: {summary['task']} fine-tune of "
                                       f"{summary['base_model']}.")
    assert "{" not in message  # a text a person reads, no JSON dump
    for needle in (summary["model_uri"], "eval_f1", "71.25", "spot saving    67% on the final job",
                   "40m00s instance time", "$0.80 at on-demand list prices",
                   "jobs           2 SageMaker jobs, 3 attempts (starts of their instances)",
                   "MaxWaitTimeExceeded", "1 spot interruption, resumed from checkpoints", summary["summary_uri"],
                   naming.training_job_url(REGION, job["job_name"])):
        assert needle in message, needle


def _verdict_metrics(model: float, gain_low: float) -> list[dict]:
    values = {names.MODEL: model, names.BASELINE: 23.5, names.PRETRAINED: 4.0, names.GAIN_BASELINE_LOW: gain_low,
              names.GAIN_BASELINE_HIGH: gain_low + 4, names.GAIN_PRETRAINED_LOW: 10.0,
              names.GAIN_PRETRAINED_HIGH: 30.0, names.STEPS: 300, names.EXAMPLES: 200, names.BASELINE_INDEX: 0}
    return [{"MetricName": name, "Value": value} for name, value in values.items()]


@pytest.mark.parametrize(("value", "gain_low", "verdict"), [(20.0, -5.5, "not-learned"), (26.0, 0.5, "learned")])
def test_finish_judges_the_run_against_the_trivial_baselines_and_itself(state, context, value, gain_low, verdict):
    """QA's margin (the task registry's Verdict) is 2 F1 points over the strongest baseline's 23.5, and the gain's
    interval must lie above 0."""
    run = state["run"]
    job = handlers.start_training({"run": run, "attempt": 0}, context)
    fake = sm_backend().training_jobs[job["job_name"]]
    fake.final_metric_data_list = [{"MetricName": "eval_f1", "Value": value},
                                   {"MetricName": "eval_baseline_f1", "Value": 23.5},
                                   *_verdict_metrics(value, gain_low)]
    model_uri = sm_backend().describe_training_job(job["job_name"])["ModelArtifacts"]["S3ModelArtifacts"]
    aws.client("s3").put_object(Bucket=model_uri.split("/")[2], Key=model_uri.split("/", 3)[3], Body=b"w")
    summary = strict_json(handlers.finish({"run": run, "job": job}, context))
    assert summary["verdict"]["verdict"] == verdict and summary["verdict"]["margin"] == 2.0
    package = aws.client("sagemaker").describe_model_package(ModelPackageName=summary["model_package_arn"])
    assert package["CustomerMetadataProperties"]["verdict"] == verdict
    assert package["ModelApprovalStatus"] == "PendingManualApproval"  # approval stays manual either way
    (_, message, subject, _, _) = sent_messages()[-1]
    if verdict == "learned":
        assert subject == f"[hfsm-dev] run {run['run_id']} succeeded"
        assert "verdict: learned: f1 26 on 200 judged examples; the strongest trivial baseline (the empty answer) " \
               "23.5, gain +2.5 (95% interval +0.5 to +4.5)" in message
        return
    assert subject.startswith("[hfsm-dev] completed, but the model did not learn: run ")
    assert message.splitlines()[0] == (f"Run {run['run_id']} completed, but the model did not learn: "
                                       f"question-answering fine-tune of {SPEC['model']}.")
    assert "verdict: not learned (it does not beat the strongest trivial baseline by more than the noise" in message
    assert package["ModelPackageDescription"].startswith("[not learned (it does not beat the strongest")


def test_notify_failure_for_an_invalid_spec(aws_account, context):
    cause = json.dumps({"errorMessage": "invalid run spec (1 problem):\n- task: 'qa' is not allowed",
                        "errorType": "SpecError", "stackTrace": []})
    # What PrepareFailed hands over: the error and the execution's identity (never the caller's input).
    execution = {"Id": f"arn:aws:states:{REGION}:{ACCOUNT}:execution:hfsm-dev-fine-tune:run-bad-0123456789abcdef",
                 "Name": "run-bad-0123456789abcdef", "StartTime": "2025-01-01T00:00:00Z"}
    result = strict_json(handlers.notify_failure({"execution": execution,
                                                  "error": {"Error": "SpecError", "Cause": cause}}, context))
    assert result["notified"] is True and result["error"] == "SpecError"
    (_, message, subject, _, _) = sent_messages()[-1]
    assert subject == "[hfsm-dev] run run-bad-0123456789abcdef FAILED: SpecError"
    assert "task: 'qa' is not allowed" in message and "Fix the fields listed above" in message
    assert naming.execution_url(REGION, execution["Id"]) in message


def test_notify_failure_for_a_failed_job(state, context):
    run = state["run"]
    job = handlers.start_training({"run": run, "attempt": 0}, context)
    status = {"state": "failed", "job_type": "training", "job_name": job["job_name"], "status": "Failed",
              "secondary_status": "Failed", "failure_reason": "AlgorithmError: CUDA out of memory"}
    event = {**state, "job": job, "status": status,
             "error": {"Error": "TrainingJobFailed", "Cause": json.dumps(status)}}
    result = handlers.notify_failure(event, context)
    assert result["reason"] == f"training job {job['job_name']} ended Failed: AlgorithmError: CUDA out of memory"
    (_, message, subject, _, _) = sent_messages()[-1]
    assert subject == f"[hfsm-dev] run {run['run_id']} FAILED: TrainingJobFailed"
    assert naming.job_logs_url(REGION, job["job_name"]) in message
    key = run["uris"]["summary"].split("/", 3)[3]
    written = json.loads(aws.client("s3").get_object(Bucket=SETTINGS["artifacts_bucket"], Key=key)["Body"].read())
    assert written["status"] == "Failed" and written["error"] == "TrainingJobFailed"


def test_notify_failure_takes_no_address_from_a_forged_run(aws_account, context):
    """A state whose run id is not a run id: reported without the run, its `uris` never written to."""
    forged = {"run_id": "../../runs/x", "spec": {"name": "x"},
              "uris": {"summary": f"s3://{SETTINGS['data_bucket']}/runs/evil.json"}}
    result = strict_json(handlers.notify_failure({"run": forged, "error": {"Error": "States.TaskFailed",
                                                                          "Cause": "boom"}}, context))
    assert result["notified"] is True and result["error"] == "States.TaskFailed"
    s3 = aws.client("s3")
    assert all(s3.list_objects_v2(Bucket=b).get("KeyCount", 0) == 0
               for b in (SETTINGS["data_bucket"], SETTINGS["artifacts_bucket"]))
    (_, _, subject, _, _) = sent_messages()[-1]
    assert "../" not in subject
