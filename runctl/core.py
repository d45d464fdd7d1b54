"""What the CLI does, as functions over boto3 clients (tested with moto)."""

from __future__ import annotations

import json
import os
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from botocore.exceptions import ClientError

from hfsm_lambda import naming
from hfsm_lambda.spec.spec_file import read_spec_file
from hfsm_lambda.watch import orphans
from pipeline_runs.clients import Clients
from pipeline_runs.status import console_url, latest_state, status

OUTPUT_KEY = "FineTuneStateMachineArn"
ARN_ENV = "RUNCTL_STATE_MACHINE_ARN"
PROJECT_ENV, ENVIRONMENT_ENV = "RUNCTL_PROJECT", "RUNCTL_ENV"
# The spec name and run id of CONTRACTS.md, as the Lambdas check them (lambda/naming.py).
NAME_RE = naming.NAME_RE
RUN_ID_RE = naming.RUN_ID_RE
MAX_INPUT_BYTES = 256 * 1024


class RunctlError(Exception):
    """A problem the user can fix; printed without a traceback."""


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


def local_model_folder(spec: dict[str, Any], spec_path: str | Path) -> Path | None:
    """The spec's `model` when it names a folder on this machine (relative to the spec file, else to the current
    folder), as local mode reads it; None for a Hub id or an s3:// URI."""
    model = spec.get("model")
    if not isinstance(model, str) or not model or model.startswith("s3://"):
        return None
    for base in (Path(spec_path).parent, Path.cwd()):
        folder = (base / model).expanduser()
        if folder.is_dir():
            if not (folder / "config.json").is_file():
                raise RunctlError(f"{spec_path}: model {model} is the folder {folder}, which has no config.json; give "
                                  "a folder written by save_pretrained (config, weights, tokenizer)")
            return folder.resolve()
    return None


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
    run = latest_state(clients, execution_arn).get("run")
    if run and not keep_jobs:
        found = orphans.stop_jobs(clients.sagemaker, orphans.run_job_names(run))
        jobs = [job["job_name"] for job in found if job["action"] == "stopped"]
    return {"execution_arn": execution_arn, "previous_status": info["status"],
            "stopped_execution": stopped_execution, "stopped_jobs": jobs, "run_id": info.get("run_id"),
            "console_url": console_url(execution_arn)}
