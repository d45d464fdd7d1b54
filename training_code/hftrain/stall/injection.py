"""Faults the local mode injects to show the stall watchdog at work (`python -m local_mode run --inject-stall`).

`HFTRAIN_INJECT_STALL` (set by the local SageMaker for one job's first attempt only; never by the pipeline):
- `R@N`: global rank R stops making progress after its optimizer step N (sleeps forever in the loop);
- `R@N:sigstop`: after step N, rank R's process is stopped with SIGSTOP (sent by a child process: the whole
  process freezes, its watchdog thread too, as on a frozen host);
- `R@startup` or `R@startup:PHASE`: rank R never reaches its first step: it sleeps forever when its start-up
  phase PHASE begins (STARTUP_PHASES; default `layout`; the other ranks wait for it in a collective);
- `R@N:save`: rank R hangs inside the checkpoint save of step N (the save's limit applies);
- `R@N:upload`: rank R's background write of checkpoint N (the files behind the loop, which SageMaker's checkpoint
  sync uploads: hftrain/checkpoint/background.py) hangs; the loop goes on until the next save waits for it;
- `R@N:loader`: the data loader of rank R blocks on the batch of step N + 1 (in its worker process when
  `dataloader_num_workers` > 0);
- `R@N:sigkill`: after step N, rank R's process is killed with SIGKILL (a crash without a word: the OOM killer,
  an operator);
- `R@N:raise`: after step N, rank R raises an exception (a bug in the script: it fails the same way after every
  restart; the other faults happen once per job);
- `R@N:slow` or `R@N:slow=S`: after step N, rank R is slow but alive: a child process stops it (SIGSTOP) for S
  seconds (default 40), lets it run 3 s (SIGCONT), again and again until it ends. Not a stall: the run must go on.
- `R@N:straggle` or `R@N:straggle=F`: from step N on, rank R's own compute is F times as slow (default 2): each
  forward pass sleeps (F - 1) x its own duration, inside the pass (a slower GPU, a throttled host). A straggler:
  it must be named (stall/stragglers.py), never ended as stalled.
"""

from __future__ import annotations

import logging
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass

logger = logging.getLogger("hftrain")
ENV = "HFTRAIN_INJECT_STALL"
# `imports`: train.py's own imports, before the stall watchdog exists (import_watch.py watches them)
STARTUP_PHASES = ("imports", "setup", "data_load", "model_load", "tokenize", "layout", "resume_verify", "restore")
_SPEC = re.compile(r"(?P<rank>\d+)@(?:(?P<startup>startup)(?::(?P<phase>[a-z_]+))?|(?P<step>\d+)"
                   r"(?::(?P<how>sleep|sigstop|loader|sigkill|slow|straggle|save|upload|raise)(?:=(?P<seconds>\d+(?:\.\d+)?))?)?)")
SLOW_STOP_SECONDS, SLOW_RUN_SECONDS = 40.0, 3.0
STRAGGLE_FACTOR = 2.0
_announced: set = set()  # the straggle injection announced in this process


@dataclass(frozen=True)
class Injection:
    rank: int
    step: int | None  # None: at start-up
    how: str  # sleep | sigstop | loader | sigkill | slow | straggle | save | upload | raise | startup
    seconds: float = SLOW_STOP_SECONDS  # slow: how long each stop lasts; straggle: the factor
    phase: str = "layout"  # startup: the start-up phase it hangs in

    def describe(self) -> str:
        if self.how == "startup":
            return f"rank {self.rank} never reaches its first step (hangs in start-up phase {self.phase})"
        if self.how == "save":
            return f"rank {self.rank} hangs inside the checkpoint save of step {self.step}"
        if self.how == "upload":
            return f"rank {self.rank}'s background write of checkpoint {self.step} hangs (behind the training loop)"
        if self.how == "loader":
            return f"the data loader of rank {self.rank} blocks after step {self.step}"
        if self.how == "sigstop":
            return f"rank {self.rank}'s process is SIGSTOPped after step {self.step}"
        if self.how == "sigkill":
            return f"rank {self.rank}'s process is killed with SIGKILL after step {self.step}"
        if self.how == "raise":
            return f"rank {self.rank} raises an exception after step {self.step} (every time it gets there)"
        if self.how == "straggle":
            return f"rank {self.rank}'s own compute is {self.seconds:g}x as slow from step {self.step} on"
        if self.how == "slow":
            return (f"rank {self.rank} is slow but alive after step {self.step}: stopped {self.seconds:g} s, running "
                    f"{SLOW_RUN_SECONDS:g} s, again and again")
        return f"rank {self.rank} stops making progress after step {self.step}"


def parse(text: str) -> Injection:
    match = _SPEC.fullmatch(text.strip())
    if match is None or (match["seconds"] and match["how"] not in ("slow", "straggle")) or \
            (match["phase"] and match["phase"] not in STARTUP_PHASES) or \
            (match["how"] == "straggle" and match["seconds"] and float(match["seconds"]) <= 1):
        raise ValueError(f"{text!r}: expected RANK@STEP, RANK@STEP:sigstop, RANK@STEP:loader, RANK@STEP:sigkill, "
                         f"RANK@STEP:slow[=SECONDS], RANK@STEP:straggle[=FACTOR > 1], "
                         f"RANK@STEP:save, RANK@STEP:upload, RANK@STEP:raise or RANK@startup[:PHASE] (PHASE: "
                         f"{', '.join(STARTUP_PHASES)}; e.g. 3@20)")
    if match["startup"]:
        return Injection(int(match["rank"]), None, "startup", phase=match["phase"] or "layout")
    default = STRAGGLE_FACTOR if match["how"] == "straggle" else SLOW_STOP_SECONDS
    seconds = float(match["seconds"]) if match["seconds"] else default
    return Injection(int(match["rank"]), int(match["step"]), match["how"] or "sleep", seconds)


def mine() -> Injection | None:
    """This rank's injection, if the environment asks for one."""
    text = os.environ.get(ENV)
    if not text:
        return None
    injection = parse(text)
    return injection if injection.rank == int(os.environ.get("RANK", "0") or 0) else None


def announce(what: str) -> None:
    """The injected fault's line in the log, with its time (benchmarks/bench_faults.py measures from it)."""
    sys.stderr.write(f"INJECTED FAULT at {time.time():.3f}: {what}\n")
    sys.stderr.flush()


def hang(what: str) -> None:
    announce(what)
    while True:
        time.sleep(3600)


def at_phase(injection: Injection | None, phase: str) -> None:
    if injection is not None and injection.how == "startup" and phase == injection.phase:
        hang(injection.describe())


def in_save(injection: Injection | None, step: int) -> None:
    if injection is not None and injection.how == "save" and injection.step == step:
        hang(injection.describe())


def in_upload(injection: Injection | None, step: int) -> None:
    """In the background writer's thread: hangs it (the training loop goes on until it waits for this save)."""
    if injection is not None and injection.how == "upload" and injection.step == step:
        hang(injection.describe())


_SLOW_LOOP = """
import os, signal, sys, time
pid, stop, run = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
while True:
    try:
        os.kill(pid, signal.SIGSTOP)
        time.sleep(stop)
        os.kill(pid, signal.SIGCONT)
        time.sleep(run)
    except ProcessLookupError:
        break
"""


def straggle(injection: Injection | None, step: int, seconds: float) -> None:
    """Inside a forward pass that took `seconds`: makes it the injection's factor as long, from its step on."""
    if injection is None or injection.how != "straggle" or step < (injection.step or 0):
        return
    if not _announced:  # once (a step with gradient accumulation runs several passes)
        _announced.add(injection)
        announce(injection.describe())
    time.sleep((injection.seconds - 1) * seconds)


def after_step(injection: Injection | None, step: int) -> None:
    if injection is None or injection.step != step or injection.how not in ("sleep", "sigstop", "sigkill", "slow",
                                                                             "raise"):
        return
    if injection.how == "raise":
        announce(injection.describe())
        raise InjectedError(f"injected error after step {step} on rank {injection.rank}")
    if injection.how in ("sigkill", "slow"):
        announce(injection.describe())
        if injection.how == "sigkill":
            os.kill(os.getpid(), signal.SIGKILL)
        # from another process (a stopped process cannot continue itself); it ends with this one
        subprocess.Popen([sys.executable, "-c", _SLOW_LOOP, str(os.getpid()), str(injection.seconds),  # noqa: S603
                          str(SLOW_RUN_SECONDS)], start_new_session=True)
        return
    if injection.how == "sigstop":
        announce(injection.describe())
        subprocess.Popen(["kill", "-STOP", str(os.getpid())])  # noqa: S603, S607 - from another process
        time.sleep(5)
        os.kill(os.getpid(), signal.SIGSTOP)  # in case kill(1) is missing
        return
    hang(injection.describe())


class InjectedError(RuntimeError):
    """The script's own exception, injected (`R@N:raise`)."""


class HangingCollator:
    """Wraps the training collator: blocks on the batch of step `step` + 1 (one batch per step, counted from the
    step training resumed at, across the loader's worker processes and epochs: a counter in shared memory that
    the forked workers inherit)."""

    def __init__(self, collate, injection: Injection, start_step: int = 0) -> None:
        import multiprocessing

        self.collate, self.injection = collate, injection
        self.batches = multiprocessing.Value("i", start_step)

    def __call__(self, rows):
        with self.batches.get_lock():
            self.batches.value += 1
            count = self.batches.value
        if count > (self.injection.step or 0):
            hang(self.injection.describe() + f" (in pid {os.getpid()})")
        return self.collate(rows)
