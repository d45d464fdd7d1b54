"""Security and spend through the synthesized state machines: forged input, limits, orphaned jobs."""

from __future__ import annotations

import copy
import json
import os
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws
from testkit.pipeline_harness import RUNNING, Pipeline, ScriptedSageMaker, spec, with_data

from stacks.app_builder import cdk_json_context

pytestmark = pytest.mark.slow
# Not `from conftest import`: several test folders have a conftest module, and which one that name means depends
# on what else is collected.
DEV_ACCOUNT = cdk_json_context()["environments"]["dev"]["account"]


@pytest.fixture
def make_pipeline(dev_outdir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    monkeypatch.setenv("MOTO_ACCOUNT_ID", DEV_ACCOUNT)
    made: list[Pipeline] = []
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}):
        def make(**settings: Any) -> Pipeline:
            made.append(with_data(Pipeline(dev_outdir, **settings)))
            return made[-1]
        try:
            yield make
        finally:
            for p in made:
                for arn in p.dep.state_machines.values():
                    for e in p.sfn.list_executions(stateMachineArn=arn, statusFilter="RUNNING")["executions"]:
                        p.sfn.stop_execution(executionArn=e["executionArn"])
                p.emulator.close()
    os.environ.pop("MOTO_ACCOUNT_ID", None)


def forged_run(p: Pipeline) -> dict[str, Any]:
    """The finding's hand-made run, from a real plan: 100 x ml.p5.48xlarge, a bucket outside the project, another
    run's models/ prefix."""
    tok = spec(tokenizer={"type": "bpe", "vocab_size": 8000, "instance_type": "ml.c5.2xlarge", "instance_count": 2})
    planned, errored = p.emulator.router.invoke(p.dep.functions["prepare"], {"spec": tok})
    assert not errored, planned
    run = planned["run"]
    run["spec"]["tokenizer"].update(instance_type="ml.p5.48xlarge", instance_count=100)
    run["spec"]["data"]["train"]["s3"] = "s3://someone-elses-bucket/loot/"
    run["uris"]["tokenizer_counts"] = f"s3://{p.dep.artifacts_bucket}/models/victim-20250101000000-abcd/"
    return run


def test_a_forged_run_given_to_the_tokenizer_machine_starts_no_job(make_pipeline: Any) -> None:
    p = make_pipeline()
    with ScriptedSageMaker().installed():
        arn = p.sfn.start_execution(stateMachineArn=p.dep.tokenizer_arn, name="forged",
                                    input=json.dumps({"run": forged_run(p)}))["executionArn"]
        desc = p.wait(arn)
    assert desc["status"] == "FAILED" and desc["error"] == "SpecError", desc
    assert p.entered_states(arn)[0] == "Prepare", "no state machine skips Prepare"
    assert p.sm.list_processing_jobs()["ProcessingJobSummaries"] == []


def test_a_forged_run_next_to_a_valid_spec_is_replaced_by_the_planned_one(make_pipeline: Any) -> None:
    p = make_pipeline()
    with ScriptedSageMaker().installed() as sm:
        arn = p.sfn.start_execution(stateMachineArn=p.dep.fine_tune_arn, name="mixed",
                                    input=json.dumps({"spec": spec(), "run": forged_run(p)}))["executionArn"]
        desc = p.wait(arn)
    assert desc["status"] == "SUCCEEDED", desc.get("cause")
    (request,) = sm.created
    assert request["resource_config"]["InstanceCount"] == 2 and "victim" not in json.dumps(request)


def test_forged_input_straight_to_the_start_lambda_is_rejected_by_the_request_guard(make_pipeline: Any) -> None:
    p = make_pipeline()
    with ScriptedSageMaker().installed():
        result, errored = p.emulator.router.invoke(p.dep.functions["start_processing"],
                                                   {"run": forged_run(p), "stage": "map"})
    assert errored and result["errorType"] == "RequestRejected", result
    for fragment in ("ml.p5.48xlarge", "InstanceCount: 100", "someone-elses-bucket", "models/victim"):
        assert fragment in result["errorMessage"], fragment
    assert p.sm.list_processing_jobs()["ProcessingJobSummaries"] == []


def test_code_execution_from_a_spec_fails_preflight_and_starts_nothing(make_pipeline: Any) -> None:
    p = make_pipeline()
    bad = spec(hyperparameters={"trust_remote_code": True, "push_to_hub": True, "report_to": "wandb"})
    with ScriptedSageMaker().installed() as sm:
        desc = p.wait(p.start(bad, "remote-code"))
    assert desc["status"] == "FAILED" and desc["error"] == "PreflightError"
    for field in ("hyperparameters.trust_remote_code", "hyperparameters.push_to_hub", "hyperparameters.report_to"):
        assert field in desc["cause"], field
    assert sm.created == []


def test_a_run_over_the_cost_limit_fails_preflight_naming_both_figures(make_pipeline: Any) -> None:
    p = make_pipeline(max_run_cost_usd=5)
    with ScriptedSageMaker().installed() as sm:
        desc = p.wait(p.start(spec(), "expensive"))
    assert desc["status"] == "FAILED" and desc["error"] == "PreflightError"
    # 2 attempts x 2 x ml.g5.2xlarge x 1 h ($6.06) + their 100 GB volumes ($0.04 an attempt)
    assert "worst-case cost is $6.14" in desc["cause"] and "$5.00" in desc["cause"], desc["cause"]
    assert sm.created == []


def _wait_for(predicate: Any, timeout: float = 60) -> None:
    deadline = time.time() + timeout
    while not predicate():
        assert time.time() < deadline, "timed out"
        time.sleep(0.2)


def test_the_environment_refuses_a_run_beyond_max_concurrent_runs(make_pipeline: Any) -> None:
    p = make_pipeline(max_concurrent_runs=1)
    with ScriptedSageMaker(attempts=[[RUNNING]]).installed() as script:
        first = p.start(spec(), "first")
        _wait_for(lambda: len(script.created) == 1)
        desc = p.wait(p.start(spec(name="second"), "second"))
        assert desc["status"] == "FAILED" and desc["error"] == "PreflightError"
        assert "already has 1 run(s) in progress" in desc["cause"] and "max_concurrent_runs is 1" in desc["cause"]
        assert len(script.created) == 1
        assert p.sfn.describe_execution(executionArn=first)["status"] == "RUNNING"


def status_change_event(p: Pipeline, arn: str, status: str) -> dict[str, Any]:
    return {"Source": "aws.states", "DetailType": "Step Functions Execution Status Change",
            "Detail": json.dumps({"executionArn": arn, "stateMachineArn": p.dep.fine_tune_arn, "status": status,
                                  "name": arn.rsplit(":", 1)[1],
                                  "stopDate": int(datetime.now(UTC).timestamp() * 1000)})}


@pytest.mark.parametrize("status", ["ABORTED", "FAILED", "TIMED_OUT"])
def test_jobs_of_a_run_that_ended_early_are_stopped(make_pipeline: Any, status: str) -> None:
    p = make_pipeline()
    with ScriptedSageMaker(attempts=[[RUNNING]]).installed() as script:
        arn = p.start(spec(), f"orphan-{status.lower()}")
        _wait_for(lambda: len(script.created) == 1)
        p.sfn.stop_execution(executionArn=arn, error="test", cause="the run ends while its job runs")
        _wait_for(lambda: p.sfn.describe_execution(executionArn=arn)["status"] == "ABORTED")
        job = script.created[0]["training_job_name"]
        assert p.sm.describe_training_job(TrainingJobName=job)["TrainingJobStatus"] == "InProgress"
        # What Step Functions sends to EventBridge; the rule routes it to stop_run_jobs.
        events = p.emulator._client("events", p.emulator.assembly.stacks[0])
        events.put_events(Entries=[status_change_event(p, arn, status)])
        stopper = p.dep.functions["stop_run_jobs"]
        (result,) = [e for n, e in p.emulator.router.invocations if n == stopper]
        assert result["detail"]["status"] == status
        assert script.stopped == [job]
        assert p.sm.describe_training_job(TrainingJobName=job)["TrainingJobStatus"] in ("Stopping", "Stopped")
        # EventBridge delivers at least once: the repeated event stops nothing more.
        events.put_events(Entries=[status_change_event(p, arn, status)])
        assert script.stopped == [job]


def test_a_successful_run_triggers_no_stop(make_pipeline: Any) -> None:
    p = make_pipeline()
    with ScriptedSageMaker().installed() as script:
        desc = p.wait(p.start(spec(), "fine"))
        events = p.emulator._client("events", p.emulator.assembly.stacks[0])
        events.put_events(Entries=[status_change_event(p, desc["executionArn"], "SUCCEEDED")])
    assert desc["status"] == "SUCCEEDED" and script.stopped == []
    assert not [n for n, _ in p.emulator.router.invocations if n == p.dep.functions["stop_run_jobs"]]


def test_the_registered_model_is_a_frozen_copy_under_registry(make_pipeline: Any) -> None:
    p = make_pipeline()
    with ScriptedSageMaker().installed():
        desc = p.wait(p.start(copy.deepcopy(spec()), "frozen"))
    result = json.loads(desc["output"])["result"]
    (package,) = p.model_packages()
    container = p.sm.describe_model_package(ModelPackageName=package["ModelPackageArn"])[
        "InferenceSpecification"]["Containers"][0]
    assert container["ModelDataUrl"] == result["registered_model_uri"]
    assert f"/registry/{result['run_id']}/" in container["ModelDataUrl"]
