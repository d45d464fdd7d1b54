"""What the run did across restarts, kept beside the checkpoints (so it reaches S3 with them).

- the progress file (global rank 0, at most every `progress_every_seconds` and at every save): the step this
  process reached and when, where it started, and the blocking time of the run's recent saves (for
  `save_interval auto`). After an interruption it tells the next start how far the lost attempt got, as far as
  it knows: a process interrupted before its first beat left only its start, and then the step reached is
  recorded as unknown (None), never as the start step. The run summary takes the step reached from the
  attempt's own log instead (lambda/goodput/ledger.py).
- the history file (global rank 0, at every start): one record per start (job, hosts, world size, the checkpoint
  resumed from, the checkpoints rejected and why, the verification time, the decision taken) and one record
  per interruption: the step reached, the step resumed from, and the work lost in steps and minutes (lost steps
  times the lost attempt's measured time per step). The pipeline's finish step copies the interruptions into the
  run summary.

Their names and formats: contract/run_history.py. Both live at the top of the checkpoint dir, outside every `checkpoint-<step>/`, so checkpoint discovery never
reads them. They are small and rewritten atomically.
"""

from __future__ import annotations

import logging
import os
import time
from typing import Any

from contract import run_history, startup_limit
from hftrain.checkpoint.manager import utc_iso
from hftrain.checkpoint.storage import LocalStorage

logger = logging.getLogger(__name__)



def _read(storage: LocalStorage, path: str, parse) -> dict[str, Any] | None:
    text = storage.read_text(path)
    if not text:
        return None
    value = parse(text)
    if value is None:
        logger.warning("ignoring unreadable %s", path)
    return value


def interruption_record(previous: dict[str, Any] | None, *, resumed_step: int | None, job: str,
                        now: float) -> dict[str, Any] | None:
    """The interruption a start follows from, given the previous process's last progress (None: none)."""
    if not previous or previous.get("finished"):
        return None
    reached = int(previous.get("step") or 0)
    started_step = int(previous.get("started_step") or 0)
    resumed = resumed_step or 0
    if reached <= started_step and not previous.get("beats"):
        # Only the start was recorded: the attempt may have run any number of steps before it was lost.
        return {
            "job": previous.get("job"), "step_reached": None, "reached_at": None, "resumed_from_step": resumed_step,
            "lost_steps": None, "lost_minutes": None, "seconds_per_step": None, "resumed_by_job": job,
            "resumed_at": utc_iso(now),
            "unknown": f"job {previous.get('job')} was lost before its first progress record (written every "
                       f"{previous.get('every_seconds', '?')} s and at saves): the step it reached is in its log",
        }
    lost_steps = max(0, reached - resumed)
    seconds_per_step = None
    if reached > started_step and previous.get("at") and previous.get("started_at"):
        seconds_per_step = max(0.0, float(previous["at"]) - float(previous["started_at"])) / (reached - started_step)
    if lost_steps == 0:
        lost_minutes: float | None = 0.0
    elif seconds_per_step is not None:
        lost_minutes = round(lost_steps * seconds_per_step / 60, 3)
    else:
        lost_minutes = None
    return {
        "job": previous.get("job"),
        "step_reached": reached,
        "reached_at": utc_iso(float(previous["at"])) if previous.get("at") else None,
        "resumed_from_step": resumed_step,
        "lost_steps": lost_steps,
        "lost_minutes": lost_minutes,
        "seconds_per_step": round(seconds_per_step, 4) if seconds_per_step is not None else None,
        "resumed_by_job": job,
        "resumed_at": utc_iso(now),
    }


class RunHistory:
    """Global rank 0's view of the progress and history files (other ranks never write)."""

    def __init__(self, root: str, *, job: str, host: str, every_seconds: float = 30.0,
                 storage: LocalStorage | None = None, clock=time.time) -> None:
        self.root = root
        self.job = job
        self.host = host
        self.every_seconds = max(0.0, float(every_seconds))
        self.storage = storage or LocalStorage()
        self.clock = clock
        self._last_beat: float | None = None
        self._started = False
        self._previous: dict[str, Any] | None = None
        self._started_step = 0
        self._started_at = clock()
        self._beats = 0
        self.save_seconds: list[float] = []  # the run's recent blocking save times (save_interval auto)
        self.startup_seconds: list[float] = []  # the run's measured start-ups (contract/startup_limit.py)

    @property
    def progress_path(self) -> str:
        return os.path.join(self.root, run_history.PROGRESS_FILE)

    @property
    def history_path(self) -> str:
        return os.path.join(self.root, run_history.HISTORY_FILE)

    def read_history(self) -> dict[str, Any]:
        return run_history.with_defaults(_read(self.storage, self.history_path, run_history.parse_history))

    def record_start(self, start: dict[str, Any], *, resumed_step: int | None) -> dict[str, Any] | None:
        """Append this start (and the interruption it follows, if any) to the history; returns the interruption."""
        now = self.clock()
        if not self._started:  # a second start of this process (a fallback after a load error) amends the first
            self._previous = _read(self.storage, self.progress_path, run_history.parse_progress)
            carried = (self._previous or {}).get("save_seconds")
            self.save_seconds = [float(x) for x in carried if isinstance(x, int | float)][-20:] if isinstance(
                carried, list) else []
            starts = (self._previous or {}).get(startup_limit.PROGRESS_KEY)
            self.startup_seconds = [float(x) for x in starts if isinstance(x, int | float)][
                -startup_limit.KEEP:] if isinstance(starts, list) else []
        interruption = interruption_record(self._previous, resumed_step=resumed_step, job=self.job, now=now)
        history = self.read_history()
        history["starts"] = [*history["starts"], {"job": self.job, "at": utc_iso(now), **start}]
        if interruption:
            earlier = history["interruptions"][:-1] if self._started and history["interruptions"] else \
                history["interruptions"]
            history["interruptions"] = [*earlier, interruption]
        self._started = True
        self.storage.write_text_atomic(self.history_path, run_history.format_history(history))
        self._started_step = resumed_step or 0
        self._started_at = now
        self._beats = -1  # the start's own record below is not a progress beat
        self.beat(self._started_step, force=True)
        return interruption

    def record_save_seconds(self, seconds: float) -> None:
        self.save_seconds = [*self.save_seconds, round(float(seconds), 4)][-20:]

    def record_startup_seconds(self, seconds: float) -> None:
        """This attempt's start-up (train.py's first line to its first step), written at once: the next attempt's
        `stall_startup_minutes auto` derives from the longest (contract/startup_limit.py)."""
        self.startup_seconds = [*self.startup_seconds, round(float(seconds), 3)][-startup_limit.KEEP:]
        beats, last = self._beats, self._last_beat
        self._beats -= 1  # not a progress beat: the file keeps the count (an interruption before the first beat
        self.beat(self._started_step, force=True)  # still reports the step reached as unknown)
        self._beats, self._last_beat = beats, last

    def beat(self, step: int, *, force: bool = False, finished: bool = False) -> None:
        now = self.clock()
        if not force and self._last_beat is not None and now - self._last_beat < self.every_seconds:
            return
        self._last_beat = now
        self._beats += 1
        progress = {"job": self.job, "host": self.host, "step": step, "at": round(now, 3), "at_iso": utc_iso(now),
                    "started_step": self._started_step, "started_at": round(self._started_at, 3),
                    "finished": finished, "beats": self._beats, "every_seconds": self.every_seconds,
                    "save_seconds": self.save_seconds, startup_limit.PROGRESS_KEY: self.startup_seconds}
        try:
            self.storage.write_text_atomic(self.progress_path, run_history.format_progress(progress))
        except (OSError, ValueError) as err:  # progress is informative: never stop training for it
            logger.warning("could not write %s: %s", self.progress_path, err)
