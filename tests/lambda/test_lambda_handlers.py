"""Handlers against moto: prepare + pre-flight, idempotent starts. The trigger, polling + fallback and finish +
notify_failure: test_lambda_trigger.py, test_lambda_check_job.py, test_lambda_finish.py."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError
from testkit.lambdas import DATA, SETTINGS, SPEC, strict_json

from hfsm_lambda import aws, handlers, naming
from hfsm_lambda.errors import JobConflictError, PreflightError, ResourceLimitExceeded, SpecError
from hfsm_lambda.errors import ThrottlingException as ThrottlingError
from hfsm_lambda.plan import run as planned
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.settings import load_settings


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


def test_no_attempt_keeps_a_warm_pool(state):
    """Warm pools are not used (README, "Warm pools: evaluated, not used"): no attempt's request sets
    KeepAlivePeriodInSeconds, so no instance stays billed after a job or a run ends."""
    from hfsm_lambda.plan import job_requests, request_guard

    run = request_guard.planned_run(state["run"])
    for attempt in range(run.max_attempts):
        request = request_guard.build(job_requests.training_request, run, load_settings(), attempt)
        assert "KeepAlivePeriodInSeconds" not in request["ResourceConfig"], attempt
        assert set(request["ResourceConfig"]) == {"InstanceType", "InstanceCount", "VolumeSizeInGB", "VolumeKmsKeyId"}


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


def test_a_start_never_adopts_a_job_of_another_spec(data, context):
    """The same run id planned twice for different specs: the second start fails loudly and starts nothing."""
    run_id = "squad-20250101000000-0123456789abcdef"
    first = handlers.prepare({"spec": SPEC, "run_id": run_id}, context)["run"]
    handlers.start_training({"run": first, "attempt": 0}, context)
    assert handlers.start_training({"run": first, "attempt": 0}, context)["created"] is False  # a retry adopts
    other_spec = {**SPEC, "hyperparameters": {"learning_rate": 1e-4}}
    second = prepare_run(other_spec, load_settings(), run_id=run_id)  # no job-name check: as if planned earlier
    with pytest.raises(JobConflictError) as info:
        handlers.start_training({"run": planned.to_json(second), "attempt": 0}, context)
    assert type(info.value).__name__ == "JobConflictError"
    assert "HyperParameters.learning_rate" in str(info.value) and "no job was adopted or started" in str(info.value)
    assert len(aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"]) == 1
