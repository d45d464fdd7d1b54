"""Expected goodput of long multi-node runs under interruptions and stalls: a simulator, checked against a
measured ledger.

    python benchmarks/bench_goodput.py                      # the table (16 x ml.p4d.24xlarge, 24 h)
    python benchmarks/bench_goodput.py --ledger RUN.json    # + cross-check against a local run
    python benchmarks/bench_goodput.py --smoke              # few samples (the test)

Model (per instance, wall seconds; instance-hours = x instance count): the run needs `work` seconds of optimizer
steps. Every attempt pays `download` and `startup` (a restart also `restore`; with the tokenized cache a restart
pays `cache_load` instead of `tokenize`). Training saves a checkpoint every `interval` of step time, each
blocking `save` seconds; a checkpoint counts once its save completed. Interruptions arrive as a Poisson process
over billed time (`rate` per day); one is abrupt: the steps since the last complete checkpoint are replayed
(`replayed`), a save in progress is lost, and the attempt is billed `stop` seconds more until its processes are
gone (the ledger's `replayed` detail `after_last_step`). Stalls arrive the same way (`stall_rate`); a stalled attempt burns
until it is detected (`detect`) or, without detection, until the job's MaxRuntime, then restarts like an
interruption. The run ends with `eval` and `upload`. Goodput = work / billed; lost instance-hours = billed - work.

Policies compared: a fixed 30-minute interval vs auto (sqrt(2 x save x M), M the mean time between
interruptions, clamped to [5, 60] minutes: hftrain/checkpoint/interval.py); the tokenized cache vs none; stall detection
vs waiting for MaxRuntime.

Costs: the local runs' measurements, scaled as stated. The save, download and start-up figures are the demo
ledger's (`--ledger`, else the defaults below, taken from `make demo` on the 2-core build machine), the tokenize
and cache-load figures bench_restart.py's (100k generated QA examples). A p4d job's absolute costs differ (image
pull, multi-GB checkpoints): `--scale` multiplies every cost; the ratios between policies are what the table is for.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import statistics
import sys
from dataclasses import asdict, dataclass, replace
from pathlib import Path

from contract import summary as run_summary
from hftrain.checkpoint.interval import clamp_minutes, young_daly_seconds

REPO = Path(__file__).resolve().parents[1]


DAY = 86400.0
FIXED_MINUTES = 30.0


@dataclass(frozen=True)
class Costs:
    """Seconds per instance. Defaults: measured on the 2-core build machine (`make demo`, bench_restart.py)."""

    download: float = 2.3
    startup: float = 27.0  # start-up without tokenization (imports, model load, launch)
    tokenize: float = 65.2  # tokenizing the data set (100k QA examples: bench_restart.py, median of 2)
    cache_load: float = 0.08  # loading and verifying the kept tokenized data set instead (same run)
    restore: float = 1.4  # a restart's checkpoint verification and load
    save: float = 0.08  # one blocking checkpoint save
    eval: float = 0.12
    upload: float = 9.9  # the processes' exit and the model upload
    stop: float = 7.7  # an interrupted attempt's billed time after its last step (SIGTERM save, processes' exit)

    def first_startup(self) -> float:
        return self.startup + self.tokenize

    def restart_startup(self, cache: bool) -> float:
        return self.startup + self.restore + (self.cache_load if cache else self.tokenize)


# A p4d-sized job, assumed (not measured: no GPU here): a multi-GB image and model, a 1.3B-parameter checkpoint.
# stop: the two-minute spot interruption notice, all of it billed (a conservative guess).
P4D = Costs(download=600.0, startup=300.0, tokenize=1200.0, cache_load=120.0, restore=120.0, save=90.0,
            eval=600.0, upload=300.0, stop=120.0)


@dataclass(frozen=True)
class Scenario:
    instances: int = 16
    work_hours: float = 24.0
    rate_per_day: float = 1.0  # interruptions
    stall_per_day: float = 0.25
    max_runtime_hours: float = 36.0
    detect_minutes: float = 10.0  # stall detection (the project's watchdog: within minutes)
    interval: str = "fixed"  # "fixed" (30 min) or "auto"
    cache: bool = True
    detection: bool = True


def interval_seconds(scenario: Scenario, costs: Costs) -> float:
    if scenario.interval == "fixed":
        return FIXED_MINUTES * 60
    mtbi = DAY / scenario.rate_per_day if scenario.rate_per_day > 0 else 30 * DAY
    return clamp_minutes(young_daly_seconds(costs.save, mtbi) / 60) * 60


def simulate_once(scenario: Scenario, costs: Costs, rng: random.Random) -> dict[str, float]:
    """One run: billed seconds per part (per instance)."""
    parts = dict.fromkeys(("downloading", "startup", "productive", "replayed", "checkpointing", "evaluation",
                           "uploading", "stalled"), 0.0)
    work, durable, attempt = scenario.work_hours * 3600, 0.0, 0
    every = interval_seconds(scenario, costs)
    rate = scenario.rate_per_day / DAY
    stall_rate = scenario.stall_per_day / DAY
    while True:
        startup = costs.first_startup() if attempt == 0 else costs.restart_startup(scenario.cache)
        budget = scenario.max_runtime_hours * 3600  # the job's MaxRuntime, from this attempt's start
        clock = costs.download + startup  # time into the attempt
        parts["downloading"] += costs.download
        parts["startup"] += startup
        interrupt = rng.expovariate(rate) if rate > 0 else math.inf
        stall = rng.expovariate(stall_rate) if stall_rate > 0 else math.inf
        if min(interrupt, stall) < clock:  # lost during start-up: it is paid again
            parts["replayed"] += costs.stop if interrupt <= stall else 0.0
            attempt += 1
            continue
        done, since_save = durable, 0.0
        event = None
        while done < work:
            step = min(every - since_save, work - done)
            end_of_steps = clock + step
            if min(interrupt, stall) < end_of_steps:
                event = "interrupt" if interrupt <= stall else "stall"
                ran = min(interrupt, stall) - clock
                parts["replayed"] += since_save + ran
                clock += ran
                break
            clock, done, since_save = end_of_steps, done + step, since_save + step
            if done >= work:
                break
            end_of_save = clock + costs.save
            if min(interrupt, stall) < end_of_save:  # the save in progress is lost
                event = "interrupt" if interrupt <= stall else "stall"
                ran = min(interrupt, stall) - clock
                parts["checkpointing"] += ran
                parts["replayed"] += since_save
                clock += ran
                break
            parts["checkpointing"] += costs.save
            clock, durable, since_save = end_of_save, done, 0.0
        if event is None:
            parts["productive"] = work
            parts["evaluation"] += costs.eval
            parts["uploading"] += costs.upload
            return parts
        if event == "stall":
            wait = scenario.detect_minutes * 60 if scenario.detection else max(0.0, budget - clock)
            parts["stalled"] += wait
        else:
            parts["replayed"] += costs.stop
        attempt += 1


def simulate(scenario: Scenario, costs: Costs, *, samples: int = 400, seed: int = 7) -> dict[str, float]:
    rng = random.Random(seed)
    runs = [simulate_once(scenario, costs, rng) for _ in range(samples)]
    billed = [sum(r.values()) for r in runs]
    mean_billed = statistics.fmean(billed)
    work = scenario.work_hours * 3600
    return {"goodput": work / mean_billed, "lost_instance_hours": (mean_billed - work) * scenario.instances / 3600,
            "interval_minutes": interval_seconds(scenario, costs) / 60,
            **{k: statistics.fmean(r[k] for r in runs) / mean_billed for k in runs[0]}}


# --- the cross-check against a measured ledger -------------------------------------------------------------------
def replay(costs: Costs, *, work: float, every: float, interruptions: list[float], notice: bool) -> dict[str, float]:
    """The model on known interruptions (at these seconds of step time): billed seconds per part, per instance.
    notice: each interruption lets the job save at once (SIGTERM), else the steps since the last checkpoint are
    replayed; either way the attempt is billed `stop` seconds more."""
    parts = dict.fromkeys(("downloading", "startup", "productive", "replayed", "checkpointing", "evaluation",
                           "uploading"), 0.0)
    durable = 0.0
    for i, stop in enumerate([*sorted(interruptions), work]):
        parts["downloading"] += costs.download
        parts["startup"] += costs.first_startup() if i == 0 else costs.restart_startup(True)
        position = durable
        while position < stop:
            position = min((math.floor(position / every + 1e-9) + 1) * every, stop)
            if position < work and abs(position / every - round(position / every)) < 1e-9:
                parts["checkpointing"] += costs.save
                durable = position
        if stop < work:
            if notice:
                parts["checkpointing"] += costs.save
                durable = position
            parts["replayed"] += position - durable + costs.stop
    parts["productive"] = work
    parts["checkpointing"] += costs.save  # the final model write
    parts["evaluation"] += costs.eval
    parts["uploading"] += costs.upload
    return parts


def measured(goodput: dict) -> dict:
    """What a local run's ledger says, per instance: costs, step time, saves, where the interruptions were."""
    rows = goodput["attempts"]
    per = [{k: v / a["instance_count"] for k, v in a["parts"].items()} for a in rows]
    saves = sum(a.get("saves") or 0 for a in rows) + 1  # + the final model write
    step = statistics.fmean(a["step_seconds"] for a in rows if a.get("step_seconds"))
    later = [p["startup"] for p in per[1:]]
    stops = [(a.get("details") or {}).get("replayed", {}).get("after_last_step", 0.0) / a["instance_count"] for a in rows[:-1]]
    costs = Costs(download=statistics.fmean(p["downloading"] for p in per), startup=per[0]["startup"],
                  tokenize=0.0, cache_load=0.0, restore=(statistics.fmean(later) - per[0]["startup"]) if later else 0.0,
                  save=sum(p["checkpointing"] for p in per) / saves,
                  eval=sum(p["evaluation"] for p in per), upload=per[-1]["uploading"],
                  stop=statistics.fmean(stops) if stops else 0.0)
    work = sum(p["productive"] for p in per)
    interruptions = [(r["step_reached"] - (rows[0].get("start_step") or 0)) * step
                     for r in goodput.get("interruptions") or [] if r.get("step_reached") is not None]
    notice = all(r.get("lost_steps") == 0 for r in goodput.get("interruptions") or [])
    return {"costs": costs, "step": step, "work": work, "interruptions": interruptions, "notice": notice}


def cross_check(goodput: dict, every_steps: int, tolerance: float = 0.10) -> dict:
    """The simulator's prediction for a measured run's parameters (its costs, its checkpoint interval, its
    interruptions at the steps they happened) against the goodput that run's ledger measured."""
    facts = measured(goodput)
    parts = replay(facts["costs"], work=facts["work"], every=every_steps * facts["step"],
                   interruptions=facts["interruptions"], notice=facts["notice"])
    predicted = parts["productive"] / sum(parts.values())
    actual = float(goodput["ratio"] or 0.0)
    error = abs(predicted - actual) / actual if actual else math.inf
    return {"predicted": predicted, "measured": actual, "relative_error": error, "ok": error <= tolerance,
            "parts": parts}


def _table(rows: list[dict]) -> list[str]:
    head = ("interruptions/day", "policy", "goodput", "lost inst-h", "interval", "replayed", "startup", "stalled")
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        out.append(f"| {r['rate']:g} | {r['policy']} | {r['goodput']:.1%} | {r['lost_instance_hours']:.1f} | "
                   f"{r['interval_minutes']:.1f} min | {r['replayed']:.1%} | {r['startup']:.1%} | "
                   f"{r['stalled']:.1%} |")
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ledger", type=Path, help=f"a local run's report/run.json (or {run_summary.FILE_NAME}): cross-check")
    parser.add_argument("--every-steps", type=int, default=50, help="that run's checkpoint.every_steps (demo: 50)")
    parser.add_argument("--restart", type=Path, help="bench_restart.py's JSON: tokenize and cache-load seconds")
    parser.add_argument("--samples", type=int, default=400)
    parser.add_argument("--smoke", action="store_true", help="40 samples per scenario")
    args = parser.parse_args(argv)
    costs = Costs()
    if args.restart and args.restart.is_file():
        restart = json.loads(args.restart.read_text())
        costs = replace(costs, tokenize=restart["tokenize_seconds"], cache_load=restart["cache_load_seconds"])
    ledger = None
    if args.ledger:
        record = json.loads(args.ledger.read_text())
        ledger = (record.get("result") or record).get("goodput")
        local = measured(ledger)["costs"]
        costs = replace(costs, download=local.download, startup=local.startup, restore=max(0.0, local.restore),
                        save=local.save, eval=local.eval, upload=local.upload, stop=local.stop)  # its tokenization: tiny data
    samples = 40 if args.smoke else args.samples
    for title, profile in (("costs measured locally", costs), ("costs of a p4d-sized job, assumed", P4D)):
        table(title, profile, samples)
    if ledger is not None:
        check = cross_check(ledger, args.every_steps)
        print(f"cross-check against {args.ledger}: predicted goodput {check['predicted']:.4f}, measured "
              f"{check['measured']:.4f}, relative error {check['relative_error']:.1%} "
              f"({'within' if check['ok'] else 'OUTSIDE'} 10%)")
        return 0 if check["ok"] else 1
    return 0


def table(title: str, costs: Costs, samples: int) -> list[dict]:
    base = Scenario()
    print(f"\n{title}: {base.instances} x ml.p4d.24xlarge, {base.work_hours:g} h of training, stalls "
          f"{base.stall_per_day:g}/day, MaxRuntime {base.max_runtime_hours:g} h; per instance (s): "
          + ", ".join(f"{k} {v:.2f}" for k, v in asdict(costs).items()) + f"; {samples} runs per row")
    rows = []
    for rate in (0.5, 1.0, 2.0, 4.0):
        policies = {
            "fixed 30 min, cache, detection": replace(base, rate_per_day=rate),
            "auto, cache, detection": replace(base, rate_per_day=rate, interval="auto"),
            "auto, no cache, detection": replace(base, rate_per_day=rate, interval="auto", cache=False),
            "auto, cache, MaxRuntime": replace(base, rate_per_day=rate, interval="auto", detection=False),
        }
        for name, scenario in policies.items():
            rows.append({"rate": rate, "policy": name, **simulate(scenario, costs, samples=samples)})
    print("\n".join(_table(rows)))
    for rate in (0.5, 1.0, 2.0, 4.0):
        by = {r["policy"]: r for r in rows if r["rate"] == rate}
        fixed, auto = by["fixed 30 min, cache, detection"], by["auto, cache, detection"]
        print(f"{rate:g}/day: auto vs fixed {auto['goodput'] / fixed['goodput']:.3f}x goodput "
              f"({fixed['lost_instance_hours'] - auto['lost_instance_hours']:+.1f} inst-h saved); cache vs none "
              f"{auto['goodput'] / by['auto, no cache, detection']['goodput']:.3f}x "
              f"({by['auto, no cache, detection']['lost_instance_hours'] - auto['lost_instance_hours']:+.1f}); "
              f"detection vs MaxRuntime {auto['goodput'] / by['auto, cache, MaxRuntime']['goodput']:.3f}x "
              f"({by['auto, cache, MaxRuntime']['lost_instance_hours'] - auto['lost_instance_hours']:+.1f})")
    return rows


if __name__ == "__main__":
    sys.exit(main())
