"""A cost figure with its range and where it comes from: a published source, a measurement of this project, a
computation from other figures, or a guess (always with a range)."""

from __future__ import annotations

from dataclasses import dataclass

ENDS = ("low", "mid", "high")  # the low-cost end of every range, the middle, the high-cost end


@dataclass(frozen=True)
class Figure:
    """`low`/`high`: the value at the low-cost / high-cost end (for a throughput, low is the fast one)."""

    low: float
    mid: float
    high: float
    unit: str
    kind: str  # "source", "measured", "computed", "guess", "project default"
    source: str

    def at(self, end: str) -> float:
        return {"low": self.low, "mid": self.mid, "high": self.high}[end]

    @classmethod
    def fixed(cls, value: float, unit: str, kind: str, source: str) -> Figure:
        return cls(value, value, value, unit, kind, source)

    def describe(self) -> str:
        span = f"{self.mid:g}" if self.low == self.mid == self.high else f"{self.low:g} / {self.mid:g} / {self.high:g}"
        return f"{span} {self.unit} ({self.kind}: {self.source})"
