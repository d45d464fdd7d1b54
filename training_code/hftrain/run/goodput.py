"""Where this training process spends its time, reported for the pipeline's goodput ledger (lambda/goodput/ledger.py).

Global rank 0 prints one GOODPUT line (its format: contract/goodput_line.py) at each event below; every line carries the
running totals, so the last line of a log stream says everything up to it, and the `save` lines say how much
step time lay before each checkpoint (what an interrupted attempt keeps when the next one resumes from it):

- `startup` (at the start of the first optimizer step): when the process started (`script_started_at`) and the
  seconds of each start-up phase: `imports` (process start to the run object: Python, torch, transformers,
  argument parsing), `setup` (process group, seed), `data_load`, `model_load`, `tokenize` (or loading the
  tokenized data set kept with the run: `tokenize_cache` says hit, miss, rebuilt or off), `layout`,
  `resume_verify` (checkpoint verification), `restore` (the Trainer's set-up and checkpoint load up to the
  first step);
- `save_begin` / `save` (before and after the part of a checkpoint save that blocks the loop: all of it, or with
  `background` true only the snapshot and the small files; `saved_step`, `save_seconds_last`);
- `write_begin` (right after a background save's `save`: its files are being written, `writing_step`) and `checkpoint` (every node marked
  it: it counts from now on; `complete_step`, `complete_seconds_last` from its snapshot) (checkpoint/background.py);
- `eval_begin` / `eval` (before and after an evaluation during training);
- `beat` (every `beat_seconds` of training, with the step reached);
- `end` (the last thing the process does, after the final evaluation and model write, or after a SIGTERM save).

Totals: `step_seconds` (optimizer steps: forward, backward, update, the data loading between them and the
per-step callbacks), `eval_seconds`, `save_seconds` (the Trainer's save plus the completion marker and rotation:
the time the loop blocked; a background save's writing and hashing are not in it), `final_seconds` (final evaluation and model write, also in eval_ and save_seconds),
`steps` (optimizer steps run by this process). Times are Unix seconds from this host's clock.

The same numbers go to SageMaker's metric charts as METRIC lines (contract/progress_lines.py) `startup_seconds`,
`startup_<phase>_seconds` and `step_seconds` (the mean step time since the previous beat).
"""

from __future__ import annotations

import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from transformers import TrainerCallback

from contract import goodput_line, progress_lines
from hftrain.recovery import generation

logger = logging.getLogger(__name__)

STARTUP_PHASES = ("imports", "setup", "data_load", "model_load", "tokenize", "layout", "resume_verify", "restore")
BEAT_SECONDS = 60.0


def process_started_at() -> float:
    """When this process started (Unix seconds): its creation time, else now. A worker forked by the recovery
    supervisor (hftrain/recovery/supervisor.py) counts from the supervisor's start (its imports are the run's)."""
    inherited = generation.script_started_at()
    if inherited is not None:
        return inherited
    try:
        import psutil  # a dependency of accelerate: present wherever the training code runs

        return float(psutil.Process().create_time())
    except Exception:  # noqa: BLE001 - no psutil or no /proc: the start of the measurement is then later
        return time.time()


class GoodputClock:
    """Accumulates this process's time by category; writes GOODPUT lines when `enabled` (global rank 0)."""

    def __init__(self, *, job: str = "local", host: str = "algo-1", enabled: bool = True,
                 clock: Callable[[], float] = time.time, stream=None, started_at: float | None = None,
                 beat_seconds: float = BEAT_SECONDS) -> None:
        self.job, self.host, self.enabled = job, host, enabled
        self.clock = clock
        self.stream = stream
        self.beat_seconds = beat_seconds
        self.script_started_at = process_started_at() if started_at is None else started_at
        self.startup: dict[str, float] = {}
        self.tokenize_cache = "off"
        self.start_step: int | None = None
        self.step = 0
        self.steps = 0
        self.first_step_at: float | None = None
        self.last_step_at: float | None = None
        self.step_seconds = self.eval_seconds = self.save_seconds = self.final_seconds = 0.0
        self.saves = 0
        self.complete_saves = 0
        self.evals = 0
        self._cursor: float | None = None  # the end of the last accounted interval once training runs
        self._restore_started: float | None = None
        self._save_started: float | None = None
        self._eval_started: float | None = None
        self._last_beat: float | None = None
        self._beat_window: tuple[int, float] | None = None  # (steps, step_seconds) at the last beat
        self.on_save: list[Callable[[float], None]] = []  # called with each save's blocking seconds
        self.on_startup: list[Callable[[float], None]] = []  # called once with the start-up's seconds

    # --- start-up ----------------------------------------------------------------------------------------
    def mark_imports_done(self) -> None:
        self.startup["imports"] = max(0.0, self.clock() - self.script_started_at)

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = self.clock()
        try:
            yield
        finally:
            self.startup[name] = self.startup.get(name, 0.0) + max(0.0, self.clock() - started)

    def restore_started(self) -> None:
        """The Trainer's set-up begins (train() called): `restore` runs to the first step."""
        self._restore_started = self.clock()

    def first_step_begins(self) -> None:
        if self.first_step_at is not None:
            return
        now = self.clock()
        if self._restore_started is not None:
            self.startup["restore"] = self.startup.get("restore", 0.0) + max(0.0, now - self._restore_started)
        self.first_step_at = self._cursor = now
        self._last_beat = now
        self._beat_window = (0, 0.0)
        self.emit(goodput_line.STARTUP)
        metrics = {"startup_seconds": now - self.script_started_at,
                   **{f"startup_{name}_seconds": seconds for name, seconds in self.startup.items()}}
        self._metric_lines(metrics)
        for call in self.on_startup:
            call(now - self.script_started_at)

    # --- training ----------------------------------------------------------------------------------------
    def step_ends(self, step: int) -> None:
        now = self.clock()
        self.step = step
        if self._cursor is None:  # a step without a start mark (should not happen): count from now on
            self._cursor = self.first_step_at = now
        self.step_seconds += max(0.0, now - self._cursor)
        self._cursor = self.last_step_at = now
        self.steps += 1
        if self._last_beat is not None and now - self._last_beat >= self.beat_seconds:
            self.beat()

    def beat(self) -> None:
        now = self.clock()
        self._last_beat = now
        steps0, seconds0 = self._beat_window or (0, 0.0)
        if self.steps > steps0:
            self._metric_lines({"step_seconds": (self.step_seconds - seconds0) / (self.steps - steps0)})
        self._beat_window = (self.steps, self.step_seconds)
        self.emit(goodput_line.BEAT)

    def _close_interval(self) -> float:
        """Time since the last accounted moment (logging between a step end and a save) is step time."""
        now = self.clock()
        if self._cursor is not None:
            self.step_seconds += max(0.0, now - self._cursor)
            self._cursor = now
        return now

    def save_begins(self, step: int, *, background: bool = False) -> None:
        self._save_started = self._close_interval()
        self.emit(goodput_line.SAVE_BEGIN, saving_step=step, background=background)

    def write_begins(self, step: int) -> None:
        """A background save's files begin to be written (checkpoint/background.py; off the loop's clock)."""
        self.emit(goodput_line.WRITE_BEGIN, writing_step=step)

    def checkpoint_complete(self, step: int, seconds: float) -> None:
        """Every node marked checkpoint `step`: from now on it counts (seconds: from its snapshot)."""
        self.complete_saves += 1
        self.emit(goodput_line.COMPLETE, complete_step=step, complete_seconds_last=round(seconds, 4))

    @contextmanager
    def save_wait(self) -> Iterator[None]:
        """The loop waits for a background save to finish (after training): blocking save time."""
        started = self.clock()
        try:
            yield
        finally:
            self.save_seconds += max(0.0, self.clock() - started)
            if self._cursor is not None:
                self._cursor = self.clock()

    def save_ends(self, step: int) -> None:
        if self._save_started is None:
            return
        now = self.clock()
        seconds = max(0.0, now - self._save_started)
        self.save_seconds += seconds
        self.saves += 1
        self._save_started = None
        if self._cursor is not None:
            self._cursor = now
        self.emit(goodput_line.SAVE, saved_step=step, save_seconds_last=round(seconds, 4))
        for hook in self.on_save:
            hook(seconds)

    def eval_begins(self) -> None:
        self._eval_started = self._close_interval()
        self.emit(goodput_line.EVAL_BEGIN)

    def eval_ends(self) -> None:
        if self._eval_started is None:
            return
        now = self.clock()
        self.eval_seconds += max(0.0, now - self._eval_started)
        self.evals += 1
        self._eval_started = None
        if self._cursor is not None:
            self._cursor = now
        self.emit(goodput_line.EVAL)

    @contextmanager
    def final(self, kind: str) -> Iterator[None]:
        """The final evaluation ("eval") or model write ("save") after training."""
        started = self.clock()
        try:
            yield
        finally:
            seconds = max(0.0, self.clock() - started)
            self.final_seconds += seconds
            if kind == "eval":
                self.eval_seconds += seconds
            else:
                self.save_seconds += seconds

    def end(self) -> None:
        self.emit(goodput_line.END)

    # --- output ------------------------------------------------------------------------------------------
    def record(self, event: str, **extra: Any) -> dict[str, Any]:
        def r(x: float | None) -> float | None:
            return None if x is None else round(x, 3)

        return {
            "v": goodput_line.FORMAT, "event": event, "job": self.job, "host": self.host, "pid": os.getpid(),
            "at": r(self.clock()),
            "script_started_at": r(self.script_started_at), "start_step": self.start_step, "step": self.step,
            "steps": self.steps, "first_step_at": r(self.first_step_at), "last_step_at": r(self.last_step_at),
            "startup": {k: round(v, 3) for k, v in self.startup.items()}, "tokenize_cache": self.tokenize_cache,
            "step_seconds": r(self.step_seconds), "eval_seconds": r(self.eval_seconds),
            "save_seconds": r(self.save_seconds), "final_seconds": r(self.final_seconds), "saves": self.saves,
            "evals": self.evals, "generation": generation.current(), **extra,
        }

    def emit(self, event: str, **extra: Any) -> None:
        if not self.enabled:
            return
        stream = self.stream or sys.stdout
        stream.write(goodput_line.format_line(self.record(event, **extra)) + "\n")
        stream.flush()

    def _metric_lines(self, metrics: dict[str, float]) -> None:
        if not self.enabled:
            return
        stream = self.stream or sys.stdout
        for line in progress_lines.metric_lines(metrics):
            stream.write(line + "\n")
        stream.flush()



class GoodputCallback(TrainerCallback):
    """Marks the first step's start, every step's end and the end of every save (keep it last in the callback
    list: the completion markers and rotation of CheckpointCallback.on_save count as save time)."""

    def __init__(self, clock: GoodputClock) -> None:
        self.clock = clock
        self.saves = None  # checkpoint/background.py's BackgroundSaves, when saves are written behind the loop

    def on_step_begin(self, args, state, control, **kwargs):
        if self.clock.first_step_at is None:
            self.clock.first_step_begins()
        return control

    def on_step_end(self, args, state, control, **kwargs):
        self.clock.step_ends(state.global_step)
        return control

    def on_save(self, args, state, control, **kwargs):
        self.clock.save_ends(state.global_step)
        if self.saves is not None and self.saves.in_flight == state.global_step:
            # after `save`: the record of a write cut short then carries this save's blocking time
            self.clock.write_begins(state.global_step)
        return control
