"""Stragglers: a rank that moves, but slower than the fleet. Not a stall (it is never ended for it): named.

In data parallel training every rank's wall step time is the slowest rank's (the others wait for it in the
gradient all-reduce), so a straggler is found by each rank's *own* time per step: the time its main thread spends
on its data and its forward pass (stall.HEART.own_step_seconds, measured in hftrain/run/trainer.py), which excludes
the wait for the peers. Global rank 0's watchdog compares, at each look after the first full window
(`stall_straggler_minutes`, default 5), each rank's median own time over the trailing window with the fleet's
median; a rank at least THRESHOLD (20%) slower, over at least MIN_STEPS steps, is named in the log and in the
heartbeat file (`stragglers`) as soon as its median crosses (within one window of it becoming slow: the median
moves once half the window is slow), then once per window while it stays slow, with what it costs: the fleet runs
at its pace, so up to (1 - median / its time) of every hour of every instance.
"""

from __future__ import annotations

import statistics
from typing import Any

THRESHOLD = 1.2
MIN_STEPS = 5


def find(beats: dict[int, dict[str, Any] | None], *, threshold: float = THRESHOLD,
         min_steps: int = MIN_STEPS) -> list[dict[str, Any]]:
    """The stragglers among the ranks' beats (each with `own_step`: its median own seconds per step over the
    window, `own_steps`: how many steps that median covers), slowest first."""
    measured = {rank: b for rank, b in beats.items()
                if b and b.get("own_step") and int(b.get("own_steps") or 0) >= min_steps}
    if len(measured) < 2:
        return []
    median = statistics.median(float(b["own_step"]) for b in measured.values())
    if median <= 0:
        return []
    found = []
    for rank, beat in measured.items():
        own = float(beat["own_step"])
        if own >= threshold * median:
            lost = 1 - median / own
            found.append({"rank": rank, "host": beat.get("host"), "local_rank": beat.get("local_rank"),
                          "own_step_seconds": round(own, 4), "median_step_seconds": round(median, 4),
                          "slower": round(own / median - 1, 3), "minutes_lost_per_hour": round(60 * lost, 1)})
    return sorted(found, key=lambda s: -s["slower"])


def window_line(beats: dict[int, dict[str, Any] | None], window_minutes: float, *,
                min_steps: int = MIN_STEPS) -> str:
    """The log's line for a window that named no straggler: what was compared (each measured rank's own time per
    step), so that a quiet window is told from one that measured nothing."""
    measured = {rank: float(b["own_step"]) for rank, b in sorted(beats.items())
                if b and b.get("own_step") and int(b.get("own_steps") or 0) >= min_steps}
    if len(measured) < 2:
        return (f"stragglers: none over the last {window_minutes:g} min ({len(measured)} rank(s) with {min_steps}+ "
                "steps measured: nothing to compare)")
    median = statistics.median(measured.values())
    ranks = ", ".join(f"rank {rank} {own:.3g} s" for rank, own in measured.items())
    return (f"stragglers: none over the last {window_minutes:g} min (own time per step: {ranks}; fleet median "
            f"{median:.3g} s; a straggler is {THRESHOLD:g}x it)")


def describe(straggler: dict[str, Any]) -> str:
    return (f"straggler: rank {straggler['rank']} ({straggler['host']}, local rank {straggler['local_rank']}) takes "
            f"{straggler['own_step_seconds']:.3g} s of its own per step against the fleet's median "
            f"{straggler['median_step_seconds']:.3g} s (+{straggler['slower']:.0%}); the fleet runs at its pace: up "
            f"to {straggler['minutes_lost_per_hour']:g} min of every hour of every instance")


def short(straggler: dict[str, Any]) -> str:
    """The progress line's words: `rank 3 (algo-2) +35%`."""
    return f"rank {straggler['rank']} ({straggler['host']}) +{straggler['slower']:.0%}"


def ending_text(straggler: dict[str, Any], window_minutes: float) -> str:
    """The failure text when `stall_stragglers` is `end` (contract/failure_causes.py reads STRAGGLER_PREFIX)."""
    from contract.failure_causes import STRAGGLER_PREFIX

    return (f"{STRAGGLER_PREFIX}{describe(straggler)} over the last {window_minutes:g} min (stall.stragglers: end: "
            "a new attempt runs on other instances if fallback.max_attempts allows)")
