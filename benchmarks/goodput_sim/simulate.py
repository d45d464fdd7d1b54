"""One simulated run, interruption by interruption, and the expectation over many (Monte Carlo).

Per instance, in seconds of billed time (SageMaker bills every instance the same wall time). Interruptions arrive
as a Poisson process over billed time, `rate` a day, each of a kind drawn from the mix (events.py). An attempt pays
its start (a first start: image pull, data download, imports, process-group join, model load, tokenizing; a new
job after a failure: provisioning (wall time, not billed), the image pull, the data and the whole checkpoint
downloaded, start-up with the tokenized data set kept with the run, the restore; a recovery in place: HyperPod's
recovery range, plus the imports and model construction unless the restart is fast), then trains, saving every
interval. A save blocks the loop `blocking_save` (or, in the background, `snapshot`); a checkpoint counts for a
recovery in place once complete (`background_write` after its snapshot) and for a new job once also in S3
(`upload` later). What an interruption costs:

- spot reclaim: with the emergency checkpoint, a save at the notice (blocking part + write + upload, if within the
  two minutes) keeps every step; else the steps since the last checkpoint in S3 are replayed. A new job.
- instance lost: the peers hang until the fault is detected (`fault_detect`, stalled); the steps since the last
  checkpoint in S3 are replayed. A new job.
- process crash / stall: detected (`crash_detect` / `stall_detect`, stalled); in place, the steps since the newest
  complete local checkpoint are replayed; else a new job from the last checkpoint in S3.

Goodput = work / billed; lost instance-hours = (billed - work) x instances.
"""

from __future__ import annotations

import math
import random
import statistics
from dataclasses import dataclass

from benchmarks.goodput_sim import events
from benchmarks.goodput_sim.costs import Costs
from benchmarks.goodput_sim.interval import IntervalChooser
from benchmarks.goodput_sim.policies import Policy

DAY = 86400.0
PARTS = ("downloading", "startup", "recovering", "productive", "replayed", "checkpointing", "stalled",
         "evaluation", "uploading")


@dataclass(frozen=True)
class Stop:
    """Where training stood when an event came `x` seconds into the training segment."""

    position: float  # steps done (in seconds of step time)
    checkpointing: float  # save time paid in this segment
    local: float  # newest complete checkpoint on the instances
    durable: float  # newest checkpoint in S3


def _saves_before(remaining: float, first: float, every: float) -> int:
    return 0 if remaining <= first else math.ceil((remaining - first) / every - 1e-9)


def _complete_by(x: float, first: float, every: float, block: float, lag: float, saves: int) -> int:
    """How many of the segment's saves are complete `x` seconds in (save j ends at first + block + (j-1)(every +
    block); complete `lag` later)."""
    t = x - first - block - lag
    return 0 if t < 0 else min(saves, 1 + math.floor(t / (every + block)))


def stop_at(x: float, start: float, *, first: float, every: float, block: float, lag: float, upload: float,
            saves: int) -> Stop:
    if x < first:
        position, paid = start + x, 0.0
    elif x < first + block:
        position, paid = start + first, x - first
    else:
        y = x - first - block
        k = math.floor(y / (every + block))
        r = y - k * (every + block)
        if r < every:
            position, paid = start + first + k * every + r, (1 + k) * block
        else:
            position, paid = start + first + (k + 1) * every, (1 + k) * block + r - every

    def at(j: int) -> float:
        return start if j == 0 else start + first + (j - 1) * every

    return Stop(position, paid, at(_complete_by(x, first, every, block, lag, saves)),
                at(_complete_by(x, first, every, block, lag + upload, saves)))


def _pay(parts: dict[str, float], items: list[tuple[str, float]], budget: float) -> float:
    """Pay `items` in order until `budget` runs out; returns what was paid."""
    spent = 0.0
    for part, seconds in items:
        take = min(seconds, budget - spent)
        parts[part] += take
        spent += take
        if spent >= budget:
            break
    return spent


def _start_items(costs: Costs, policy: Policy, start: str) -> list[tuple[str, float]]:
    if start == "first":
        return [("downloading", costs.image_pull + costs.data_download),
                ("startup", costs.imports + costs.pg_join + costs.data_load + costs.model_load + costs.tokenize)]
    if start == "new":
        return [("downloading", costs.image_pull + costs.data_download + costs.checkpoint_download),
                ("startup", costs.imports + costs.pg_join + costs.data_load + costs.model_load + costs.cache_load
                 + costs.restore)]
    slow = 0.0 if policy.fast_restart else costs.imports + costs.model_load
    return [("recovering", costs.in_place + slow)]


def run_once(costs: Costs, policy: Policy, rate_per_day: float, rng: random.Random,
             mix: events.Mix = events.DEFAULT_MIX) -> dict[str, float]:
    """Billed seconds per part for one run (and `provisioning`, `wall`: unbilled and wall seconds)."""
    parts = dict.fromkeys(PARTS, 0.0)
    provisioning = wall = 0.0
    durable = local = position = 0.0
    start = "first"
    chooser = IntervalChooser(auto=policy.auto_interval, prior_hours=costs.prior_hours)
    block = costs.snapshot if policy.background_saves else costs.blocking_save
    lag = costs.background_write if policy.background_saves else 0.0
    rate = rate_per_day / DAY
    while True:
        if start != "in_place":
            provisioning += costs.provisioning
        if start == "in_place":  # the local checkpoint's upload finishes while the processes restart
            durable = max(durable, local)
        if start != "first":
            position = durable if start == "new" else local
        budget = rng.expovariate(rate) if rate > 0 else math.inf
        items = _start_items(costs, policy, start)
        spent = _pay(parts, items, budget)
        wall += spent + (costs.provisioning if start in ("first", "new") else 0.0)
        if spent < sum(s for _, s in items):  # interrupted during the start: it is paid again
            kind, stop, x = mix.draw(rng), Stop(position, 0.0, position, durable), 0.0
        else:
            auto = chooser.at_start(wall)
            first, every = chooser.first_and_rest(auto, block)
            remaining = costs.work - position
            saves = _saves_before(remaining, first, every)
            finish = remaining + saves * block
            x = budget - spent
            if x >= finish:
                parts["checkpointing"] += saves * block
                parts["productive"] = costs.work
                parts["evaluation"] += costs.evaluation
                parts["uploading"] += costs.final_upload
                return {**parts, "provisioning": provisioning, "wall": wall + finish + costs.evaluation
                        + costs.final_upload}
            stop = stop_at(x, position, first=first, every=every, block=block, lag=lag, upload=costs.upload,
                           saves=saves)
            parts["checkpointing"] += stop.checkpointing
            chooser.record(block, _complete_by(x, first, every, block, lag, saves), interrupted=False)
            kind = mix.draw(rng)
        wall += x
        durable, local = max(durable, stop.durable), max(local, stop.local)
        start, tail, kept = _handle(parts, costs, policy, kind, stop, durable, local, block, lag)
        if kept:  # the emergency checkpoint at the notice: complete and in S3
            durable = local = stop.position
        wall += tail
        chooser.record(block, 0, interrupted=True)


def _handle(parts: dict[str, float], costs: Costs, policy: Policy, kind: str, stop: Stop, durable: float,
            local: float, block: float, lag: float) -> tuple[str, float, bool]:
    """Bill what the event costs after the last step; returns (the next start, the billed seconds it took,
    whether an emergency checkpoint kept every step)."""
    if kind == events.SPOT:
        save = block + lag + costs.upload
        if policy.emergency and save <= costs.notice:
            parts["checkpointing"] += block
            parts["replayed"] += lag + costs.upload + costs.exit  # the attempt's tail after its last step
            return "new", block + lag + costs.upload + costs.exit, True
        parts["replayed"] += stop.position - durable + costs.exit
        return "new", costs.exit, False
    if kind == events.HARDWARE:
        parts["stalled"] += costs.fault_detect
        parts["replayed"] += stop.position - durable + costs.exit
        return "new", costs.fault_detect + costs.exit, False
    detect = costs.crash_detect if kind == events.CRASH else costs.stall_detect
    parts["stalled"] += detect
    if policy.in_place:
        parts["replayed"] += stop.position - local
        return "in_place", detect, False
    parts["replayed"] += stop.position - durable + costs.exit
    return "new", detect + costs.exit, False


def simulate(costs: Costs, policy: Policy, rate_per_day: float, *, samples: int = 400, seed: int = 7,
             mix: events.Mix = events.DEFAULT_MIX) -> dict[str, float]:
    """The expectation over `samples` runs: goodput, lost hours per instance, each part's share of billed time."""
    rng = random.Random(seed)
    runs = [run_once(costs, policy, rate_per_day, rng, mix) for _ in range(samples)]
    billed = statistics.fmean(sum(r[p] for p in PARTS) for r in runs)
    return {"goodput": costs.work / billed, "lost_hours_per_instance": (billed - costs.work) / 3600,
            "billed_hours": billed / 3600, "wall_hours": statistics.fmean(r["wall"] for r in runs) / 3600,
            "provisioning_hours": statistics.fmean(r["provisioning"] for r in runs) / 3600,
            "parts": {p: statistics.fmean(r[p] for r in runs) / billed for p in PARTS}}
