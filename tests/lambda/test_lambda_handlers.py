"""Handlers against moto: trigger dedupe, prepare + pre-flight, idempotent starts, polling, fallback, finish."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from botocore.exceptions import ClientError
from lambda_testlib import ACCOUNT, REGION, SETTINGS, sagemaker_request_errors, stand_in_state_machine
from moto.sagemaker.models import sagemaker_backends
from moto.sns.models import sns_backends

from hfsm_lambda import aws, handlers, naming
from hfsm_lambda.errors import (
    FallbackExhaustedError,
    JobConflictError,
    JobFailedError,
    PreflightError,
    ResourceLimitExceeded,
    SpecError,
)
from hfsm_lambda.errors import ThrottlingException as ThrottlingError
from hfsm_lambda.runs import prepare_run
from hfsm_lambda.settings import load_settings

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


def sm_backend():
    return sagemaker_backends[ACCOUNT][REGION]


def sent_messages() -> list[tuple]:
    return sns_backends[ACCOUNT][REGION].topics[SETTINGS["topic_arn"]].sent_notifications


@pytest.fixture
def data(aws_account, put_data):
    put_data(DATA + "train/", 4)
    put_data(DATA + "val/", 1)
    return aws_account


@pytest.fixture
def state(data, context):
    return strict_json(handlers.prepare({"spec": SPEC}, context))


# --- trigger ---------------------------------------------------------------------------------------------
def s3_event(key: str, version: str | None = "v1", sequencer: str = "0064D3901D00059242",
             etag: str | None = "abc") -> dict[str, Any]:
    obj = {"key": key, "size": 10, "sequencer": sequencer}
    if etag:
        obj["etag"] = etag
    if version:
        obj["version-id"] = version
    return {"version": "0", "id": "e-1", "detail-type": "Object Created", "source": "aws.s3", "account": ACCOUNT,
            "region": REGION, "time": "2025-01-01T00:00:00Z", "resources": [],
            "detail": {"version": "0", "bucket": {"name": SETTINGS["data_bucket"]}, "object": obj,
                       "reason": "PutObject"}}


@pytest.fixture
def state_machine(aws_account, monkeypatch):
    return stand_in_state_machine(monkeypatch)


def test_trigger_starts_one_run_per_spec_content(state_machine, context):
    sfn = aws.client("stepfunctions")
    first = handlers.trigger(s3_event("runs/squad.json"), context)
    assert first["started"] is True
    assert naming.EXECUTION_NAME_RE.match(first["execution_name"])
    execution = sfn.describe_execution(executionArn=first["execution_arn"])
    assert json.loads(execution["input"]) == {"source": {"bucket": SETTINGS["data_bucket"], "key": "runs/squad.json",
                                                         "version_id": "v1"}}
    again = handlers.trigger(s3_event("runs/squad.json"), context)  # EventBridge delivered the event twice
    assert again["execution_arn"] == first["execution_arn"]
    sfn.stop_execution(executionArn=first["execution_arn"])
    after_end = handlers.trigger(s3_event("runs/squad.json"), context)  # ... or after the run ended
    assert after_end == {"started": False, "already_started": True, "execution_arn": first["execution_arn"],
                         "execution_name": first["execution_name"]}
    # The same content uploaded again (a new version, same ETag) is the same run ...
    same = handlers.trigger(s3_event("runs/squad.json", version="v2"), context)
    assert same["execution_arn"] == first["execution_arn"] and same["started"] is False
    # ... a changed spec is a new run.
    handlers.trigger(s3_event("runs/squad.json", version="v3", etag="def"), context)
    assert len(sfn.list_executions(stateMachineArn=state_machine)["executions"]) == 2


def test_trigger_without_etag_uses_version_then_sequencer_and_ignores_other_keys(state_machine, context):
    a = handlers.trigger(s3_event("runs/x.json", version=None, sequencer="01", etag=None), context)
    b = handlers.trigger(s3_event("runs/x.json", version=None, sequencer="02", etag=None), context)
    assert a["execution_name"] != b["execution_name"]
    assert handlers.trigger(s3_event("datasets/x.json"), context)["started"] is False
    assert handlers.trigger(s3_event("runs/x.txt"), context)["started"] is False
    long_key = "runs/" + "deep/" * 40 + "spec with spaces.json"
    name = handlers.trigger(s3_event(long_key), context)["execution_name"]
    assert len(name) <= 80 and naming.EXECUTION_NAME_RE.match(name)


# --- prepare ---------------------------------------------------------------------------------------------
def test_prepare_returns_the_initial_state(state):
    assert set(state) == {"run", "poll_seconds", "tokenizer_enabled", "attempt"}
    assert state["poll_seconds"] == 60 and state["attempt"] == 0 and state["tokenizer_enabled"] is False
    run = state["run"]
    assert naming.RUN_ID_RE.match(run["run_id"]) and run["run_id"].startswith("squad-")
    assert run["uris"]["checkpoint"] == f"s3://hfsm-dev-artifacts/checkpoints/{run['run_id']}/"
    assert len(run["job_names"]["train"]) == run["max_attempts"] == 3
    assert run["spec"]["data"]["train"]["s3"] == DATA + "train/"


def test_prepare_reads_the_uploaded_object_version(data, context):
    s3 = aws.client("s3")
    v1 = s3.put_object(Bucket=SETTINGS["data_bucket"], Key="runs/squad.json", Body=json.dumps(SPEC))["VersionId"]
    s3.put_object(Bucket=SETTINGS["data_bucket"], Key="runs/squad.json", Body=b"{broken")
    source = {"bucket": SETTINGS["data_bucket"], "key": "runs/squad.json", "version_id": v1}
    state = handlers.prepare({"source": source}, context)
    assert state["run"]["source"] == source and state["run"]["spec"]["name"] == "squad"
    with pytest.raises(SpecError, match=r"\(root\): not valid JSON"):
        handlers.prepare({"source": {**source, "version_id": None}}, context)  # the latest version is broken
    with pytest.raises(PreflightError, match="source.key: cannot read"):
        handlers.prepare({"source": {**source, "key": "runs/missing.json"}}, context)
    with pytest.raises(PreflightError, match="source.bucket: runs start only from the data bucket"):
        handlers.prepare({"source": {**source, "bucket": SETTINGS["artifacts_bucket"]}}, context)


def test_an_invalid_uploaded_spec_fails_fast_without_a_job(data, context):
    s3 = aws.client("s3")
    bad = {**SPEC, "compute": {"instance_typ": "ml.g5.2xlarge"}, "task": "qa"}
    s3.put_object(Bucket=SETTINGS["data_bucket"], Key="runs/bad.json", Body=json.dumps(bad))
    with pytest.raises(SpecError) as info:
        handlers.prepare({"source": {"bucket": SETTINGS["data_bucket"], "key": "runs/bad.json"}}, context)
    assert type(info.value).__name__ == "SpecError"  # the Step Functions error name
    assert "compute.instance_typ: unknown field" in str(info.value) and "task: 'qa'" in str(info.value)
    assert aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []
    assert aws.client("sagemaker").list_processing_jobs()["ProcessingJobSummaries"] == []


def test_preflight_checks_the_data(aws_account, put_data, context):
    put_data(DATA + "train/", 3)
    with pytest.raises(PreflightError) as info:
        handlers.prepare({"spec": {**SPEC, "compute": {"instance_type": "ml.g5.2xlarge", "instance_count": 4},
                                   "tokenizer": {"type": "bpe", "instance_count": 4}}}, context)
    problems = info.value.problems
    assert (f"data.train.s3: ShardedByS3Key needs at least one object per instance, but {DATA}train/ has 3 "
            "object(s) for compute.instance_count=4; split the data into at least 4 files, use fewer instances or "
            "FullyReplicated") in problems
    assert any(p.startswith("tokenizer.instance_count: ShardedByS3Key needs") and "3 object(s) for "
               "tokenizer.instance_count=4" in p for p in problems)
    assert (f"data.validation.s3: no objects under {DATA}val/; upload the data first or fix the prefix") in problems
    assert aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


def test_prepare_honours_a_run_id_and_refuses_used_job_names(data, context):
    state = handlers.prepare({"spec": SPEC, "run_id": "squad-20250101000000-abcd0123456789ef"}, context)
    assert state["run"]["run_id"] == "squad-20250101000000-abcd0123456789ef"
    with pytest.raises(SpecError, match="run_id: expected squad-<yyyymmddHHMMSS>-<16 hex digits>"):
        handlers.prepare({"spec": SPEC, "run_id": "other-20250101000000-abcd0123456789ef"}, context)
    handlers.start_training({"run": state["run"], "attempt": 0}, context)
    with pytest.raises(PreflightError, match="name: training job hfsm-dev-squad-20250101000000-abcd0123456789ef-train0 already"):
        handlers.prepare({"spec": SPEC, "run_id": "squad-20250101000000-abcd0123456789ef"}, context)


def test_prepare_input_shape(data, context):
    with pytest.raises(SpecError, match=r"\(input\): give exactly one of spec"):
        handlers.prepare({}, context)
    with pytest.raises(SpecError, match=r"\(input\): give exactly one of spec"):
        handlers.prepare({"spec": SPEC, "source": {"bucket": "b", "key": "runs/x.json"}}, context)
    assert handlers.prepare({"spec": json.dumps(SPEC)}, context)["run"]["spec"]["name"] == "squad"
    via_context = handlers.prepare({"execution": {"Id": "arn:aws:states:x:execution:sm:e1", "Name": "e1",
                                                  "StartTime": "2025-03-04T05:06:07.123Z", "Input": {"spec": SPEC}}})
    assert via_context["run"]["run_id"].startswith("squad-20250304050607-")
    assert via_context["run"]["execution_arn"] == "arn:aws:states:x:execution:sm:e1"


# --- start jobs ------------------------------------------------------------------------------------------
def test_start_training_is_idempotent_and_applies_the_fallback_option(state, context):
    run = state["run"]
    job = strict_json(handlers.start_training({"run": run, "attempt": 0}, context))
    assert job["created"] is True and job["job_type"] == "training" and job["job_name"] == run["job_names"]["train"][0]
    retry = handlers.start_training({"run": run, "attempt": 0}, context)  # the Lambda was retried
    assert retry["created"] is False and retry["job_arn"] == job["job_arn"]
    assert len(aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]) == 1
    second = handlers.start_training({"run": run, "attempt": 1}, context)
    described = aws.client("sagemaker").describe_training_job(TrainingJobName=second["job_name"])
    assert described["ResourceConfig"]["InstanceType"] == "ml.g6.2xlarge" == second["instance_type"]
    assert described["CheckpointConfig"]["S3Uri"] == run["uris"]["checkpoint"]
    assert described["EnableManagedSpotTraining"] is True
    third = handlers.start_training({"run": run, "attempt": 2}, context)
    assert third["spot"] is False and third["instance_type"] == "ml.g5.2xlarge"


def test_start_processing_map_and_reduce(data, context):
    state = handlers.prepare({"spec": {**SPEC, "tokenizer": {"type": "bpe", "instance_count": 2}}}, context)
    assert state["tokenizer_enabled"] is True
    jobs = [strict_json(handlers.start_processing({"run": state["run"], "stage": s}, context)) for s in ("map", "reduce")]
    assert [j["stage"] for j in jobs] == ["tokenizer_map", "tokenizer_reduce"]
    assert [j["instance_count"] for j in jobs] == [2, 1]
    assert handlers.start_processing({"run": state["run"], "stage": "map"}, context)["created"] is False
    assert len(aws.client("sagemaker").list_processing_jobs()["ProcessingJobSummaries"]) == 2


class _FailingSageMaker:
    def __init__(self, code: str) -> None:
        self.code = code

    def _raise(self, **_: Any) -> None:
        raise ClientError({"Error": {"Code": self.code, "Message": "slow down"}}, "CreateTrainingJob")

    def describe_training_job(self, **_: Any) -> None:
        raise ClientError({"Error": {"Code": "ValidationException", "Message": "Requested resource not found."}},
                          "DescribeTrainingJob")

    create_training_job = _raise


@pytest.mark.parametrize(("code", "error"), [("ThrottlingException", ThrottlingError),
                                             ("ResourceLimitExceeded", ResourceLimitExceeded)])
def test_throttling_and_quota_errors_keep_their_names(state, context, monkeypatch, code, error):
    monkeypatch.setattr(handlers, "client", lambda service: _FailingSageMaker(code))
    with pytest.raises(error) as info:
        handlers.start_training({"run": state["run"], "attempt": 0}, context)
    assert type(info.value).__name__ == code


# --- check_job / plan_fallback ---------------------------------------------------------------------------
@pytest.mark.parametrize(("status", "secondary", "reason", "expected"), [
    ("InProgress", "Training", None, "running"),
    ("Stopping", "Stopping", None, "running"),
    ("Completed", "Completed", None, "completed"),
    ("Stopped", "MaxWaitTimeExceeded", None, "retryable"),
    ("Failed", "Failed", "CapacityError: Unable to provision requested ML compute capacity.", "retryable"),
    ("Failed", "Failed", "InsufficientInstanceCapacity: insufficient capacity", "retryable"),
    ("Failed", "Failed", "AlgorithmError: CUDA out of memory", "failed"),
    ("Stopped", "Stopped", None, "failed"),
    ("Stopped", "MaxRuntimeExceeded", None, "failed"),
])
def test_check_job_classifies(state, context, status, secondary, reason, expected):
    job = handlers.start_training({"run": state["run"], "attempt": 0}, context)
    fake = sm_backend().training_jobs[job["job_name"]]
    fake.training_job_status, fake.secondary_status = status, secondary
    if reason:
        fake.failure_reason = reason
    result = strict_json(handlers.check_job({"job": job}, context))
    assert result["state"] == expected
    assert result["status"] == status and result["secondary_status"] == secondary and result["job_name"] == job["job_name"]
    if expected == "retryable":
        assert result["failure_reason"]


def test_check_processing_job(data, context):
    state = handlers.prepare({"spec": {**SPEC, "tokenizer": {"type": "bpe"}}}, context)
    job = handlers.start_processing({"run": state["run"], "stage": "map"}, context)
    assert handlers.check_job({"job": job}, context)["state"] == "completed"
    sm_backend().processing_jobs[job["job_name"]].processing_job_status = "Failed"
    assert handlers.check_job({"job": job}, context)["state"] == "failed"


def test_fallback_sequencing(state, context):
    run = state["run"]
    retryable = {"state": "retryable", "job_type": "training", "job_name": run["job_names"]["train"][0],
                 "status": "Stopped", "secondary_status": "MaxWaitTimeExceeded", "failure_reason": "MaxWaitTimeExceeded"}
    assert handlers.plan_fallback({"run": run, "attempt": 0, "status": retryable}, context) == 1
    assert handlers.plan_fallback({"run": run, "attempt": 1, "status": retryable}, context) == 2
    with pytest.raises(FallbackExhaustedError) as info:
        handlers.plan_fallback({"run": run, "attempt": 2, "status": retryable}, context)
    message = str(info.value)
    assert "all 3 attempt(s) allowed by fallback.max_attempts=3 ended without capacity" in message
    for name in run["job_names"]["train"]:
        assert name in message
    assert "ml.g6.2xlarge x2, spot" in message and "ml.g5.2xlarge x2, on-demand" in message
    with pytest.raises(JobFailedError, match="AlgorithmError"):
        handlers.plan_fallback({"run": run, "attempt": 0, "status": {**retryable, "state": "failed",
                                                                      "failure_reason": "AlgorithmError: x"}}, context)


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
    assert package["ModelMetrics"]["ModelQuality"]["Statistics"]["S3Uri"] == run["uris"]["metrics"]
    assert package["CustomerMetadataProperties"]["eval_f1"] == "71.25"


def _assert_metrics_and_summary_written(run: dict[str, Any]) -> None:
    s3 = aws.client("s3")
    key = run["uris"]["metrics"].split("/", 3)[3]
    assert json.loads(s3.get_object(Bucket=SETTINGS["artifacts_bucket"], Key=key)["Body"].read())["eval_f1"] == 71.25
    key = run["uris"]["summary"].split("/", 3)[3]
    assert json.loads(s3.get_object(Bucket=SETTINGS["artifacts_bucket"], Key=key)["Body"].read())["run_id"] == \
        run["run_id"]


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
                   "40m00s instance time", "$0.80 at on-demand list prices", "attempts       2",
                   "MaxWaitTimeExceeded", "1 spot interruption, resumed from checkpoints", summary["summary_uri"],
                   naming.training_job_url(REGION, job["job_name"])):
        assert needle in message, needle


@pytest.mark.parametrize(("value", "verdict"), [(20.0, "did-not-beat-baseline"), (26.0, "beat-baseline")])
def test_finish_judges_the_run_against_the_trivial_baseline(state, context, value, verdict):
    """QA's margin (the task registry's Verdict) is 2 F1 points over the baseline's 23.5."""
    run = state["run"]
    job = handlers.start_training({"run": run, "attempt": 0}, context)
    fake = sm_backend().training_jobs[job["job_name"]]
    fake.final_metric_data_list = [{"MetricName": "eval_f1", "Value": value},
                                   {"MetricName": "eval_baseline_f1", "Value": 23.5}]
    model_uri = sm_backend().describe_training_job(job["job_name"])["ModelArtifacts"]["S3ModelArtifacts"]
    aws.client("s3").put_object(Bucket=model_uri.split("/")[2], Key=model_uri.split("/", 3)[3], Body=b"w")
    summary = strict_json(handlers.finish({"run": run, "job": job}, context))
    assert summary["verdict"]["verdict"] == verdict and summary["verdict"]["margin"] == 2.0
    package = aws.client("sagemaker").describe_model_package(ModelPackageName=summary["model_package_arn"])
    assert package["CustomerMetadataProperties"]["verdict"] == verdict
    assert package["ModelApprovalStatus"] == "PendingManualApproval"  # approval stays manual either way
    (_, message, subject, _, _) = sent_messages()[-1]
    if verdict == "beat-baseline":
        assert subject == f"[hfsm-dev] run {run['run_id']} succeeded"
        assert "eval_f1 26 beat the trivial baseline 23.5 by the task's margin of 2" in message
        return
    assert subject.startswith("[hfsm-dev] completed, but did not beat the trivial baseline: run ")
    assert message.splitlines()[0] == (f"Run {run['run_id']} completed, but did not beat the trivial baseline: "
                                       f"question-answering fine-tune of {SPEC['model']}.")
    assert "verdict: eval_f1 20 did not beat the trivial baseline 23.5 by the task's margin of 2 (needed >= 25.5)" \
        in message
    assert package["ModelPackageDescription"].startswith("[eval_f1 20 did not beat the trivial baseline 23.5")


def test_a_job_stopped_at_max_runtime_says_so_in_one_sentence(state, context):
    run = state["run"]
    job = handlers.start_training({"run": run, "attempt": 0}, context)
    fake = sm_backend().training_jobs[job["job_name"]]
    fake.training_job_status, fake.secondary_status = "Stopped", "MaxRuntimeExceeded"
    bucket, prefix = run["uris"]["checkpoint"].removeprefix("s3://").split("/", 1)
    aws.client("s3").put_object(Bucket=bucket, Key=prefix + "_progress.json", Body=b'{"step": 140, "at": 1}')
    result = strict_json(handlers.check_job({"job": job}, context))
    assert result["state"] == "failed"
    assert result["failure_reason"] == (
        "MaxRuntimeExceeded: SageMaker stopped the job at max_runtime_seconds=3600 at step 140; no checkpoint "
        "reached S3. Raise max_runtime_seconds (it counts start-up, data download and training) and submit again.")


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


def test_a_start_never_adopts_a_job_of_another_spec(data, context):
    """The same run id planned twice for different specs: the second start fails loudly and starts nothing."""
    run_id = "squad-20250101000000-0123456789abcdef"
    first = handlers.prepare({"spec": SPEC, "run_id": run_id}, context)["run"]
    handlers.start_training({"run": first, "attempt": 0}, context)
    assert handlers.start_training({"run": first, "attempt": 0}, context)["created"] is False  # a retry adopts
    other_spec = {**SPEC, "hyperparameters": {"learning_rate": 1e-4}}
    second = prepare_run(other_spec, load_settings(), run_id=run_id)  # no job-name check: as if planned earlier
    with pytest.raises(JobConflictError) as info:
        handlers.start_training({"run": second, "attempt": 0}, context)
    assert type(info.value).__name__ == "JobConflictError"
    assert "HyperParameters.learning_rate" in str(info.value) and "no job was adopted or started" in str(info.value)
    assert len(aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]) == 1
