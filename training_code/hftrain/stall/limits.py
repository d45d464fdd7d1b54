"""The stall limits: how long a rank may make no progress in each phase (the `stall_minutes`,
`stall_startup_minutes` hyperparameters), read by the watchdog and applied by the verdict."""

from __future__ import annotations

from dataclasses import dataclass

LONG_KINDS = ("startup", "eval", "save", "final")


@dataclass(frozen=True)
class Limits:
    """How long each phase may go without progress (minutes; `minutes` None: auto from the median step time)."""

    minutes: float | None = None  # None: auto
    startup_minutes: float = 60.0
    floor_minutes: float = 10.0
    factor: float = 20.0

    def seconds(self, kind: str, median_step: float | None) -> float:
        if kind in LONG_KINDS:
            return self.startup_minutes * 60
        if self.minutes is not None:
            return self.minutes * 60
        return max(self.floor_minutes * 60, self.factor * (median_step or 0.0))

    def describe(self, kind: str, median_step: float | None) -> str:
        if kind in LONG_KINDS:
            return f"stall.startup_minutes={self.startup_minutes:g}, for {kind}"
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
