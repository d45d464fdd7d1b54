"""What the CLI does, as functions over boto3 clients (tested with moto)."""

from __future__ import annotations

import json
import os
import secrets
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from contract import summary as run_summary
from hfsm_lambda import naming
from hfsm_lambda.goodput import sources as goodput_sources
from hfsm_lambda.spec.spec_file import read_spec_file
from hfsm_lambda.watch import orphans

OUTPUT_KEY = "FineTuneStateMachineArn"
ARN_ENV = "RUNCTL_STATE_MACHINE_ARN"
PROJECT_ENV, ENVIRONMENT_ENV = "RUNCTL_PROJECT", "RUNCTL_ENV"
# The spec name and run id of CONTRACTS.md, as the Lambdas check them (lambda/naming.py).
NAME_RE = naming.NAME_RE
RUN_ID_RE = naming.RUN_ID_RE
MAX_INPUT_BYTES = 256 * 1024


class RunctlError(Exception):
    """A problem the user can fix; printed without a traceback."""


class Clients:
    """The clients runctl uses, made on first use from `session` unless given."""

    def __init__(self, session: Any = None, *, sfn: Any = None, sagemaker: Any = None,
                 cloudformation: Any = None, logs: Any = None, s3: Any = None, lambda_: Any = None,
                 ec2: Any = None) -> None:
        self._session = session
        self._given = {"stepfunctions": sfn, "sagemaker": sagemaker, "cloudformation": cloudformation,
                       "logs": logs, "s3": s3, "lambda": lambda_, "ec2": ec2}

    def _client(self, service: str) -> Any:
        if self._given[service] is None:
            self._given[service] = self._session.client(service)
        return self._given[service]

    @property
    def sfn(self) -> Any:
        return self._client("stepfunctions")

    @property
    def sagemaker(self) -> Any:
        return self._client("sagemaker")

    @property
    def cloudformation(self) -> Any:
        return self._client("cloudformation")

    @property
    def logs(self) -> Any:
        return self._client("logs")

    @property
    def s3(self) -> Any:
        return self._client("s3")

    @property
    def ec2(self) -> Any:  # runctl plan: Prepare's free-IP check of EFA subnets
        return self._client("ec2")

    @property
    def lambda_(self) -> Any:
        return self._client("lambda")


def resolve_state_machine_arn(clients: Clients, *, arn: str | None, project: str | None,
                              environment: str | None) -> str:
    """--state-machine-arn, else $RUNCTL_STATE_MACHINE_ARN, else output FineTuneStateMachineArn of stack
    <project>-<env>-pipeline (project/env from options, $RUNCTL_PROJECT/$RUNCTL_ENV, default hfsm/dev)."""
    arn = arn or os.environ.get(ARN_ENV)
    if arn:
        return arn
    stack = f"{project or os.environ.get(PROJECT_ENV, 'hfsm')}-{environment or os.environ.get(ENVIRONMENT_ENV, 'dev')}" \
            "-pipeline"
    try:
        outputs = clients.cloudformation.describe_stacks(StackName=stack)["Stacks"][0].get("Outputs", [])
    except ClientError as err:
        raise RunctlError(f"cannot read stack {stack} ({err.response['Error'].get('Message', err)}); pass "
                          f"--state-machine-arn or set {ARN_ENV}") from err
    for output in outputs:
        if output["OutputKey"] == OUTPUT_KEY:
            return output["OutputValue"]
    raise RunctlError(f"stack {stack} has no output {OUTPUT_KEY}; pass --state-machine-arn or set {ARN_ENV}")


def console_url(execution_arn: str) -> str:
    return naming.execution_url(execution_arn.split(":")[3], execution_arn)


def execution_arn_for(state_machine_arn: str, run: str) -> str:
    if run.startswith("arn:") and ":execution:" in run:
        return run
    if not naming.EXECUTION_NAME_RE.fullmatch(run):
        raise RunctlError(f"{run!r} is neither an execution ARN nor a run id / execution name")
    return naming.execution_arn(state_machine_arn, run)


def load_spec(path: str, name: str | None) -> dict[str, Any]:
    spec = read_spec_file(path, RunctlError)
    if name is not None:
        spec["name"] = name
    if not isinstance(spec.get("name"), str) or not NAME_RE.fullmatch(spec["name"]):
        raise RunctlError("the spec's name must be 1-32 characters [a-z0-9-] starting with a letter "
                          "(set it in the spec or with --name)")
    return spec


def new_run_id(name: str, now: datetime | None = None) -> str:
    return naming.make_run_id(name, now or datetime.now(UTC), secrets.token_hex(naming.RUN_ID_HEX // 2))


def submit(clients: Clients, state_machine_arn: str, spec: dict[str, Any], *,
           execution_name: str | None = None) -> dict[str, str]:
    """Start an execution named after a new run id; Prepare validates the spec and uses that run id."""
    run_id = new_run_id(spec["name"])
    payload = json.dumps({"spec": spec, "run_id": run_id})
    if len(payload.encode()) > MAX_INPUT_BYTES:
        raise RunctlError(f"the spec is {len(payload.encode())} bytes; Step Functions accepts {MAX_INPUT_BYTES}")
    name = execution_name or run_id
    arn = clients.sfn.start_execution(stateMachineArn=state_machine_arn, name=name, input=payload)["executionArn"]
    return {"run_id": run_id, "execution_arn": arn, "console_url": console_url(arn)}


def printable(text: str) -> str:
    """`text` with every control or format character (ANSI escapes, carriage returns, bidi overrides) shown as an
    escape: job logs and failure reasons are written by jobs, and must not drive the terminal they are printed on."""
    return "".join(c if c.isprintable() else (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")
                   for c in text)


def _latest_state(clients: Clients, execution_arn: str) -> dict[str, Any]:
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
        raise RunctlError(f"no execution {execution_arn}: {err.response['Error'].get('Message', err)}") from err
    state = _latest_state(clients, execution_arn)
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


def stop(clients: Clients, execution_arn: str, *, keep_jobs: bool = False, who: str = "runctl") -> dict[str, Any]:
    """Stop the execution first (no new job starts), then the jobs Prepare planned for it that are still in
    progress (the names in Prepare's output, as the orphaned-job stopper does: never a name from the input)."""
    info = status(clients, execution_arn, live_ledger=False)
    stopped_execution = False
    if info["status"] == "RUNNING":
        clients.sfn.stop_execution(executionArn=execution_arn, error="runctl.Stopped",
                                   cause=f"stopped by {who} with runctl")
        stopped_execution = True
    jobs: list[str] = []
    run = _latest_state(clients, execution_arn).get("run")
    if run and not keep_jobs:
        found = orphans.stop_jobs(clients.sagemaker, orphans.run_job_names(run))
        jobs = [job["job_name"] for job in found if job["action"] == "stopped"]
    return {"execution_arn": execution_arn, "previous_status": info["status"],
            "stopped_execution": stopped_execution, "stopped_jobs": jobs, "run_id": info.get("run_id"),
            "console_url": console_url(execution_arn)}
