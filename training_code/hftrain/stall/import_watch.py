"""The seconds before the stall watchdog starts: train.py's imports (torch, transformers, the training code) and
argument parsing, watched from train.py's first line.

The watchdog (watchdog.py) starts once the run object exists, after the heavy imports; a process that hangs in an
import (a stuck network file system, a lock held by a dead process) would otherwise go unnamed until the job's
MaxRuntime. A daemon thread started first thing waits `stall_startup_minutes` (read from the arguments the toolkit
passes, default 60); unless the watchdog (or the recovery supervisor, once its imports are done) stops it first,
it writes the stall failure text naming this rank, its host and the phase, dumps its stacks and ends the process
with the watchdog's exit code. Standard library only: it runs before anything heavy is imported.
"""

from __future__ import annotations

import contextlib
import faulthandler
import os
import sys
import threading

from contract import stall_records

EXIT_CODE = 75  # the stall watchdog's (watchdog.py)
DEFAULT_MINUTES = 60.0
_STOP = threading.Event()
_STARTED: list[threading.Thread] = []


def minutes_from_argv(argv: list[str]) -> float | None:
    """`--stall_startup_minutes N` as the toolkit passes it; None when `--stall_minutes off` turns stalls off."""
    values: dict[str, str] = {}
    for i, arg in enumerate(argv):
        for name in ("--stall_startup_minutes", "--stall_minutes"):
            if arg == name and i + 1 < len(argv):
                values[name] = argv[i + 1]
            elif arg.startswith(name + "="):
                values[name] = arg.partition("=")[2]
    if values.get("--stall_minutes", "").strip().strip('"').lower() == "off":
        return None
    try:
        minutes = float(values.get("--stall_startup_minutes", DEFAULT_MINUTES))
    except ValueError:
        return DEFAULT_MINUTES
    return minutes if minutes > 0 else DEFAULT_MINUTES


def message(minutes: float, phase: str, environ: dict[str, str] | None = None) -> str:
    env = os.environ if environ is None else environ
    rank, local = env.get("RANK", "0"), env.get("LOCAL_RANK", "0")
    host = env.get("SM_CURRENT_HOST", "algo-1")
    return (f"{stall_records.MESSAGE_PREFIX}rank {rank} ({host}, local rank {local}) made no progress for "
            f"{minutes:.1f} min in start-up phase {phase} (before step 1; train.py's {phase} before the watchdog "
            f"starts); limit stall.startup_minutes={minutes:g}")


def start(argv: list[str], *, phase: str = "imports", exit=os._exit) -> threading.Thread | None:  # noqa: A002
    minutes = minutes_from_argv(argv)
    if minutes is None:
        return None
    # imported now (standard library underneath), not in the thread: an import that hangs may hold what it needs
    from hftrain.run.failure import write_failure

    def watch() -> None:
        if _STOP.wait(minutes * 60):
            return
        text = message(minutes, phase)
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
