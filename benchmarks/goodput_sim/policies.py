"""The policies compared, each adding one saving to the one before it."""

from __future__ import annotations

from dataclasses import dataclass

FIXED_MINUTES = 30.0


@dataclass(frozen=True)
class Policy:
    name: str
    background_saves: bool = False  # the loop blocks only for the snapshot; the write completes later
    emergency: bool = False  # a checkpoint at the spot notice (SIGTERM): only later steps are lost if it fits
    in_place: bool = False  # a crash or stall on healthy instances restarts the processes where they are
    fast_restart: bool = False  # an in-place restart skips the imports and model construction (forked worker)
    auto_interval: bool = False  # sqrt(2 x C x M), M estimated as hftrain's AutoInterval does; else 30 min


POLICIES = (
    Policy("1 blocking saves, every failure a new job"),
    Policy("2 + saves that do not block", background_saves=True),
    Policy("3 + emergency checkpoint on notice", background_saves=True, emergency=True),
    Policy("4 + recovery in place", background_saves=True, emergency=True, in_place=True),
    Policy("5 + fast restart", background_saves=True, emergency=True, in_place=True, fast_restart=True),
    Policy("6 + auto interval (estimated M)", background_saves=True, emergency=True, in_place=True,
           fast_restart=True, auto_interval=True),
)
