"""`runctl list` (recent runs with state, duration, cost) and `runctl logs RUN [--follow]` (the CloudWatch logs
of every host of every job of a run, merged in time order, each line marked with its job, attempt and host), as
printed lines: the runs, jobs and log events are read by pipeline_runs/listing.py."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from hfsm_lambda.runs import verdict
from pipeline_runs.clients import Clients
from pipeline_runs.listing import LogReader, run_jobs
from runctl.core import printable


# ---- list --------------------------------------------------------------------------------------------
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
        # the verdict beside the state: a run whose model did not learn is not shown as SUCCEEDED
        judged = r.get("verdict")
        state = "COMPLETED" if r["status"] == "SUCCEEDED" and judged == verdict.NOT_LEARNED else r["status"]
        note = r["error"] or ("in progress" if r["status"] == "RUNNING" else
                              r.get("verdict_text") or verdict.SHORT.get(judged or "", ""))
        table.append((str(r["run_id"] or f"({r['execution']})"), state, started, duration, cost, note))
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    return ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() for row in table]


# ---- logs --------------------------------------------------------------------------------------------
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
