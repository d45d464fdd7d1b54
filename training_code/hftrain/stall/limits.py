"""The stall limits: how long a rank may make no progress in each section of its work (the `stall_minutes`,
`stall_startup_minutes`, `stall_floor_minutes`, `stall_section_factor` and `stall_section_floor_minutes`
hyperparameters), read by the watchdog and applied by the verdict.

Each limit derives from measured durations with a factor and a floor, and has a documented prior before the first
measurement:
- training steps: `minutes`, or `auto`: max(`floor_minutes`, `factor` (20) x the median step time measured so far);
  prior (no step yet): `floor_minutes`;
- evaluation, checkpoint saves (`eval`, `save`): max(`section_floor_minutes`, `section_factor` (3) x the longest
  such section this rank measured so far); prior (none measured yet): `startup_minutes`;
- start-up before the first step and the final evaluation/model write (`startup`, `final`): `startup_minutes`,
  or `auto` (None here): derived from the run's measured start-ups (contract/startup_limit.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from contract import startup_limit

LONG_KINDS = ("startup", "eval", "save", "final")
MEASURED_KINDS = ("eval", "save")  # sections whose limit follows their measured durations


@dataclass(frozen=True)
class Limits:
    """How long each section may go without progress (minutes; `minutes` None: auto from the median step time)."""

    minutes: float | None = None  # None: auto
    startup_minutes: float | None = None  # None: auto (contract/startup_limit.py)
    measured_startup: float | None = None  # auto: the longest start-up (s) this run's attempts measured
    floor_minutes: float = 10.0
    factor: float = 20.0
    section_factor: float = 3.0
    section_floor_minutes: float = 10.0

    def seconds(self, kind: str, median_step: float | None, sections: dict[str, float] | None = None) -> float:
        measured = (sections or {}).get(kind) if kind in MEASURED_KINDS else None
        if measured is not None:
            return max(self.section_floor_minutes * 60, self.section_factor * measured)
        if kind in LONG_KINDS:
            return startup_limit.seconds(self.startup_minutes, self.measured_startup)
        if self.minutes is not None:
            return self.minutes * 60
        return max(self.floor_minutes * 60, self.factor * (median_step or 0.0))

    def describe(self, kind: str, median_step: float | None, sections: dict[str, float] | None = None) -> str:
        measured = (sections or {}).get(kind) if kind in MEASURED_KINDS else None
        if measured is not None:
            return (f"stall.section: max({self.section_floor_minutes:g} min, {self.section_factor:g} x the longest "
                    f"{kind} measured {measured:.3g} s)")
        startup = startup_limit.describe(self.startup_minutes, self.measured_startup)
        if kind in MEASURED_KINDS:
            return f"{startup}, for {kind} (the prior before its first measurement)"
        if kind in LONG_KINDS:
            return f"{startup}, for {kind}"
        if self.minutes is not None:
            return f"stall.minutes={self.minutes:g}"
        return (f"stall.minutes=auto: max({self.floor_minutes:g} min, {self.factor:g} x the median step time "
                f"{(median_step or 0):.3g} s)")


def parse_minutes(value: str | float | None) -> tuple[bool, float | None]:
    """(enabled, minutes or None for auto) from the hyperparameter: 'auto', 'off' or a number of minutes > 0."""
    text = str(value if value is not None else "auto").strip().lower()
    if text == "auto":
        return True, None
    if text in ("off", "0", "0.0"):
        return False, None
    try:
        minutes = float(text)
    except ValueError:
        raise ValueError(f"stall_minutes: expected 'auto', 'off' or minutes > 0, got {value!r}") from None
    if not minutes > 0:
        raise ValueError(f"stall_minutes: expected 'auto', 'off' or minutes > 0, got {value!r}")
    return True, minutes
