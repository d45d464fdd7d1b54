"""Interruptions as they come: what kinds, how often each, and what each allows.

The default mix is a guess (AWS publishes no interruption rates): of the interruptions a day, 60% spot reclaims
(two minutes' notice: SIGTERM), 10% instances lost without notice (hardware), 20% a training process crashing on
healthy instances, 10% stalls (a rank stops making progress; found by the stall watchdog). On-demand fleets have no
reclaims: give a mix without them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

SPOT = "spot reclaim"  # notice; the instances go: a new job
HARDWARE = "instance lost"  # no notice; a new job
CRASH = "process crash"  # no notice; the instances are healthy
STALL = "stall"  # no progress until the watchdog ends it; the instances are healthy

KINDS = (SPOT, HARDWARE, CRASH, STALL)
HEALTHY = frozenset({CRASH, STALL})  # recoverable in place


@dataclass(frozen=True)
class Mix:
    spot: float = 0.6
    hardware: float = 0.1
    crash: float = 0.2
    stall: float = 0.1

    def weights(self) -> tuple[float, ...]:
        return (self.spot, self.hardware, self.crash, self.stall)

    def draw(self, rng: random.Random) -> str:
        return rng.choices(KINDS, weights=self.weights())[0]

    def describe(self) -> str:
        return ", ".join(f"{k} {w:.0%}" for k, w in zip(KINDS, self.weights(), strict=True))


DEFAULT_MIX = Mix()
