"""`runctl prune --local --older-than 7d [--keep N] [--dry-run]`: delete old local runs.

A local run is a folder directly under `.local-runs/` (one `python -m local_mode` command: `report/`, the jobs' logs
under `sagemaker/`, the model under `artifacts/`). Only folders laid out like that are candidates: anything else
under the root is left alone and named, so a mistaken `--local-runs` cannot delete a user's own folders. A run in
progress is never deleted: its folder holds the process id of its `local_mode` command (pipeline_runs/record.py), and
a folder without a report whose files changed in the last RECENT_SECONDS is treated as in progress too (a crash
leaves no report; a run from an older local mode has no marker).
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipeline_runs.record import IN_PROGRESS, running
from runctl.core import RunctlError

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
RECENT_SECONDS = 600
LAYOUT = ("report", "sagemaker", IN_PROGRESS)  # what makes a folder a local run's


def parse_age(text: str) -> float:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*", text or "")
    if not match:
        raise RunctlError(f"--older-than {text!r}: a number and a unit, s m h d or w (e.g. 7d, 12h, 30m)")
    return float(match[1]) * UNITS[match[2]]


@dataclass
class LocalRun:
    folder: Path
    written: float  # when the run last wrote its report (else the folder itself): its end
    in_progress: bool
    bytes: int = 0


def _stats(folder: Path) -> list[os.stat_result]:
    """lstat of every file under folder (one that vanished meanwhile is left out)."""
    found = []
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):
                found.append(os.lstat(os.path.join(root, name)))
    return found


def _size(folder: Path) -> int:
    return sum(st.st_size for st in _stats(folder))


def _newest(folder: Path) -> float:
    return max([folder.stat().st_mtime, *(st.st_mtime for st in _stats(folder))])


def local_runs(root: Path, now: float) -> tuple[list[LocalRun], list[Path]]:
    """(the local runs under root, newest first; the other entries, left alone)."""
    found, others = [], []
    for folder in sorted(root.iterdir()) if root.is_dir() else []:
        if not folder.is_dir() or folder.is_symlink() or not any((folder / n).exists() for n in LAYOUT):
            others.append(folder)
            continue
        reports = [*folder.glob("report/*"), *folder.glob("*/report/*")]
        written = max([folder.stat().st_mtime, *(p.stat().st_mtime for p in reports)])
        busy = running(folder)
        if not busy and not (folder / "report" / "run.json").exists() and not list(folder.glob("*/report/run.json")):
            newest = _newest(folder)
            busy = now - newest < RECENT_SECONDS
            written = max(written, newest)
        found.append(LocalRun(folder, written, busy))
    return sorted(found, key=lambda r: r.written, reverse=True), others


def prune(root: Path, *, older_than: str | None, keep: int | None, dry_run: bool = False,
          now: float | None = None) -> dict[str, Any]:
    if older_than is None and keep is None:
        raise RunctlError("say which runs to delete: --older-than AGE (e.g. 7d) and/or --keep N (the N newest stay)")
    if keep is not None and keep < 0:
        raise RunctlError(f"--keep {keep}: a number of runs, 0 or more")
    limit = None if older_than is None else parse_age(older_than)
    now = time.time() if now is None else now
    runs, others = local_runs(root, now)
    deleted, kept = [], []
    for index, run in enumerate(runs):
        age = now - run.written
        reason = ("in progress" if run.in_progress else
                  f"one of the {keep} newest" if keep is not None and index < keep else
                  f"{_age(age)} old, not older than {older_than}" if limit is not None and age <= limit else None)
        run.bytes = _size(run.folder)
        row = {"folder": str(run.folder), "age_seconds": round(age), "bytes": run.bytes}
        if reason:
            kept.append({**row, "kept_because": reason})
            continue
        if not dry_run:
            shutil.rmtree(run.folder)
        deleted.append(row)
    return {"root": str(root), "dry_run": dry_run, "deleted": deleted, "kept": kept,
            "deleted_bytes": sum(r["bytes"] for r in deleted), "not_local_runs": [str(p) for p in others]}


def _age(seconds: float) -> str:
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def lines(result: dict[str, Any]) -> list[str]:
    verb = "would delete" if result["dry_run"] else "deleted"
    out = [f"{verb} {len(result['deleted'])} local run(s) under {result['root']}, "
           f"{result['deleted_bytes'] / 1e6:.1f} MB; kept {len(result['kept'])}"]
    out += [f"  {verb} {r['folder']} ({_age(r['age_seconds'])} old, {r['bytes'] / 1e6:.1f} MB)" for r in result["deleted"]]
    out += [f"  kept     {r['folder']} ({r['kept_because']})" for r in result["kept"]]
    if result["not_local_runs"]:
        out.append(f"  left alone (not a local run's folder): {', '.join(result['not_local_runs'])}")
    return out
