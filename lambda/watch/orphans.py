"""Stops the SageMaker jobs a run left behind when its execution failed, timed out or was aborted.

A Step Functions execution that ends early does not stop the jobs it started: they would run (and bill) until
their MaxRuntimeInSeconds. An EventBridge rule on the state machines' "Step Functions Execution Status Change"
events (FAILED, TIMED_OUT, ABORTED) invokes `stop_run_jobs`, which reads the run's planned job names from the
execution's Prepare output and stops each job still InProgress. Idempotent: events can repeat, and a job already
Stopping/Stopped/Completed is left alone.
"""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from hfsm_lambda.aws import aws_errors, is_not_found

END_STATES = ("FAILED", "TIMED_OUT", "ABORTED")
# The Prepare state of either state machine: its output (ResultPath $) holds the planned run.
PREPARE_STATE = "Prepare"
HISTORY_PAGES = 5  # Prepare is among the first events of an execution


def prepare_exit(stepfunctions: Any, execution_arn: str) -> tuple[int, dict[str, Any]] | None:
    """(event id, run) of Prepare's return in this execution, or None when Prepare never finished. Only this output
    is the run: the execution's input (and so Prepare's input) is whatever its caller wrote."""
    token = None
    for _ in range(HISTORY_PAGES):
        kwargs = {"executionArn": execution_arn, "maxResults": 100, "reverseOrder": False}
        if token:
            kwargs["nextToken"] = token
        with aws_errors():
            page = stepfunctions.get_execution_history(**kwargs)
        for event in page.get("events", []):
            details = event.get("stateExitedEventDetails") or {}
            if details.get("name") == PREPARE_STATE:
                try:
                    output = json.loads(details.get("output") or "{}")
                except json.JSONDecodeError:
                    return None
                run = output.get("run") if isinstance(output, dict) else None
                return (int(event.get("id") or 0), run) if isinstance(run, dict) else None
        token = page.get("nextToken")
        if not token:
            return None
    return None


def planned_run(stepfunctions: Any, execution_arn: str) -> dict[str, Any] | None:
    """The `run` object Prepare returned in this execution, or None when Prepare never finished."""
    found = prepare_exit(stepfunctions, execution_arn)
    return found[1] if found else None


def run_job_names(run: dict[str, Any]) -> list[tuple[str, str]]:
    """(job type, name) of every job the run can start."""
    names = run.get("job_names") or {}
    jobs = [("processing", names[s]) for s in ("tokenizer_map", "tokenizer_reduce")
            if run.get("tokenizer_stage") and isinstance(names.get(s), str)]
    jobs += [("training", n) for n in names.get("train") or [] if isinstance(n, str)]
    return jobs


def stop_jobs(sagemaker: Any, jobs: list[tuple[str, str]]) -> list[dict[str, str]]:
    """Stops each job that is InProgress; returns what was found for each job that exists."""
    out = []
    for job_type, name in jobs:
        describe = (sagemaker.describe_training_job if job_type == "training"
                    else sagemaker.describe_processing_job)
        key = "TrainingJobName" if job_type == "training" else "ProcessingJobName"
        status_key = "TrainingJobStatus" if job_type == "training" else "ProcessingJobStatus"
        try:
            with aws_errors():
                status = describe(**{key: name})[status_key]
        except ClientError as err:
            if is_not_found(err):
                continue  # never started
            raise
        action = "left"
        if status == "InProgress":
            stop = sagemaker.stop_training_job if job_type == "training" else sagemaker.stop_processing_job
            try:
                with aws_errors():
                    stop(**{key: name})
                action = "stopped"
            except ClientError as err:
                # It ended between the describe and the stop: nothing left to do.
                if "status" not in str(err).lower():
                    raise
        out.append({"job_type": job_type, "job_name": name, "status": status, "action": action})
    return out


def stop_run_jobs(event: dict[str, Any], stepfunctions: Any, sagemaker: Any,
                  state_machine_arns: tuple[str, ...]) -> dict[str, Any]:
    detail = event.get("detail") or {}
    status, arn = detail.get("status"), detail.get("executionArn")
    machine = detail.get("stateMachineArn")
    if status not in END_STATES or not isinstance(arn, str):
        return {"execution_arn": arn, "status": status, "stopped": [], "reason": "not a failed execution"}
    if state_machine_arns and machine not in state_machine_arns:
        return {"execution_arn": arn, "status": status, "stopped": [], "reason": "not this environment's"}
    run = planned_run(stepfunctions, arn)
    if run is None:
        return {"execution_arn": arn, "status": status, "stopped": [], "reason": "Prepare never planned a run"}
    jobs = stop_jobs(sagemaker, run_job_names(run))
    return {"execution_arn": arn, "status": status, "run_id": run.get("run_id"), "jobs": jobs,
            "stopped": [j["job_name"] for j in jobs if j["action"] == "stopped"]}
