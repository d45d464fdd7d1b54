"""`runctl prune --local`: old local runs go, a run in progress and anything that is not a local run's folder stay."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pipeline_runs.record import IN_PROGRESS, in_progress, running
from runctl import prune
from runctl.core import RunctlError

DAY = 86400
NOW = 1_800_000_000.0


def local_run(root: Path, name: str, days_ago: float, *, report: bool = True, now: float = NOW) -> Path:
    folder = root / name
    (folder / "sagemaker" / "job" / "logs").mkdir(parents=True)
    (folder / "sagemaker" / "job" / "logs" / "algo-1.log").write_text("x" * 1000)
    if report:
        (folder / "report").mkdir()
        (folder / "report" / "run.json").write_text("{}")
    when = now - days_ago * DAY
    for path in [*folder.rglob("*"), folder]:
        os.utime(path, (when, when))
    return folder


@pytest.fixture
def root(tmp_path: Path) -> Path:
    runs = tmp_path / ".local-runs"
    for name, days in (("old", 10), ("older", 30), ("week", 6), ("new", 0.1)):
        local_run(runs, name, days)
    (runs / "notes").mkdir()  # not a local run: never touched
    (runs / "notes" / "mine.txt").write_text("keep me")
    (runs / "stray.txt").write_text("keep me too")
    return runs


def names(rows: list[dict]) -> list[str]:
    return sorted(Path(r["folder"]).name for r in rows)


def test_older_than_deletes_only_old_local_runs(root: Path) -> None:
    dry = prune.prune(root, older_than="7d", keep=None, dry_run=True, now=NOW)
    assert names(dry["deleted"]) == ["old", "older"] and (root / "old").exists()  # a dry run deletes nothing
    done = prune.prune(root, older_than="7d", keep=None, now=NOW)
    assert names(done["deleted"]) == ["old", "older"] and done["deleted_bytes"] == 2 * 1002
    assert sorted(p.name for p in root.iterdir()) == ["new", "notes", "stray.txt", "week"]
    assert (root / "notes" / "mine.txt").read_text() == "keep me"
    assert names(done["kept"]) == ["new", "week"]


def test_keep_n_keeps_the_newest_whatever_their_age(root: Path) -> None:
    done = prune.prune(root, older_than=None, keep=1, now=NOW)
    assert names(done["deleted"]) == ["old", "older", "week"] and names(done["kept"]) == ["new"]
    assert (root / "notes").exists()


def test_keep_and_older_than_together(root: Path) -> None:
    done = prune.prune(root, older_than="1d", keep=3, now=NOW)
    assert names(done["deleted"]) == ["older"]


def test_a_run_in_progress_is_never_deleted(root: Path) -> None:
    real = time.time()
    busy = local_run(root, "busy", 20, report=False, now=real)
    (busy / IN_PROGRESS).write_text(f"{os.getpid()}\n")  # this process is alive
    crashed = local_run(root, "crashed", 20, report=False, now=real)
    (crashed / IN_PROGRESS).write_text("999999999\n")  # no such process: the session is gone
    long_ago = time.time() - 20 * DAY
    for path in (crashed, crashed / IN_PROGRESS):
        os.utime(path, (long_ago, long_ago))
    fresh = local_run(root, "no-marker-recent", 0, report=False, now=real)  # an older local mode's run, still writing
    os.utime(fresh / "sagemaker" / "job" / "logs" / "algo-1.log", (time.time(), time.time()))
    done = prune.prune(root, older_than="1s", keep=None)
    assert "busy" in names(done["kept"]) and "no-marker-recent" in names(done["kept"])
    assert "crashed" in names(done["deleted"]) and busy.exists() and not crashed.exists()
    kept = {Path(r["folder"]).name: r["kept_because"] for r in done["kept"]}
    assert kept["busy"] == "in progress"


def test_the_marker_lives_while_the_session_runs(tmp_path: Path) -> None:
    with in_progress(tmp_path / "run"):
        assert running(tmp_path / "run")
    assert not running(tmp_path / "run") and not (tmp_path / "run" / IN_PROGRESS).exists()


@pytest.mark.parametrize("age, seconds", [("7d", 7 * DAY), ("12h", 43200), ("30m", 1800), ("90s", 90), ("2w", 14 * DAY)])
def test_ages(age: str, seconds: float) -> None:
    assert prune.parse_age(age) == seconds


def test_bad_ages_and_nothing_asked() -> None:
    for bad in ("7", "d", "7 days", "-1d", ""):
        with pytest.raises(RunctlError, match="a number and a unit"):
            prune.parse_age(bad)
    with pytest.raises(RunctlError, match="--older-than AGE"):
        prune.prune(Path("."), older_than=None, keep=None)


def test_through_the_command_line(root: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "runctl", "prune", "--local", "--local-runs", str(root),
                           "--older-than", "7d"], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    # the fixture's runs are dated 2027: relative to now none is 7 days old
    assert done.stdout.startswith(f"deleted 0 local run(s) under {root}") and "left alone" in done.stdout
    dry = subprocess.run([sys.executable, "-m", "runctl", "--local", "--local-runs", str(root), "prune", "--keep", "0",
                          "--dry-run"], capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0 and "would delete 4 local run(s)" in dry.stdout, dry.stdout + dry.stderr
    assert len(list(root.iterdir())) == 6
