"""A run's status as `runctl status` shows it: the execution, the newest state its steps left (run, job, attempt),
the job as SageMaker describes it, the durability watchdog's last look, a running run's goodput ledger so far and a
finished run's summary."""

from __future__ import annotations

import json
from typing import Any

from botocore.exceptions import ClientError

from contract import summary as run_summary
from hfsm_lambda import naming
from hfsm_lambda.goodput import sources as goodput_sources
from hfsm_lambda.watch import orphans
from pipeline_runs.clients import Clients


class RunNotFound(Exception):
    """No execution of that ARN: a problem the user can fix (runctl prints it without a traceback)."""


def console_url(execution_arn: str) -> str:
    return naming.execution_url(execution_arn.split(":")[3], execution_arn)


def latest_state(clients: Clients, execution_arn: str) -> dict[str, Any]:
    """The newest full state the run's own steps left behind (`run`, `job`, `status`, `attempt`), read only from
    events after Prepare returned, with Prepare's `run` (orphans.prepare_exit): before Prepare the state is the
    caller's input, which could name another run. {} when Prepare has not planned a run."""
    try:
        prepared = orphans.prepare_exit(clients.sfn, execution_arn)
    except ClientError:
        return {}
    if prepared is None:
        return {}
    prepare_id, run = prepared
    try:
        pages = clients.sfn.get_paginator("get_execution_history").paginate(
            executionArn=execution_arn, reverseOrder=True, includeExecutionData=True,
            PaginationConfig={"MaxItems": 500, "PageSize": 100})
        events = [e for page in pages for e in page.get("events", [])]
    except ClientError:
        return {"run": run}
    for event in events:
        if int(event.get("id") or 0) <= prepare_id:
            break
        for key in ("stateExitedEventDetails", "stateEnteredEventDetails"):
            text = (event.get(key) or {}).get("output") or (event.get(key) or {}).get("input")
            try:
                state = json.loads(text) if text else None
            except json.JSONDecodeError:
                continue
            if isinstance(state, dict) and ("run" in state or "job" in state):
                return {**state, "run": run}
    return {"run": run}


def _describe_job(clients: Clients, job: dict[str, Any]) -> dict[str, Any] | None:
    try:
        if job.get("job_type") == "processing":
            desc = clients.sagemaker.describe_processing_job(ProcessingJobName=job["job_name"])
            return {"status": desc["ProcessingJobStatus"], "secondary_status": None}
        desc = clients.sagemaker.describe_training_job(TrainingJobName=job["job_name"])
        return {"status": desc["TrainingJobStatus"], "secondary_status": desc.get("SecondaryStatus"),
                "failure_reason": desc.get("FailureReason")}
    except (ClientError, KeyError):
        return None


def _dict(value: Any) -> dict[str, Any]:
    """`value` when it is a dict, else {}: the state is written by the run's steps, so its parts are checked."""
    return value if isinstance(value, dict) else {}


def _job_status(clients: Clients, execution: dict[str, Any], state: dict[str, Any]) -> dict[str, Any]:
    """{"job_status": ...}: a running run's job as SageMaker describes it now (None when it cannot be described),
    else the job status its steps last recorded; {} when there is neither."""
    job = _dict(state.get("job"))
    if job and execution["status"] == "RUNNING":
        return {"job_status": _describe_job(clients, job)}
    if isinstance(state.get("status"), dict):
        return {"job_status": {k: state["status"].get(k) for k in ("state", "status", "secondary_status",
                                                                    "failure_reason")}}
    return {}


def _durability(state: dict[str, Any]) -> dict[str, Any]:
    """{"durability": ...}: the durability watchdog's last look (check_job), when it recorded one, else {}."""
    durability = _dict(state.get("status")).get("durability")
    if not isinstance(durability, dict):
        return {}
    return {"durability": {k: durability.get(k) for k in (
        "last_durable_step", "last_durable_at", "age_minutes", "threshold_minutes", "stale", "action", "warned_at",
        "stopped_at", "checkpoint_uri", "checked_at")}}


def _run_summary(execution: dict[str, Any]) -> dict[str, Any]:
    """{"result": ...}: the parts of a succeeded run's summary (Finish's `result`) that status shows, else {}."""
    if execution["status"] != "SUCCEEDED" or not execution.get("output"):
        return {}
    summary = run_summary.of_output(json.loads(execution["output"]))
    if summary is None:
        return {}
    return {run_summary.OUTPUT_KEY: run_summary.shown_in_status(summary)}


def status(clients: Clients, execution_arn: str, *, live_ledger: bool = True) -> dict[str, Any]:
    """What runctl status shows; `live_ledger=False` skips reading the jobs' logs for a running run's ledger
    (stop needs only the run and its jobs)."""
    try:
        execution = clients.sfn.describe_execution(executionArn=execution_arn)
    except ClientError as err:
        raise RunNotFound(f"no execution {execution_arn}: {err.response['Error'].get('Message', err)}") from err
    state = latest_state(clients, execution_arn)
    run = _dict(state.get("run"))
    result: dict[str, Any] = {
        "execution_arn": execution_arn, "status": execution["status"],
        "started": str(execution.get("startDate", "")), "stopped": str(execution.get("stopDate", "") or ""),
        "run_id": run.get("run_id"),
        "attempt": state.get("attempt"), "job": _dict(state.get("job")).get("job_name"),
        "console_url": console_url(execution_arn),
        **_job_status(clients, execution, state), **_durability(state),
    }
    if live_ledger and execution["status"] == "RUNNING" and (run.get("job_names") or {}).get("train"):
        result["goodput"] = live_goodput(clients, run)
    if execution.get("error") or execution.get("cause"):
        result["error"], result["cause"] = execution.get("error"), execution.get("cause")
    return {**result, **_run_summary(execution)}


def live_goodput(clients: Clients, run: dict[str, Any]) -> dict[str, Any]:
    """The goodput ledger of a running run so far, computed as Finish will (lambda/goodput/sources.py), with
    the caller's credentials: {"error": ...} when they cannot read the jobs' logs."""
    return goodput_sources.run_ledger(clients.sagemaker, clients.logs, clients.s3, run)
