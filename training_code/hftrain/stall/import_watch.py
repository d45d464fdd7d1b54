"""The seconds before the stall watchdog starts: train.py's imports (torch, transformers, the training code) and
argument parsing, watched from train.py's first line.

The watchdog (watchdog.py) starts once the run object exists, after the heavy imports; a process that hangs in an
import (a stuck network file system, a lock held by a dead process) would otherwise go unnamed until the job's
MaxRuntime. A daemon thread started first thing waits `stall_startup_minutes` (read from the arguments the toolkit
passes; `auto`, the default: contract/startup_limit.py); unless the watchdog (or the recovery supervisor, once its imports are done) stops it first,
it writes the stall failure text naming this rank, its host and the phase, dumps its stacks and ends the process
with the watchdog's exit code. Standard library only: it runs before anything heavy is imported.
"""

from __future__ import annotations

import contextlib
import faulthandler
import json
import os
import sys
import threading
import time

from contract import stall_records, startup_limit
from hftrain import smenv

EXIT_CODE = 75  # the stall watchdog's (watchdog.py)
_STOP = threading.Event()
_STARTED: list[threading.Thread] = []


def _values(argv: list[str], names: tuple[str, ...]) -> dict[str, str]:
    values: dict[str, str] = {}
    for i, arg in enumerate(argv):
        for name in names:
            if arg == name and i + 1 < len(argv):
                values[name] = argv[i + 1]
            elif arg.startswith(name + "="):
                values[name] = arg.partition("=")[2]
    return values


def checkpoint_dir_from_argv(argv: list[str]) -> str:
    """`--checkpoint_dir`, else the training code's default (hftrain/smenv.py, standard library only)."""
    return _values(argv, ("--checkpoint_dir",)).get("--checkpoint_dir") or smenv.default_checkpoint_dir()


def limit_from_argv(argv: list[str]) -> tuple[float, str] | None:
    """(seconds, the limit's name) from `--stall_startup_minutes` as the toolkit passes it (`auto` when absent
    or unreadable: contract/startup_limit.py, measured from `--checkpoint_dir`'s progress file); None when
    `--stall_minutes off` turns stalls off."""
    values = _values(argv, ("--stall_startup_minutes", "--stall_minutes"))
    if values.get("--stall_minutes", "").strip().strip('"').lower() == "off":
        return None
    try:
        minutes = startup_limit.parse(values.get("--stall_startup_minutes"))
    except ValueError:
        minutes = None  # train.py's argument check names it; meanwhile the auto rule watches
    measured = None if minutes is not None else startup_limit.read_measured(checkpoint_dir_from_argv(argv))
    return startup_limit.seconds(minutes, measured), startup_limit.describe(minutes, measured)


def message(seconds: float, phase: str, limit: str, environ: dict[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    rank, local = env.get("RANK", "0"), env.get("LOCAL_RANK", "0")
    host = env.get("SM_CURRENT_HOST", "algo-1")
    return (f"{stall_records.MESSAGE_PREFIX}rank {rank} ({host}, local rank {local}) made no progress for "
            f"{seconds / 60:.1f} min in start-up phase {phase} (before step 1; train.py's {phase} before the watchdog "
            f"starts); limit {limit}")


def record(text: str, started: float, now: float, phase: str, limit: str,
           environ: dict[str, str] | None = None) -> dict:
    """The `_stalls.json` record of a hang before the watchdog (the fields the watchdog's records have; the last
    progress is train.py's first line)."""
    env = os.environ if environ is None else environ
    job = env.get("TRAINING_JOB_NAME")
    if not job:
        with contextlib.suppress(ValueError, TypeError, AttributeError):
            job = json.loads(env.get("SM_TRAINING_ENV") or "{}").get("job_name")
    rank = int(env.get("RANK", "0") or 0)
    return {"job": job or "local", "last_progress_at": round(started, 3), "detected_at": round(now, 3),
            "rank": rank, "host": env.get("SM_CURRENT_HOST", "algo-1"),
            "local_rank": int(env.get("LOCAL_RANK", "0") or 0), "step": None, "phase": phase, "where": "",
            "frozen": False, "ranks": [rank], "silent_seconds": round(now - started, 1), "limit": limit,
            "reason": text.splitlines()[0]}


def start(argv: list[str], *, phase: str = "imports", exit=os._exit) -> threading.Thread | None:  # noqa: A002
    limit = limit_from_argv(argv)
    if limit is None:
        return None
    seconds, limit_name = limit
    # imported now (standard library underneath), not in the thread: an import that hangs may hold what it needs
    from hftrain.run.failure import write_failure

    checkpoint_dir = checkpoint_dir_from_argv(argv)
    started = time.time()

    def watch() -> None:
        if _STOP.wait(seconds):
            return
        text = message(seconds, phase, limit_name)
        with contextlib.suppress(Exception):  # the ledger's `stalled` reads it (contract/stall_records.py)
            stall_records.append_record(checkpoint_dir, record(text, started, time.time(), phase, limit_name))
        sys.stderr.write(f"\n{text}\nstall watchdog: stacks of this process:\n")
        with contextlib.suppress(AttributeError, ValueError, OSError):
            faulthandler.dump_traceback(file=sys.stderr, all_threads=True)
        with contextlib.suppress(Exception):  # the failure file (first writer wins); the log has the text anyway
            write_failure(text, where=f"train.py on {os.environ.get('SM_CURRENT_HOST', 'algo-1')}, rank "
                                      f"{os.environ.get('RANK', '0')}")
        sys.stderr.flush()
        exit(EXIT_CODE)

    thread = threading.Thread(target=watch, name="import-watch", daemon=True)
    thread.start()
    _STARTED.append(thread)
    return thread


def stop() -> None:
    """The stall watchdog (or the supervisor, before it forks) takes over."""
    _STOP.set()
