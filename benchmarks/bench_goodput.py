"""Expected goodput of a day of multi-node training under interruptions, on sourced costs, policy by policy; and
a replay of a measured local run that checks every ledger part.

    python benchmarks/bench_goodput.py                       # the table: both fleets, 0.5-4 interruptions a day
    python benchmarks/bench_goodput.py --json                # the same rows as JSON objects
    python benchmarks/bench_goodput.py --sources             # + every figure with its source or range
    python benchmarks/bench_goodput.py --ledger RUN.json --every-steps N   # + the per-part cross-check
    python benchmarks/bench_goodput.py --smoke               # few samples (the test)

The model (benchmarks/goodput_sim/): two fleets (16 x ml.p4d.24xlarge training a 7B model, 4 x ml.g5.12xlarge
training a 1.3B one; profiles.py: every figure sourced, measured, computed or a guess with a range), 24 hours of
training steps, interruptions as a Poisson process of a documented mix (events.py: spot reclaims with two minutes'
notice, instances lost, process crashes, stalls), six policies each adding one saving (policies.py), the auto
interval estimated by hftrain's own AutoInterval (interval.py), a Monte Carlo over runs (simulate.py). Goodput is
productive / billed instance time; the table gives it with every cost at the low end of its range, the middle and
the high end.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from benchmarks.goodput_sim import events, table
from benchmarks.goodput_sim.profiles import FLEETS
from benchmarks.goodput_sim.replay import cross_check, schedule_from_ledger


def _ledger(path: Path) -> dict:
    record = json.loads(path.read_text())
    return (record.get("result") or record).get("goodput") or record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fleet", choices=[*FLEETS, "all", "none"], default="all", help="none: the cross-check only")
    parser.add_argument("--samples", type=int, default=400, help="simulated runs per row and cost end")
    parser.add_argument("--smoke", action="store_true", help="40 samples per row")
    parser.add_argument("--json", action="store_true", help="the rows as JSON objects, one per line")
    parser.add_argument("--sources", action="store_true", help="print every figure with its source")
    parser.add_argument("--ledger", type=Path, help="a local run's report/run.json: replay it, compare every part")
    parser.add_argument("--every-steps", type=int, help="that run's checkpoint.every_steps")
    parser.add_argument("--save-scale", type=float, default=1.0, help="multiply the replay's save cost (a wrong "
                        "model, to watch the check fail)")
    args = parser.parse_args(argv)
    samples = 40 if args.smoke else args.samples
    fleets = list(FLEETS.values()) if args.fleet == "all" else [] if args.fleet == "none" else [FLEETS[args.fleet]]
    everything = []
    for fleet in fleets:
        rows = table.rows(fleet, samples=samples)
        everything += rows
        if args.json:
            continue
        print(f"\n## {fleet.instances} x {fleet.instance_type}: {fleet.model}, {fleet.work_hours:g} h of training "
              f"steps; interruptions: {events.DEFAULT_MIX.describe()}; {samples} runs per row and cost end")
        print("\n".join(table.markdown(rows)))
        print(table.restart_ratio(fleet))
        if args.sources:
            print("\nfigures (low-cost end / mid / high-cost end):")
            print("\n".join(f"- {name}: {text}" for name, text in fleet.sources()))
    if args.json:
        print("\n".join(json.dumps(row) for row in everything))
    elif "p4d" in [f.name for f in fleets]:
        print("\n" + "\n".join(table.verdict([r for r in everything if "p4d" in r["fleet"]])))
    if args.ledger:
        if args.every_steps is None:
            parser.error("--ledger needs --every-steps (the run's checkpoint.every_steps)")
        ledger = _ledger(args.ledger)
        check = cross_check(ledger, schedule_from_ledger(ledger), every_steps=args.every_steps,
                            save_scale=args.save_scale)
        print(f"\ncross-check against {args.ledger}: " + ("every part within" if check["ok"] else "OUTSIDE")
              + " 10% (or 1% of the billed time)")
        for name, row in check["parts"].items():
            print(f"  {name:14s} predicted {row['predicted']:9.2f} s  measured {row['measured']:9.2f} s  "
                  f"{'ok' if row['ok'] else 'OUTSIDE'}")
        return 0 if check["ok"] else 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
