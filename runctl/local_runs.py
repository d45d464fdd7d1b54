"""`runctl list/status/logs --local`: local runs (`python -m local_mode ...`, under .local-runs/) read as runs in
AWS are, with the same output.

Each local run keeps what these commands need (pipeline_runs/record.py: asked of its emulator, with the functions
that read a deployed environment, before `local_mode` exits) in `<run folder>/report/runctl.json`. The commands here
print them with the same formatting functions.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Any

from pipeline_runs.record import RECORD
from runctl import core, observe

DEFAULT_ROOT = Path(".local-runs")


def _runs(root: Path) -> list[tuple[Path, dict[str, Any]]]:
    if not root.is_dir():
        raise core.RunctlError(f"no local runs under {root}: local runs are written there by `python -m local_mode "
                               "...` (run it from the same folder), or pass --local-runs DIR")
    found = []
    for path in root.glob(f"**/report/{RECORD}"):
        try:
            record = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue  # a run still being written, or not a local run's record
        row = record.get("row") or {}
        if row.get("started"):
            row["started"] = datetime.fromisoformat(str(row["started"]))
        found.append((path.parent.parent, record))
    return sorted(found, key=lambda item: str((item[1].get("row") or {}).get("started") or ""), reverse=True)


def _find(root: Path, run: str) -> tuple[Path, dict[str, Any]]:
    runs = _runs(root)
    for folder, record in runs:
        names = {record.get("execution_arn"), str(record.get("execution_arn", "")).rsplit(":", 1)[-1],
                 (record.get("status") or {}).get("run_id"), folder.name, str(folder)}
        if run in names:
            return folder, record
    known = ", ".join(str((r.get("status") or {}).get("run_id") or f.name) for f, r in runs[:5]) or "none"
    raise core.RunctlError(f"no local run {run!r} under {root} (recent: {known}); `runctl list --local` lists them")


def list_lines(root: Path, limit: int) -> tuple[list[dict[str, Any]], list[str]]:
    rows = []
    for _, record in _runs(root):
        if record.get("row"):
            verdict = (((record.get("status") or {}).get("result") or {}).get("verdict") or {}).get("verdict")
            rows.append({"verdict": verdict, **record["row"]})  # a record kept before rows had the verdict
    rows = rows[:limit]
    return rows, observe.list_lines(rows)


def status(root: Path, run: str) -> dict[str, Any]:
    return _find(root, run)[1]["status"]


def log_lines(root: Path, run: str) -> list[str]:
    _, record = _find(root, run)
    events = [tuple(event) for event in record.get("log_events") or []]
    lines = [observe.format_event(event) for event in events]  # type: ignore[arg-type]
    if not lines:
        jobs = record.get("jobs") or []
        status = (record.get("status") or {}).get("status")
        lines = [f"the run has no jobs (execution {status})" if not jobs else
                 f"no log lines for {', '.join(job[1] for job in jobs)} (execution {status})"]
    return lines
