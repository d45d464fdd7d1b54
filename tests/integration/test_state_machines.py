"""The synthesized state machines executed by moto's Step Functions interpreter: every path of a run."""

from __future__ import annotations

import json

import pytest
from testkit.pipeline_harness import (
    COMPLETED,
    FAILED,
    INTERRUPTED,
    MAX_WAIT,
    RUNNING,
    Pipeline,
    ScriptedSageMaker,
    spec,
    with_data,
)

pytestmark = pytest.mark.slow

def test_success_registers_model_and_notifies(pipeline: Pipeline) -> None:
    p = with_data(pipeline)
    with ScriptedSageMaker(attempts=[[RUNNING, RUNNING, COMPLETED]]).installed() as sm:
        desc = p.wait(p.start(spec()))
    assert desc["status"] == "SUCCEEDED", desc
    states = p.entered_states(desc["executionArn"])
    assert states[0] == "Prepare" and "StartTraining" in states and states[-1] == "RunSucceeded"
    assert states.count("CheckTraining") == 3
    assert len(sm.created) == 1
    packages = p.model_packages()
    assert len(packages) == 1 and packages[0]["ModelApprovalStatus"] == "PendingManualApproval"
    # Job names fall under the ARN pattern the Lambda roles are scoped to (hfsm-dev-*).
    (job,) = p.sm.list_training_jobs()["TrainingJobSummaries"]
    assert job["TrainingJobName"].startswith("hfsm-dev-")
    request = p.sm.describe_training_job(TrainingJobName=job["TrainingJobName"])
    assert request["EnableManagedSpotTraining"] is True
    assert request["CheckpointConfig"]["S3Uri"].startswith("s3://hfsm-dev-artifacts-")
    assert request["HyperParameters"]["sagemaker_program"] == '"train.py"'
    result = json.loads(desc["output"])["result"]
    assert result["model_package_arn"] == packages[0]["ModelPackageArn"]
    (note,) = p.published()
    assert "SUCCEEDED" in note["subject"].upper() or "succeeded" in note["message"].lower()
    assert result["summary_uri"] in note["message"] or job["TrainingJobName"] in note["message"]


def test_training_job_failure_fails_the_run_and_notifies(pipeline: Pipeline) -> None:
    p = with_data(pipeline)
    with ScriptedSageMaker(attempts=[[RUNNING, FAILED]]).installed() as sm:
        desc = p.wait(p.start(spec()))
    assert desc["status"] == "FAILED"
    assert desc["error"] == "TrainingJobFailed" and "CUDA out of memory" in desc["cause"]
    assert len(sm.created) == 1, "an algorithm error is not retried with another instance"
    assert p.model_packages() == []
    (note,) = p.published()
    assert "CUDA out of memory" in note["message"]


def test_spot_interruptions_then_success_keep_one_job(pipeline: Pipeline) -> None:
    p = with_data(pipeline)
    with ScriptedSageMaker(attempts=[[RUNNING, INTERRUPTED, RUNNING, INTERRUPTED, COMPLETED]]).installed() as sm:
        desc = p.wait(p.start(spec()))
    assert desc["status"] == "SUCCEEDED"
    assert len(sm.created) == 1, "SageMaker restarts an interrupted spot job itself; no new attempt"
    assert p.entered_states(desc["executionArn"]).count("CheckTraining") == 5


def test_max_wait_exceeded_falls_back_to_on_demand_with_same_checkpoints(pipeline: Pipeline) -> None:
    p = with_data(pipeline)
    with ScriptedSageMaker(attempts=[[RUNNING, MAX_WAIT], [RUNNING, COMPLETED]]).installed() as sm:
        desc = p.wait(p.start(spec()))
    assert desc["status"] == "SUCCEEDED", desc.get("cause")
    states = p.entered_states(desc["executionArn"])
    assert states.count("StartTraining") == 2 and "PlanFallback" in states
    jobs = sorted(p.sm.list_training_jobs()["TrainingJobSummaries"], key=lambda j: j["CreationTime"])
    first, second = (p.sm.describe_training_job(TrainingJobName=j["TrainingJobName"]) for j in jobs)
    assert first["TrainingJobName"] != second["TrainingJobName"]
    assert first["CheckpointConfig"]["S3Uri"] == second["CheckpointConfig"]["S3Uri"]
    assert first["EnableManagedSpotTraining"] is True and not second.get("EnableManagedSpotTraining")
    assert len(sm.created) == 2


def test_fallback_exhausted_fails_clearly(pipeline: Pipeline) -> None:
    p = with_data(pipeline)
    with ScriptedSageMaker(attempts=[[MAX_WAIT]]).installed() as sm:
        desc = p.wait(p.start(spec()))
    assert desc["status"] == "FAILED"
    assert desc["error"] == "FallbackExhaustedError"
    assert len(sm.created) == 2  # the spot attempt and the one on-demand fallback


def test_invalid_spec_fails_fast_naming_every_field_and_starts_no_job(pipeline: Pipeline) -> None:
    p = with_data(pipeline)
    bad = spec(task="translation", tsk="typo", compute={"instance_type": "ml.g5.2xlarge", "instance_count": "two"})
    with ScriptedSageMaker().installed() as sm:
        desc = p.wait(p.start(bad))
    assert desc["status"] == "FAILED" and desc["error"] == "SpecError"
    for field in ("task", "tsk", "compute.instance_count"):
        assert f"- {field}:" in desc["cause"], field
    assert sm.created == [] and p.sm.list_training_jobs()["TrainingJobSummaries"] == []
    (note,) = p.published()
    assert "compute.instance_count" in note["message"]


def test_spec_beyond_the_environment_fails_preflight_with_every_problem(pipeline: Pipeline) -> None:
    p = with_data(pipeline)
    bad = spec(compute={"instance_type": "ml.p5.48xlarge", "instance_count": 9},
               data={"train": {"s3": "datasets/empty/", "distribution": "ShardedByS3Key"}})
    with ScriptedSageMaker().installed() as sm:
        desc = p.wait(p.start(bad))
    assert desc["status"] == "FAILED" and desc["error"] == "PreflightError"
    for fragment in ("compute.instance_type", "ml.p5.48xlarge", "compute.instance_count", "data.train"):
        assert fragment in desc["cause"], fragment
    assert sm.created == []


def test_throttled_create_is_retried_then_succeeds(pipeline: Pipeline) -> None:
    """boto3 retries a throttled call itself; the run goes on with one job."""
    p = with_data(pipeline)
    with ScriptedSageMaker(refuse_creates=[("ThrottlingException", "Rate exceeded")]).installed() as sm:
        desc = p.wait(p.start(spec()))
    assert desc["status"] == "SUCCEEDED", desc.get("cause")
    assert len(sm.created) == 1 and sm.refused == ["ThrottlingException"]


def test_full_quota_is_retried_by_the_state_machine_then_succeeds(pipeline: Pipeline) -> None:
    """ResourceLimitExceeded (no free instances in the account quota) fails the Lambda; the task's Retry with
    backoff tries again, and the second start creates the job."""
    p = with_data(pipeline)
    with ScriptedSageMaker(refuse_creates=[("ResourceLimitExceeded", "quota for ml.g5.2xlarge reached")],
                           ).installed() as sm:
        desc = p.wait(p.start(spec()))
    assert desc["status"] == "SUCCEEDED", desc.get("cause")
    assert len(sm.created) == 1 and sm.refused == ["ResourceLimitExceeded"]
    failed = [e for e in p.history(desc["executionArn"]) if e["type"] == "LambdaFunctionFailed"]
    assert [e["lambdaFunctionFailedEventDetails"]["error"] for e in failed] == ["ResourceLimitExceeded"]


def test_tokenizer_stage_runs_map_then_reduce_then_training(pipeline: Pipeline) -> None:
    p = with_data(pipeline)
    tok = spec(tokenizer={"type": "bpe", "vocab_size": 8000, "instance_type": "ml.c5.2xlarge",
                          "instance_count": 2})
    with ScriptedSageMaker().installed():
        desc = p.wait(p.start(tok))
    assert desc["status"] == "SUCCEEDED", desc.get("cause")
    assert [e for e in p.entered_states(desc["executionArn"]) if e.startswith("Start")] == [
        "StartTokenizerMap", "StartTokenizerReduce", "StartTraining"]
    assert len(p.sm.list_processing_jobs()["ProcessingJobSummaries"]) == 2
    (train,) = p.sm.list_training_jobs()["TrainingJobSummaries"]
    channels = {c["ChannelName"] for c in p.sm.describe_training_job(
        TrainingJobName=train["TrainingJobName"])["InputDataConfig"]}
    assert "tokenizer" in channels


def test_uploaded_spec_starts_one_run_per_object_version(pipeline: Pipeline) -> None:
    p = with_data(pipeline)
    body = json.dumps(spec(name="uploaded")).encode()
    with ScriptedSageMaker().installed():
        p.s3.put_object(Bucket=p.dep.data_bucket, Key="runs/uploaded.json", Body=body)
        (execution,) = p.sfn.list_executions(stateMachineArn=p.dep.fine_tune_arn)["executions"]
        # EventBridge delivers at least once: the same event again starts nothing new.
        trigger = p.dep.functions["trigger"]
        event = next(e for n, e in p.emulator.router.invocations if n == trigger)
        result, errored = p.emulator.router.invoke(trigger, event)
        assert not errored and result["execution_arn"] == execution["executionArn"]
        desc = p.wait(execution["executionArn"])
    assert desc["status"] == "SUCCEEDED", desc.get("cause")
    assert len(p.sfn.list_executions(stateMachineArn=p.dep.fine_tune_arn)["executions"]) == 1
    assert len(p.sm.list_training_jobs()["TrainingJobSummaries"]) == 1


def test_invalid_uploaded_spec_is_reported_and_starts_no_job(pipeline: Pipeline) -> None:
    p = with_data(pipeline)
    with ScriptedSageMaker().installed() as sm:
        p.s3.put_object(Bucket=p.dep.data_bucket, Key="runs/broken.json", Body=b'{"version": 1, "name": "x"')
        (execution,) = p.sfn.list_executions(stateMachineArn=p.dep.fine_tune_arn)["executions"]
        desc = p.wait(execution["executionArn"])
    assert desc["status"] == "FAILED" and desc["error"] == "SpecError"
    assert sm.created == []
    (note,) = p.published()
    assert "runs/broken.json" in note["message"] or "JSON" in note["message"]


def _assert_durable_steps_and_retryable_stop(p: Pipeline, execution_arn: str, first: str) -> None:
    # the status carried through the loop reports the durable step; the stop made the attempt retryable
    checks = [json.loads(e["stateExitedEventDetails"]["output"]) for e in p.history(execution_arn)
              if e.get("stateExitedEventDetails", {}).get("name") == "CheckTraining"]
    durable = [c["status"]["durability"]["last_durable_step"] for c in checks if c["status"]["job_name"] == first]
    assert durable[:4] == [100, 200, 300, 300] and durable[-1] == 300
    stopped = [c["status"] for c in checks if c["status"]["job_name"] == first][-1]
    assert stopped["state"] == "retryable" and "durability watchdog" in stopped["failure_reason"]


def test_durability_watchdog_stops_a_job_whose_checkpoints_stop_arriving(pipeline: Pipeline, tmp_path,
                                                                          monkeypatch) -> None:
    """Checkpoints reach S3 for the first three looks, then stop; the job keeps Training. After
    intervals x every_minutes without a new durable checkpoint the run warns once, stops the job, the stop is
    retryable, and the fallback attempt (same checkpoint prefix) resumes and completes. The Lambda code runs in
    this process: the watchdog's clock moves 8 minutes per look."""
    from datetime import UTC, datetime, timedelta

    from testkit.checkpoints import upload_checkpoint

    from hfsm_lambda.watch import durability

    p = with_data(pipeline)
    t0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
    clock = {"now": t0}
    monkeypatch.setattr(durability, "utc_now", lambda: clock["now"])
    training = {"TrainingJobStatus": "InProgress", "SecondaryStatus": "Training",
                "SecondaryStatusTransitions": [{"Status": "Starting", "StartTime": t0 - timedelta(minutes=5)},
                                               {"Status": "Training", "StartTime": t0}]}
    # the durability watchdog alone: this fake job uploads checkpoints but no heartbeat, which the stall watch
    # would stop after its start-up limit (30 min before any measured start-up)
    run_spec = spec(checkpoint={"every_steps": 100, "every_minutes": 10, "watchdog": {"intervals": 3,
                                                                                      "action": "stop"}},
                    stall={"action": "off"})
    uploads: list[int] = []

    def look(attempt: int, i: int) -> None:
        if attempt == 0:
            clock["now"] = t0 + timedelta(minutes=8 * i)
            if i < 3:  # steps 100, 200, 300 at minutes 0, 8, 16; then nothing more reaches S3
                uri = sm.created[0]["checkpoint_config"]["S3Uri"]
                upload_checkpoint(p.s3, uri, tmp_path, 100 * (i + 1), saved_at=clock["now"].timestamp())
                uploads.append(100 * (i + 1))

    sm = ScriptedSageMaker(attempts=[[training], [RUNNING, COMPLETED]], on_describe=look)
    with sm.installed():
        desc = p.wait(p.start(run_spec))
    assert desc["status"] == "SUCCEEDED", desc.get("cause")
    assert uploads == [100, 200, 300]
    first, second = (c["training_job_name"] for c in sm.created)
    assert sm.stopped == [first], "the stale job is stopped once"
    states = p.entered_states(desc["executionArn"])
    assert states.count("StartTraining") == 2 and "PlanFallback" in states and "TrainingStarted" in states
    # one warning, naming the last durable checkpoint; the run's success afterwards
    warnings = [n for n in p.published() if n["attributes"].get("status", {}).get("Value") == "Warning"]
    (warning,) = warnings
    assert "stopped: no new checkpoint for 32 min" in warning["subject"]
    assert "Last durable checkpoint: step 300 saved 2025-06-01T12:16:00Z" in warning["message"]
    _assert_durable_steps_and_retryable_stop(p, desc["executionArn"], first)
    a, b = (p.sm.describe_training_job(TrainingJobName=n) for n in (first, second))
    assert a["CheckpointConfig"]["S3Uri"] == b["CheckpointConfig"]["S3Uri"]
    assert a["HyperParameters"]["save_every_minutes"] == "10"
    result = json.loads(desc["output"])["result"]
    assert result["checkpoints"]["last_durable_step"] == 300
