"""CheckJob and PlanFallback against moto: how a job's status is classified, the fallback sequence, and the
one-sentence reason of a job stopped at max_runtime_seconds."""

from __future__ import annotations

import pytest
from testkit.lambdas import SPEC, sm_backend, strict_json

from hfsm_lambda import aws, handlers
from hfsm_lambda.errors import FallbackExhaustedError, JobFailedError


# --- check_job / plan_fallback ---------------------------------------------------------------------------
@pytest.mark.parametrize(("status", "secondary", "reason", "expected"), [
    ("InProgress", "Training", None, "running"),
    ("Stopping", "Stopping", None, "running"),
    ("Completed", "Completed", None, "completed"),
    ("Stopped", "MaxWaitTimeExceeded", None, "retryable"),
    ("Failed", "Failed", "CapacityError: Unable to provision requested ML compute capacity.", "retryable"),
    ("Failed", "Failed", "InsufficientInstanceCapacity: insufficient capacity", "retryable"),
    # out of memory: retried only when the next attempt runs on another instance type (runs/actions.py), as here
    ("Failed", "Failed", "AlgorithmError: CUDA out of memory", "retryable"),  # the next option: ml.g6.2xlarge
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
