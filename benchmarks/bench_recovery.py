"""Recovery in place against a new attempt, measured on 2 local hosts (issue 33 point 4): billed seconds from the
fault to the first step after it.

    python benchmarks/bench_recovery.py              # 3 runs per arm, medians
    python benchmarks/bench_recovery.py --repeat 1

One emulator setup (bench_faults.py's: a synthesized dev app, generated text-classification data, a tiny model,
2 hosts, checkpoints every 50 steps), then per arm and repetition `python -m local_mode run` with rank 1 SIGKILLed
after step 60 (`--inject-stall 1@60:sigkill`), no simulated delay:
- `in-place`: `recovery.in_job_restarts` 2 (the default): the ledger's `recovering` part (fault to the first step
  of the restarted processes: detection, agreement, fork, process group, data, model, the peer copy, restore);
- `new-attempt`: `recovery.in_job_restarts` 0, `fallback.max_attempts` 2: the second job's `downloading` and
  `startup` parts (its download, imports, process group, data, model, tokenized cache, restore), what a new
  attempt pays before its first step (provisioning and the image pull are not emulated locally: the simulator's
  sourced profile adds them for a fleet, bench_goodput.py's restart ratio).
Both in instance-seconds as the ledger counts them. Prints each run and the ratio of the medians.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks import bench_faults

FAULT = "1@60:sigkill"


def prepare(root: Path) -> tuple[Path, Path, Path, Path]:
    cdk_out, data, spec_path = bench_faults.prepare(root)
    spec = json.loads(spec_path.read_text())
    spec["hyperparameters"].update(max_steps=120)
    spec["stall"] = {"minutes": 2, "startup_minutes": 2}
    in_place = data / "in-place.json"
    in_place.write_text(json.dumps({**spec, "recovery": {"in_job_restarts": 2}}))
    new = data / "new-attempt.json"
    new.write_text(json.dumps({**spec, "recovery": {"in_job_restarts": 0}, "fallback": {"max_attempts": 2}}))
    return cdk_out, data, in_place, new


def one_run(arm: str, cdk_out: Path, data: Path, spec: Path, work: Path) -> dict:
    run = bench_faults.cli("--cdk-out", str(cdk_out), "--work-dir", str(work), "run", str(spec), "--data", str(data),
                           "--inject-stall", FAULT)
    record = json.loads((work / "report" / "run.json").read_text())
    ledger = (record.get("result") or {}).get("goodput") or {}
    rows = ledger.get("attempts") or []
    if arm == "in-place":
        seconds = (ledger.get("parts") or {}).get("recovering")
        jobs_ok = len({r["job_name"] for r in rows}) == 1
    else:
        second = rows[-1]["parts"] if len({r["job_name"] for r in rows}) == 2 else None
        seconds = second["downloading"] + second["startup"] if second else None
        jobs_ok = second is not None
    return {"arm": arm, "status": record.get("status"), "returncode": run.returncode, "jobs_as_expected": jobs_ok,
            "seconds": round(seconds, 2) if seconds is not None else None,
            "billed_seconds": ledger.get("billed_seconds")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-recovery-"))
    try:
        cdk_out, data, in_place, new = prepare(root)
        found: dict[str, list[float]] = {"in-place": [], "new-attempt": []}
        for i in range(args.repeat):
            for arm, spec in (("in-place", in_place), ("new-attempt", new)):
                row = one_run(arm, cdk_out, data, spec, root / f"{arm}-{i}")
                print(json.dumps(row), flush=True)
                if row["seconds"] is not None and row["status"] == "SUCCEEDED" and row["jobs_as_expected"]:
                    found[arm].append(row["seconds"])
        if not found["in-place"] or not found["new-attempt"]:
            print("a run did not complete as expected: no ratio", flush=True)
            return 1
        a, b = statistics.median(found["in-place"]), statistics.median(found["new-attempt"])
        print(f"fault to first step, instance-seconds (median of {len(found['in-place'])} / "
              f"{len(found['new-attempt'])}): recovery in place {a:.1f} s, new attempt's download and start-up "
              f"{b:.1f} s: {b / a:.1f}x", flush=True)
        return 0 if b / a >= 3 else 1
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
