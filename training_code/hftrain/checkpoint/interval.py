"""`save_interval auto`: the time between checkpoints chosen from what this run measures.

Young/Daly's first-order optimum for the checkpoint interval is sqrt(2 x C x M): C the time a save blocks
training, M the mean time between interruptions. Saving more often wastes save time (C per interval), less often
wastes recomputation (half an interval per interruption, on average).

- C: the blocking save time measured in this run: the first save, then the running median of the saves so far
  (earlier attempts' saves included: they are kept in `_progress.json`). Until the run's first save is measured
  the interval is the lower bound, so that C is measured early.
- M: observed in this run's history (`_history.json`): the time since the run's first start divided by the
  interruptions recorded, once there is at least one; else the prior the pipeline passes for the instance type
  and capacity (`interruption_prior_hours`, lambda/plan/checkpoint_interval.py, a documented conservative guess); else
  `DEFAULT_PRIOR_HOURS`.
- The interval is clamped to the bounds of contract/intervals.py ([5, 60] minutes). Every change is logged with C, M and the interval.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from contract import intervals

logger = logging.getLogger("hftrain")

MIN_MINUTES = float(intervals.CHECKPOINT_MIN_MINUTES)
MAX_MINUTES = float(intervals.CHECKPOINT_MAX_MINUTES)
DEFAULT_PRIOR_HOURS = 24.0  # when the pipeline passes no prior (a run outside the pipeline): a guess
MAX_SAMPLES = 20


def young_daly_seconds(save_seconds: float, mtbi_seconds: float) -> float:
    """sqrt(2 x C x M), unclamped."""
    return math.sqrt(2.0 * max(0.0, save_seconds) * max(0.0, mtbi_seconds))


def clamp_minutes(minutes: float) -> float:
    return intervals.clamp_checkpoint_minutes(minutes)


def interval_minutes(save_seconds: float | None, mtbi_seconds: float) -> float:
    """The auto interval in minutes: the lower bound until C is known, else sqrt(2CM) within the bounds."""
    if save_seconds is None:
        return MIN_MINUTES
    return clamp_minutes(young_daly_seconds(save_seconds, mtbi_seconds) / 60.0)


def _epoch(value: Any) -> float | None:
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def observed_mtbi_seconds(history: dict[str, Any], now: float) -> tuple[float | None, int]:
    """(mean seconds between interruptions, interruptions seen) from `_history.json`; None before the first."""
    interruptions = [i for i in history.get("interruptions") or [] if isinstance(i, dict)]
    starts = [_epoch(s.get("at")) for s in history.get("starts") or [] if isinstance(s, dict)]
    first = min((s for s in starts if s is not None), default=None)
    if not interruptions or first is None:
        return None, len(interruptions)
    return max(1.0, now - first) / len(interruptions), len(interruptions)


class AutoInterval:
    """The current interval (seconds) for SigtermCallback; record_save() updates it after every save."""

    def __init__(self, *, prior_hours: float = 0.0, history: dict[str, Any] | None = None,
                 previous_saves: Iterable[float] = (), clock: Callable[[], float] = time.time,
                 log: Callable[..., None] | None = None) -> None:
        self.clock = clock
        self.log = log or logger.info
        observed, count = observed_mtbi_seconds(history or {}, clock())
        if observed is not None:
            self.mtbi_seconds = observed
            self.mtbi_source = f"observed in this run: {count} interruption(s)"
        elif prior_hours and prior_hours > 0:
            self.mtbi_seconds = prior_hours * 3600.0
            self.mtbi_source = "the pipeline's prior for this instance type and capacity"
        else:
            self.mtbi_seconds = DEFAULT_PRIOR_HOURS * 3600.0
            self.mtbi_source = f"default prior ({DEFAULT_PRIOR_HOURS:g} h, a guess)"
        self.samples = [float(s) for s in previous_saves if isinstance(s, int | float) and s >= 0][-MAX_SAMPLES:]
        self.minutes = interval_minutes(self.save_seconds, self.mtbi_seconds)
        self._announce("start")

    @property
    def save_seconds(self) -> float | None:
        return statistics.median(self.samples) if self.samples else None

    def seconds(self) -> float:
        return self.minutes * 60.0

    def record_save(self, seconds: float) -> None:
        self.samples = [*self.samples, float(seconds)][-MAX_SAMPLES:]
        minutes = interval_minutes(self.save_seconds, self.mtbi_seconds)
        if abs(minutes - self.minutes) > 1e-6:
            self.minutes = minutes
            self._announce("change")

    def _announce(self, why: str) -> None:
        c = self.save_seconds
        m_hours = self.mtbi_seconds / 3600.0
        if c is None:
            how = (f"{self.minutes:g} min (the lower bound until this run's first save is measured; "
                   f"M {m_hours:.2f} h, {self.mtbi_source})")
        else:
            raw = young_daly_seconds(c, self.mtbi_seconds) / 60.0
            clamp = "" if MIN_MINUTES <= raw <= MAX_MINUTES else f", clamped to [{MIN_MINUTES:g}, {MAX_MINUTES:g}]"
            how = (f"{self.minutes:.2f} min = sqrt(2 x C {c:.3f} s x M {m_hours:.2f} h) = {raw:.2f} min{clamp} "
                   f"(C: median of {len(self.samples)} save(s); M: {self.mtbi_source})")
        self.log("checkpoint interval (auto, %s): %s", why, how)
