"""stop_run_jobs: the jobs of a failed, timed-out or aborted execution are stopped (the moto/state-machine version
of this is tests/integration/test_guardrails.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from botocore.exceptions import ClientError

from hfsm_lambda.watch import orphans

ARN = "arn:aws:states:us-east-1:123456789012:execution:hfsm-dev-fine-tune:run-1"
MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:hfsm-dev-fine-tune"
RUN = {"run_id": "qa-20260101000000-abcd", "tokenizer_stage": True,
       "job_names": {"tokenizer_map": "hfsm-dev-qa-tokmap0", "tokenizer_reduce": "hfsm-dev-qa-tokred0",
                     "train": ["hfsm-dev-qa-train0", "hfsm-dev-qa-train1"]}}


class FakeSfn:
    def __init__(self, events: list[dict[str, Any]]) -> None:
        self.events = events

    def get_execution_history(self, **kwargs: Any) -> dict[str, Any]:
        assert kwargs["executionArn"] == ARN and kwargs["reverseOrder"] is False
        return {"events": self.events}


class FakeSageMaker:
    def __init__(self, statuses: dict[str, str]) -> None:
        self.statuses = statuses
        self.stopped: list[str] = []

    def _describe(self, name: str, key: str) -> dict[str, Any]:
        if name not in self.statuses:
            raise ClientError({"Error": {"Code": "ValidationException", "Message": "Requested resource not found"}},
                              "Describe")
        return {key: self.statuses[name]}

    def describe_training_job(self, TrainingJobName: str) -> dict[str, Any]:  # noqa: N803 - boto3's names
        return self._describe(TrainingJobName, "TrainingJobStatus")

    def describe_processing_job(self, ProcessingJobName: str) -> dict[str, Any]:  # noqa: N803
        return self._describe(ProcessingJobName, "ProcessingJobStatus")

    def stop_training_job(self, TrainingJobName: str) -> None:  # noqa: N803
        self.stopped.append(TrainingJobName)

    def stop_processing_job(self, ProcessingJobName: str) -> None:  # noqa: N803
        self.stopped.append(ProcessingJobName)


def history(run: dict[str, Any] | None) -> list[dict[str, Any]]:
    events = [{"type": "ExecutionStarted"}, {"type": "TaskStateEntered", "stateEnteredEventDetails": {"name": "Prepare"}}]
    if run is not None:
        events.append({"type": "TaskStateExited", "stateExitedEventDetails": {
            "name": "Prepare", "output": json.dumps({"run": run, "attempt": 0})}})
    return events


def event(status: str, machine: str = MACHINE) -> dict[str, Any]:
    return {"source": "aws.states", "detail-type": "Step Functions Execution Status Change",
            "detail": {"executionArn": ARN, "stateMachineArn": machine, "status": status}}


@pytest.mark.parametrize("status", ["FAILED", "TIMED_OUT", "ABORTED"])
def test_every_job_still_in_progress_is_stopped(status: str) -> None:
    sm = FakeSageMaker({"hfsm-dev-qa-tokmap0": "Completed", "hfsm-dev-qa-tokred0": "Completed",
                        "hfsm-dev-qa-train0": "Stopped", "hfsm-dev-qa-train1": "InProgress"})
    result = orphans.stop_run_jobs(event(status), FakeSfn(history(RUN)), sm, (MACHINE,))
    assert sm.stopped == ["hfsm-dev-qa-train1"] and result["stopped"] == ["hfsm-dev-qa-train1"]
    assert result["run_id"] == RUN["run_id"]
    assert [j["action"] for j in result["jobs"]] == ["left", "left", "left", "stopped"]


def test_a_processing_job_in_progress_is_stopped_and_never_started_jobs_are_skipped() -> None:
    sm = FakeSageMaker({"hfsm-dev-qa-tokmap0": "InProgress"})
    result = orphans.stop_run_jobs(event("ABORTED"), FakeSfn(history(RUN)), sm, (MACHINE,))
    assert sm.stopped == ["hfsm-dev-qa-tokmap0"] and len(result["jobs"]) == 1


def test_nothing_to_do_when_prepare_never_planned_or_the_event_is_not_ours() -> None:
    sm = FakeSageMaker({"hfsm-dev-qa-train0": "InProgress"})
    assert orphans.stop_run_jobs(event("FAILED"), FakeSfn(history(None)), sm, (MACHINE,))["stopped"] == []
    assert orphans.stop_run_jobs(event("SUCCEEDED"), FakeSfn(history(RUN)), sm, (MACHINE,))["stopped"] == []
    other = "arn:aws:states:us-east-1:123456789012:stateMachine:someone-else"
    assert orphans.stop_run_jobs(event("FAILED", other), FakeSfn(history(RUN)), sm, (MACHINE,))["stopped"] == []
    assert sm.stopped == []


def test_a_repeated_event_stops_nothing_twice() -> None:
    sm = FakeSageMaker({"hfsm-dev-qa-train0": "InProgress"})
    orphans.stop_run_jobs(event("FAILED"), FakeSfn(history(RUN)), sm, (MACHINE,))
    sm.statuses["hfsm-dev-qa-train0"] = "Stopping"
    orphans.stop_run_jobs(event("FAILED"), FakeSfn(history(RUN)), sm, (MACHINE,))
    assert sm.stopped == ["hfsm-dev-qa-train0"]
