"""`runctl list` (recent runs with state, duration, cost) and `runctl logs RUN [--follow]` (the CloudWatch logs
of every host of every job of a run, merged in time order, each line marked with its job, attempt and host).

SageMaker writes one log stream per instance start: `<job name>/algo-<n>-<epoch seconds>` in
`/aws/sagemaker/TrainingJobs` (processing: `/aws/sagemaker/ProcessingJobs`); a spot restart starts new streams.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from contract import summary as run_summary
from hfsm_lambda.runs.verdict import NOT_BEATEN
from runctl.core import Clients, RunctlError, _latest_state, printable

GROUPS = {"training": "/aws/sagemaker/TrainingJobs", "processing": "/aws/sagemaker/ProcessingJobs"}


# ---- list --------------------------------------------------------------------------------------------
def _duration(start: Any, stop: Any) -> float | None:
    if not isinstance(start, datetime):
        return None
    end = stop if isinstance(stop, datetime) else datetime.now(start.tzinfo or UTC)
    return max(0.0, (end - start).total_seconds())


def list_runs(clients: Clients, state_machine_arn: str, limit: int = 20) -> list[dict[str, Any]]:
    executions = clients.sfn.list_executions(stateMachineArn=state_machine_arn, maxResults=min(limit, 1000))[
        "executions"]
    executions = sorted(executions, key=lambda e: e.get("startDate") or datetime.min.replace(tzinfo=UTC),
                        reverse=True)[:limit]
    rows = []
    for execution in executions:
        desc = clients.sfn.describe_execution(executionArn=execution["executionArn"])
        output = json.loads(desc.get("output") or "{}") if desc.get("output") else {}
        result = run_summary.of_output(output)
        run_id = (result or {}).get("run_id")  # Finish's summary, else Prepare's plan (never the execution's name)
        if run_id is None:
            run = _latest_state(clients, execution["executionArn"]).get("run") or {}
            run_id = run.get("run_id")
        cost = (result or {}).get("cost") or {}
        rows.append({
            "run_id": run_id, "execution": execution["name"], "status": desc["status"],
            "started": desc.get("startDate"), "seconds": _duration(desc.get("startDate"), desc.get("stopDate")),
            "cost_usd": cost.get("cost_usd"), "billable_instance_seconds": cost.get("billable_instance_seconds"),
            "error": desc.get("error"), "verdict": ((result or {}).get("verdict") or {}).get("verdict"),
        })
    return rows


def list_lines(rows: list[dict[str, Any]]) -> list[str]:
    if not rows:
        return ["no runs yet"]
    table = [("RUN", "STATE", "STARTED (UTC)", "DURATION", "COST", "NOTE")]
    for r in rows:
        seconds = r["seconds"]
        duration = "-" if seconds is None else f"{int(seconds) // 3600}:{int(seconds) // 60 % 60:02d}:" \
                                               f"{int(seconds) % 60:02d}"
        started = r["started"].astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S") if isinstance(
            r["started"], datetime) else "-"
        cost = f"${r['cost_usd']:.2f}" if r["cost_usd"] is not None else (
            f"{r['billable_instance_seconds']:.0f} inst-s" if r["billable_instance_seconds"] else "-")
        note = r["error"] or ("in progress" if r["status"] == "RUNNING" else
                              "did not beat the trivial baseline" if r.get("verdict") == NOT_BEATEN else "")
        table.append((str(r["run_id"] or f"({r['execution']})"), r["status"], started, duration, cost, note))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in table]


# ---- logs --------------------------------------------------------------------------------------------
def run_jobs(clients: Clients, execution_arn: str) -> tuple[str, list[tuple[str, str, str]]]:
    """(execution status, [(job type, job name, label)]) for the jobs the run planned."""
    try:
        status = clients.sfn.describe_execution(executionArn=execution_arn)["status"]
    except ClientError as err:
        raise RunctlError(f"no execution {execution_arn}: {err.response['Error'].get('Message', err)}") from err
    run = _latest_state(clients, execution_arn).get("run") or {}
    names = run.get("job_names") or {}
    jobs = []
    if run.get("tokenizer_stage"):
        jobs += [("processing", names["tokenizer_map"], "tokenizer map"),
                 ("processing", names["tokenizer_reduce"], "tokenizer reduce")]
    jobs += [("training", name, f"train attempt {i}") for i, name in enumerate(names.get("train") or [])]
    return status, jobs


class LogReader:
    """Follows every stream of a set of jobs, remembering where each stream was read up to."""

    def __init__(self, logs: Any, jobs: list[tuple[str, str, str]]) -> None:
        self.logs = logs
        self.jobs = jobs
        self._tokens: dict[tuple[str, str], str | None] = {}

    def _streams(self) -> Iterator[tuple[str, str, str]]:
        """(group, stream, marker) for every stream of the jobs; a host's later streams are its restarts."""
        for job_type, name, label in self.jobs:
            group = GROUPS[job_type]
            try:
                pages = self.logs.get_paginator("describe_log_streams").paginate(
                    logGroupName=group, logStreamNamePrefix=f"{name}/")
                streams = sorted(s["logStreamName"] for page in pages for s in page.get("logStreams", []))
            except ClientError as err:
                if err.response["Error"].get("Code") == "ResourceNotFoundException":
                    continue
                raise
            starts: dict[str, int] = {}
            for stream in sorted(streams, key=lambda s: int(s.rsplit("-", 1)[-1]) if s.rsplit("-", 1)[-1].isdigit()
                                 else 0):
                host = stream.split("/", 1)[1].rsplit("-", 1)[0]
                starts[host] = starts.get(host, 0) + 1
                restart = f", restart {starts[host] - 1}" if starts[host] > 1 else ""
                yield group, stream, f"{label}, {host}{restart}"

    def read_new(self) -> list[tuple[int, str, str]]:
        """(timestamp ms, marker, message) of the events not read yet, in time order."""
        events = []
        for group, stream, marker in list(self._streams()):
            token = self._tokens.get((group, stream))
            while True:
                kwargs: dict[str, Any] = {"logGroupName": group, "logStreamName": stream, "startFromHead": True}
                if token:
                    kwargs["nextToken"] = token
                page = self.logs.get_log_events(**kwargs)
                events += [(e["timestamp"], marker, e["message"]) for e in page.get("events", [])]
                new_token = page.get("nextForwardToken")
                if not page.get("events") or new_token == token:
                    token = new_token
                    break
                token = new_token
            self._tokens[(group, stream)] = token
        return sorted(events, key=lambda e: e[0])


def format_event(event: tuple[int, str, str]) -> str:
    moment = datetime.fromtimestamp(event[0] / 1000, UTC).strftime("%H:%M:%S.%f")[:-3]
    # progress bars redraw with carriage returns: show what a terminal would, one line per event
    parts = [p for p in event[2].rstrip("\n").replace("\r\n", "\n").replace("\n", " ").split("\r") if p.strip()]
    return printable(f"{moment} [{event[1]}] {parts[-1] if parts else ''}")


def follow_logs(clients: Clients, execution_arn: str, *, follow: bool, say: Callable[[str], None] = print,
                interval: float = 5.0, sleep: Callable[[float], None] = time.sleep) -> int:
    """Print the run's log lines; with follow, keep going until the execution ended. Returns lines printed."""
    status, jobs = run_jobs(clients, execution_arn)
    reader = LogReader(clients.logs, jobs)
    printed = 0
    while True:
        for event in reader.read_new():
            say(format_event(event))
            printed += 1
        if not follow or status != "RUNNING":
            break
        sleep(interval)
        status, jobs = run_jobs(clients, execution_arn)
        reader.jobs = jobs
    if not jobs:
        say(f"the run has no jobs yet (execution {status})")
    elif printed == 0:
        say(f"no log lines yet for {', '.join(name for _, name, _ in jobs)} (execution {status})")
    return printed
