"""The record a local run keeps for `runctl list/status/logs --local`.

The emulator of a local run is gone when `local_mode` exits, so while its session is still up, `capture` asks the
emulated AWS exactly what `list`, `status` and `logs` ask a deployed environment (the same reading functions, against
the emulator's clients) and `write` keeps the answers as `<run folder>/report/runctl.json`; runctl/local_runs.py
prints them with runctl's own formatting.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pipeline_runs import listing
from pipeline_runs.clients import Clients
from pipeline_runs.status import status

RECORD = "runctl.json"


def capture(clients: Clients, state_machine_arn: str, execution_arn: str, report: Path) -> dict[str, Any]:
    """What list/status/logs would print for this run, asked of the (emulated) AWS it ran in."""
    info = status(clients, execution_arn)
    info["report"] = str(report)
    name = execution_arn.rsplit(":", 1)[-1]
    rows = [r for r in listing.list_runs(clients, state_machine_arn, limit=1000) if r["execution"] == name]
    _, jobs = listing.run_jobs(clients, execution_arn)
    events = listing.LogReader(clients.logs, jobs).read_new()
    return {"execution_arn": execution_arn, "status": info, "row": rows[0] if rows else None,
            "jobs": [list(job) for job in jobs], "log_events": [list(event) for event in events]}


def write(folder: Path, record: dict[str, Any]) -> Path:
    path = folder / RECORD
    path.write_text(json.dumps(record, indent=1, default=str))
    return path


# ---- a local session in progress -------------------------------------------------------------------------
# `python -m local_mode` keeps its process id in its run folder while it runs, so that `runctl prune --local` never
# deletes a run in progress (a folder whose marker names a live process).
IN_PROGRESS = ".in-progress"


@contextmanager
def in_progress(folder: Path) -> Iterator[None]:
    folder.mkdir(parents=True, exist_ok=True)
    marker = folder / IN_PROGRESS
    marker.write_text(f"{os.getpid()}\n")
    try:
        yield
    finally:
        marker.unlink(missing_ok=True)


def running(folder: Path) -> bool:
    """Whether the session that wrote `folder` is still running (its marker names a live process)."""
    try:
        pid = int((folder / IN_PROGRESS).read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # alive, another user's
    return True
