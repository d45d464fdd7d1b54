"""What a local run's folder keeps once its command ends: what a user reads, not what the jobs worked with.

Kept: `report/` (report.md, run.json, the charts, runctl.json for `runctl list/status/logs --local`), every job's
host logs (`sagemaker/<job>/logs/`), each host's `/opt/ml/output/` (the success or failure file the job wrote), the
local model (`artifacts/model/`). Deleted: each job's `/opt/ml` work folders (the code bundle copied per host, the
channels' copies of the input data, checkpoints, the model before packing), the packed copies of the model
(`model.tar.gz`, the job's output archives: the same files as `artifacts/model/`), and the generated inputs the demo
uploaded (`inputs/`, written again by the next demo). `--keep-job-files` keeps everything, to look inside a job.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path

WORK_FOLDERS = ("code", "input/data", "checkpoints", "model", "processing")  # under each host's opt/ml/ (input/config stays)


def size(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            with contextlib.suppress(OSError):  # a file that vanished meanwhile
                total += os.lstat(os.path.join(root, name)).st_size
    return total


def _removable(work_dir: Path, inputs: bool) -> list[Path]:
    found: list[Path] = []
    for job in (work_dir / "sagemaker").glob("*"):
        for ml in job.glob("attempt-*/algo-*/opt/ml"):
            found += [ml / name for name in WORK_FOLDERS if (ml / name).exists()]
        found += [p for p in (job / "artifacts", job / "bin") if p.exists()]
    found += [p for p in (work_dir / "artifacts" / "model.tar.gz",) if p.exists()]
    if inputs and (work_dir / "inputs").is_dir():
        found.append(work_dir / "inputs")
    return found


def trim(work_dir: Path, *, inputs: bool = False) -> tuple[int, int]:
    """Deletes what a user does not need from a finished local run's folder (and from the runs of several specs in
    its sub-folders); `inputs`: the demo's generated inputs too. (bytes before, bytes after)."""
    before = size(work_dir)
    folders = [work_dir, *(p for p in work_dir.iterdir() if p.is_dir() and (p / "report").is_dir())] \
        if work_dir.is_dir() else []
    for folder in folders:
        for path in _removable(folder, inputs and folder == work_dir):
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path, ignore_errors=True)
            else:
                path.unlink(missing_ok=True)
    return before, size(work_dir)
