"""A state machine's recent runs (with state, duration, cost and verdict), the jobs a run planned, and their
CloudWatch logs: every host of every job, merged in time order, each event marked with its job, attempt and host.

SageMaker writes one log stream per instance start: `<job name>/algo-<n>-<epoch seconds>` in
`/aws/sagemaker/TrainingJobs` (processing: `/aws/sagemaker/ProcessingJobs`); a spot restart starts new streams.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from contract import summary as run_summary
from hfsm_lambda.runs import verdict
from pipeline_runs.clients import Clients
from pipeline_runs.status import RunNotFound, latest_state

# GetLogEvents pages (each at most 1 MB or 10,000 events) read per stream per read_new: a job that prints a
# million lines costs one call of `runctl logs` at most this many pages a stream; `--follow` goes on from there.
MAX_PAGES_PER_READ = 5
MAX_STREAMS_PER_JOB = 200  # one per host and restart; the shared role could create more under a job's name
GROUPS = {"training": "/aws/sagemaker/TrainingJobs", "processing": "/aws/sagemaker/ProcessingJobs"}


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
            run = latest_state(clients, execution["executionArn"]).get("run") or {}
            run_id = run.get("run_id")
        cost = (result or {}).get("cost") or {}
        rows.append({
            "run_id": run_id, "execution": execution["name"], "status": desc["status"],
            "started": desc.get("startDate"), "seconds": _duration(desc.get("startDate"), desc.get("stopDate")),
            "cost_usd": cost.get("cost_usd"), "billable_instance_seconds": cost.get("billable_instance_seconds"),
            "error": desc.get("error"), "verdict": ((result or {}).get("verdict") or {}).get("verdict"),
            "verdict_text": verdict.short((result or {}).get("verdict")),
        })
    return rows


def run_jobs(clients: Clients, execution_arn: str) -> tuple[str, list[tuple[str, str, str]]]:
    """(execution status, [(job type, job name, label)]) for the jobs the run planned."""
    try:
        status = clients.sfn.describe_execution(executionArn=execution_arn)["status"]
    except ClientError as err:
        raise RunNotFound(f"no execution {execution_arn}: {err.response['Error'].get('Message', err)}") from err
    run = latest_state(clients, execution_arn).get("run") or {}
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
                    logGroupName=group, logStreamNamePrefix=f"{name}/",
                    PaginationConfig={"MaxItems": MAX_STREAMS_PER_JOB})
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
        """(timestamp ms, marker, message) of the events not read yet, in time order: at most MAX_PAGES_PER_READ
        pages a stream (a stream with more says so in a last line; the next call goes on from there)."""
        events = []
        for group, stream, marker in list(self._streams()):
            token = self._tokens.get((group, stream))
            for _ in range(MAX_PAGES_PER_READ):
                kwargs: dict[str, Any] = {"logGroupName": group, "logStreamName": stream, "startFromHead": True}
                if token:
                    kwargs["nextToken"] = token
                page = self.logs.get_log_events(**kwargs)
                events += [(e["timestamp"], marker, e["message"]) for e in page.get("events", [])]
                new_token = page.get("nextForwardToken")
                done = not page.get("events") or new_token == token
                token = new_token
                if done:
                    break
            else:
                last = events[-1][0] if events else 0
                events.append((last, marker, f"(more lines in {stream}: this read stops at {MAX_PAGES_PER_READ} "
                                             "pages a stream; runctl logs --follow reads on)"))
            self._tokens[(group, stream)] = token
        return sorted(events, key=lambda e: e[0])
