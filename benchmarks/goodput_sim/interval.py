"""The checkpoint interval a (re)started attempt uses: 30 minutes, or `save_interval auto` estimated exactly as
the training code estimates it: hftrain's AutoInterval, given this run's history (its first start, the
interruptions recorded so far: M = time since the first start / interruptions) and the pipeline's prior until
there was one, and the blocking save times measured so far (C). Never the true interruption rate."""

from __future__ import annotations

from benchmarks.goodput_sim.policies import FIXED_MINUTES
from hftrain.checkpoint.interval import AutoInterval


def _quiet(*_args: object) -> None:
    return None


class IntervalChooser:
    """One per simulated run: what each start's AutoInterval sees."""

    def __init__(self, *, auto: bool, prior_hours: float) -> None:
        self.auto = auto
        self.prior_hours = prior_hours
        self.interruptions = 0
        self.saves: list[float] = []

    def at_start(self, wall_seconds: float) -> AutoInterval | None:
        """The interval object of an attempt starting `wall_seconds` after the run's first start."""
        if not self.auto:
            return None
        history = {"starts": [{"at": 0.0}], "interruptions": [{}] * self.interruptions}
        return AutoInterval(prior_hours=self.prior_hours, history=history, previous_saves=self.saves,
                            clock=lambda: max(1.0, wall_seconds), log=_quiet)

    def first_and_rest(self, current: AutoInterval | None, save_seconds: float) -> tuple[float, float]:
        """(seconds to the first save, seconds between later saves): auto starts at the lower bound until this
        run's first save is measured, then sqrt(2 x C x M)."""
        if current is None:
            return FIXED_MINUTES * 60, FIXED_MINUTES * 60
        first = current.seconds()
        current.record_save(save_seconds)
        return first, current.seconds()

    def record(self, save_seconds: float, saves: int, interrupted: bool) -> None:
        self.saves = [*self.saves, *[save_seconds] * min(saves, 20)][-20:]
        self.interruptions += int(interrupted)
