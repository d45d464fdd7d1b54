"""Session fixtures shared by the xdist workers of one `pytest -n N` run (`make test`)."""

from __future__ import annotations

import fcntl
import os
import shutil
from collections import Counter
from collections.abc import Callable
from pathlib import Path

import pytest


def shared_dir(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], object]) -> Path:
    """A directory built once per test session, however many xdist workers ask for it: the first builds it under a
    file lock in the session's temporary root (shared by the workers), the others wait and read it. Read-only to
    its users, as a session fixture's output always was."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base) / "shared"
    root.mkdir(parents=True, exist_ok=True)
    target = root / name
    with open(root / f"{name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not target.exists():
            partial = root / f"{name}.partial"
            shutil.rmtree(partial, ignore_errors=True)
            build(partial)
            partial.rename(target)
    return target


# hostile run specs: class name -> cases tried (tests/lambda/plan/test_lambda_hostile_runs.py, issue 24); each xdist worker
# sends its counts to the controller, which prints the sum (tests/conftest.py)
HOSTILE_CASES = pytest.StashKey[Counter]()
