"""A folder built once and shared by parallel builders (test workers, a benchmark beside `make synth`).

Each builder builds in a private temp folder beside the target and renames it into place; the first complete rename
wins and the others use its folder. A file `marker` that the build writes last proves a folder complete, so nobody
sees a half-built one and nothing is removed under another builder.
"""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path


def build_once(folder: Path, marker: str, build: Callable[[Path], None]) -> Path:
    """`folder`, built by `build(tmp)` unless `folder/marker` exists already."""
    if (folder / marker).exists():
        return folder
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{folder.name}.", suffix=".tmp", dir=folder.parent))
    try:
        build(tmp)
        if folder.exists() and not (folder / marker).exists():
            shutil.rmtree(folder, ignore_errors=True)  # an interrupted build's leftovers
        try:
            tmp.rename(folder)
        except OSError:
            if not (folder / marker).exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder
