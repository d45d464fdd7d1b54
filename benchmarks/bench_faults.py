"""Each fault on a 2-host local run, N times: is the verdict the same every time, is the right rank named, is the
right thing retried (issue 34, "How it is checked").

    python benchmarks/bench_faults.py                      # every case, 5 times each
    python benchmarks/bench_faults.py --repeat 3 --case sigstop --case slow
    python benchmarks/bench_faults.py --json               # one JSON object per case

One emulator setup (a synthesized dev app, generated text-classification data, a tiny model), then per case and
repetition `python -m local_mode run` in a subprocess with `stall.minutes` 0.5 (30 s), `stall.startup_minutes`
0.5, `stall.straggler_minutes` 0.1 (a straggler window every 6 s, so that a run sees several), `fallback.max_attempts`
2 and `recovery.in_job_restarts` 2 (the default). Cases (`--inject-stall`,
hftrain/stall/injection.py), all on global rank 1 (the second host); the action follows the one action table
(lambda/runs/actions.py, contract/failure_causes.py IN_JOB_ACTION):
- `healthy`: no fault, HEALTHY_STEPS steps (several straggler windows): no verdict, nothing done, no straggler named;
- `healthy-uneven`: no fault, on uneven shards (one host reads 3.5 times the other's rows: its epochs are longer, its
  time per step is not): no verdict, nothing done, no straggler named;
- `sigstop`: SIGSTOPped after step 20 (a frozen process): `stalled`, recovered in place;
- `sigkill`: SIGKILLed after step 20: `signal`, recovered in place;
- `slow`: stopped 20 s, running 3 s, again and again from step 20 (slow but alive, each stop under the 30 s
  limit): no verdict, nothing done (a stall here is a false positive);
- `startup`: hangs in its start-up phase `layout` (before the first step): `stalled`, recovered in place;
- `startup-data`: hangs in its start-up phase `data_load`: `stalled`, recovered in place;
- `startup-imports`: hangs in train.py's imports, before the stall watchdog exists (the first-line watch names it):
  `stalled`, a new attempt (the process that would supervise a recovery is the one that hangs);
- `startup-setup`, `startup-model`, `startup-tokenize`, `startup-restore`: hangs in that start-up phase (`setup`:
  the process group's rendezvous and join; `model_load`; `tokenize`; `restore`: the Trainer's set-up to the first
  step): `stalled`, recovered in place;
- `save`: hangs inside the checkpoint save of step 50: `stalled`, recovered in place;
- `upload`: its background write of checkpoint 50 hangs (the files SageMaker's checkpoint sync uploads); training
  goes on until the save of step 100 waits for it: `stalled`, recovered in place (`stall_section_floor_minutes` 0.5);
- `startup-verify`: hangs in its start-up phase `resume_verify` (the choice and check of the checkpoint to resume
  from): `stalled`, recovered in place;
- `straggler`: from step 20 its own compute is STRAGGLE (1.5) times as slow (each forward pass sleeps half its
  duration), HEALTHY_STEPS steps: no verdict, nothing done, rank 1 named a straggler in the log and the summary
  (the row gives the seconds from the fault to the first straggler line);
- `raise`: raises the same exception after step 20 every time: `exception`, recovered in place once, then the run
  ends (the same error at the same step).
One row per case: the verdict (the first RECOVERY line of the first job, else its FailureReason) and how many runs
gave it, the rank named, the runs that named a straggler (a `straggler:` line in any rank's log or one in the
summary) and the median number of straggler windows that compared two ranks (a healthy row needs at least one), seconds from the fault (the `INJECTED FAULT at <time>` line in the rank's log) to the
recovery (the new generation forked) or to the job's end, the action (`in-place`, `new-attempt`, `end` or `none`),
the run's final status, and the goodput ledger's `stalled`, `recovering` and `unaccounted` shares of the billed time
(medians). `ok` says whether every repetition matched the expectation.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from datetime import datetime
from pathlib import Path

from contract import failure_causes as causes
from contract import recovery_line

REPO = Path(__file__).resolve().parents[1]
IN_PLACE, NEW_ATTEMPT, END, NONE = "in-place", "new-attempt", "end", "none"
STRAGGLE = 1.5  # the straggler case's rank computes 1.5x as slow (the threshold is 1.2x: stall/stragglers.py)
# case -> (the --inject-stall fault or None, the expected verdict or None, the expected rank named, the action,
# the run's final status)
CASES: dict[str, tuple[str | None, str | None, int | None, str, str]] = {
    "healthy": (None, None, None, NONE, "SUCCEEDED"),
    "healthy-uneven": (None, None, None, NONE, "SUCCEEDED"),
    "sigstop": ("1@20:sigstop", causes.STALLED, 1, IN_PLACE, "SUCCEEDED"),
    "sigkill": ("1@20:sigkill", causes.SIGNAL, 1, IN_PLACE, "SUCCEEDED"),
    "slow": ("1@20:slow=20", None, None, NONE, "SUCCEEDED"),
    "startup": ("1@startup", causes.STALLED, 1, IN_PLACE, "SUCCEEDED"),
    "startup-data": ("1@startup:data_load", causes.STALLED, 1, IN_PLACE, "SUCCEEDED"),
    "startup-imports": ("1@startup:imports", causes.STALLED, 1, NEW_ATTEMPT, "SUCCEEDED"),
    "startup-setup": ("1@startup:setup", causes.STALLED, 1, IN_PLACE, "SUCCEEDED"),
    "startup-model": ("1@startup:model_load", causes.STALLED, 1, IN_PLACE, "SUCCEEDED"),
    "startup-tokenize": ("1@startup:tokenize", causes.STALLED, 1, IN_PLACE, "SUCCEEDED"),
    "startup-restore": ("1@startup:restore", causes.STALLED, 1, IN_PLACE, "SUCCEEDED"),
    "startup-verify": ("1@startup:resume_verify", causes.STALLED, 1, IN_PLACE, "SUCCEEDED"),
    "straggler": (f"1@20:straggle={STRAGGLE}", None, None, NONE, "SUCCEEDED"),
    "save": ("1@50:save", causes.STALLED, 1, IN_PLACE, "SUCCEEDED"),
    "upload": ("1@50:upload", causes.STALLED, 1, IN_PLACE, "SUCCEEDED"),
    "raise": ("1@20:raise", causes.EXCEPTION, 1, END, "FAILED"),
}
HEALTHY = ("healthy", "healthy-uneven")  # where a straggler named is a false positive
STRAGGLING = {"straggler": 1}  # case -> the rank that must be named a straggler (in the log and the summary)
# the spec file per case (default: the data folder's text-classification.json)
SPECS = {"healthy": "healthy.json", "healthy-uneven": "healthy.json", "straggler": "healthy.json",
         "upload": "upload.json"}
HEALTHY_STEPS = 1500
UNEVEN_ROWS = (840, 120, 120, 120)  # part-0..3: ShardedByS3Key gives each host every other object (840+120 vs 120+120)
_INJECTED = re.compile(r"INJECTED FAULT at (\d+\.\d+)")
_RANK = re.compile(r"\brank (\d+) \(")
_STRAGGLER_LINE = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3}) .*straggler: rank (\d+) \(", re.M)


def cli(*args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run([sys.executable, "-m", "local_mode", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


def synth(outdir: Path) -> None:
    import copy

    from stacks.app_builder import build_app, cdk_json_context

    build_app(context=copy.deepcopy(cdk_json_context()), env_name="dev", outdir=str(outdir)).app.synth()


def prepare(root: Path) -> tuple[Path, Path, Path]:
    """(cdk out, data folder, spec) for every run."""
    cdk_out, data = root / "cdk-out", root / "data"
    synth(cdk_out)
    made = cli("--cdk-out", str(cdk_out), "data", "text-classification", str(data), "--rows", "1200")
    if made.returncode != 0:
        raise SystemExit(f"local_mode data failed:\n{made.stderr[-3000:]}")
    spec_path = data / "text-classification.json"
    spec = json.loads(spec_path.read_text())
    spec.update(checkpoint={"every_steps": 50},
                stall={"minutes": 0.5, "startup_minutes": 0.5, "straggler_minutes": 0.1},
                fallback={"max_attempts": 2}, max_runtime_seconds=1800)
    spec["hyperparameters"].update(max_steps=300, logging_steps=50, per_device_train_batch_size=4)
    spec_path.write_text(json.dumps(spec))
    # the healthy cases train longer (HEALTHY_STEPS): several straggler windows compare the ranks' own step times
    (data / "healthy.json").write_text(json.dumps({**spec, "hyperparameters": {**spec["hyperparameters"],
                                                                               "max_steps": HEALTHY_STEPS}}))
    # a hung background write is waited for at the next save, under the limit of a measured save: 3 x the longest,
    # at least stall_section_floor_minutes (10 by default; 0.5 here, as the other limits)
    (data / "upload.json").write_text(json.dumps({**spec, "hyperparameters": {
        **spec["hyperparameters"], "stall_section_floor_minutes": 0.5}}))
    return cdk_out, data, spec_path


def uneven(data: Path, root: Path) -> Path:
    """A copy of the data folder whose training objects hold UNEVEN_ROWS rows (the same rows, dealt unevenly)."""
    copy = root / "data-uneven"
    shutil.copytree(data, copy)
    train = next(copy.glob("datasets/*/train"))
    parts = sorted(train.glob("part-*.jsonl"))
    rows = [line for part in parts for line in part.read_text().splitlines() if line.strip()]
    assert len(parts) == len(UNEVEN_ROWS) and len(rows) >= sum(UNEVEN_ROWS), (len(parts), len(rows))
    start = 0
    for part, count in zip(parts, UNEVEN_ROWS, strict=True):
        part.write_text("".join(f"{line}\n" for line in rows[start:start + count]))
        start += count
    return copy


def _logs(work: Path) -> list[str]:
    return [log.read_text(errors="replace") for log in (work / "sagemaker").glob("*/logs/attempt-*/*.log")]


def straggler_named(work: Path, record: dict) -> bool:
    return bool((record.get("result") or {}).get("stragglers")) or any("straggler: rank" in t for t in _logs(work))


def first_straggler(work: Path) -> tuple[int | None, float | None]:
    """(the rank of the first straggler line in the logs, its time: the log's asctime, in local time)."""
    found = []
    for text in _logs(work):
        for match in _STRAGGLER_LINE.finditer(text):
            at = datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S").timestamp()  # noqa: DTZ007
            found.append((at + int(match.group(2)) / 1000, int(match.group(3))))
    if not found:
        return None, None
    at, rank = min(found)
    return rank, at


def straggler_windows(work: Path) -> int:
    """The straggler windows that compared at least two ranks (a healthy run's "no straggler" means something only
    when some window looked: hftrain/stall/stragglers.py window_line)."""
    return sum(t.count("straggler: rank") + t.count("(own time per step: ") for t in _logs(work))


def fault_time(work: Path, job: str) -> float | None:
    for log in sorted((work / "sagemaker" / job / "logs" / "attempt-1").glob("*.log")):
        match = _INJECTED.search(log.read_text(errors="replace"))
        if match:
            return float(match.group(1))
    return None


def recoveries(work: Path, job: str) -> list[dict]:
    log = work / "sagemaker" / job / "logs" / "attempt-1" / "algo-1.log"
    text = log.read_text(errors="replace") if log.is_file() else ""
    return [r for line in text.splitlines() if (r := recovery_line.parse_line(line))]


def one_run(case: str, cdk_out: Path, data: Path, spec: Path, work: Path) -> dict:
    fault = CASES[case][0]
    args = ["--cdk-out", str(cdk_out), "--work-dir", str(work), "run", str(spec), "--data", str(data)]
    if fault:
        args += ["--inject-stall", fault]
    started = time.time()
    run = cli(*args)
    record = json.loads((work / "report" / "run.json").read_text())
    jobs = [j for j in record["jobs"] if "TrainingJobName" in j]
    first = jobs[0]
    reason = first.get("FailureReason") or ""
    found = recoveries(work, first["TrainingJobName"])
    failed = first["TrainingJobStatus"] == "Failed"
    if found:
        verdict, rank = found[0].get("cause"), found[0].get("rank")
    else:
        verdict = causes.cause_of(reason) if failed else None
        named = _RANK.search(reason.removeprefix("AlgorithmError: ").splitlines()[0]) if reason else None
        rank = int(named.group(1)) if named else None
    at = fault_time(work, first["TrainingJobName"])
    ended = datetime.fromisoformat(first["TrainingEndTime"]).timestamp() if first.get("TrainingEndTime") else None
    acted = found[0].get("restart_at") if found else (ended if failed else None)
    action = NEW_ATTEMPT if failed and len(jobs) > 1 else END if failed else IN_PLACE if found else NONE
    named, named_at = first_straggler(work)
    in_summary = [s.get("rank") for s in (record.get("result") or {}).get("stragglers") or []]
    ledger = (record.get("result") or {}).get("goodput") or {}
    billed = float(ledger.get("billed_seconds") or 0)
    parts = ledger.get("parts") or {}

    def share(part: str) -> float | None:
        return round(parts.get(part, 0) / billed, 3) if billed else None

    return {"case": case, "verdict": verdict, "rank": rank, "straggler": straggler_named(work, record),
            "straggler_windows": straggler_windows(work), "straggler_rank": named, "straggler_in_summary": in_summary,
            "fault_to_straggler_seconds": round(named_at - at, 1) if named_at and at else None,
            "fault_to_action_seconds": round(acted - at, 1) if at and acted and verdict else None,
            "action": action, "recoveries": len(found), "jobs": len(jobs), "status": record.get("status"),
            "returncode": run.returncode, "stalled_share": share("stalled"), "recovering_share": share("recovering"),
            "unaccounted_share": share("unaccounted"),
            "reason": reason.splitlines()[0][:300] if reason else None, "wall_seconds": round(time.time() - started)}


def expected(row: dict) -> bool:
    _fault, verdict, rank, action, status = CASES[row["case"]]
    return (row["verdict"] == verdict and row["rank"] == rank and row["action"] == action
            and row["status"] == status
            and not (row["case"] in HEALTHY and (row["straggler"] or not row.get("straggler_windows")))
            and (row["case"] not in STRAGGLING or (row.get("straggler_rank") == STRAGGLING[row["case"]]
                                                   and STRAGGLING[row["case"]] in row.get("straggler_in_summary", []))))


def summarize(case: str, rows: list[dict]) -> dict:
    def most(key: str) -> str:
        value, count = Counter(str(r[key]) for r in rows).most_common(1)[0]
        return f"{value} {count}/{len(rows)}"

    def median(key: str) -> float | None:
        values = [r[key] for r in rows if r[key] is not None]
        return round(statistics.median(values), 3) if values else None

    return {"case": case, "runs": len(rows), "ok": f"{sum(expected(r) for r in rows)}/{len(rows)}",
            "verdict": most("verdict"), "rank": most("rank"),
            "stragglers": f"{sum(bool(r['straggler']) for r in rows)}/{len(rows)}",
            "windows": median("straggler_windows"), "straggler_rank": most("straggler_rank"),
            "fault_to_straggler_s": median("fault_to_straggler_seconds"),
            "fault_to_action_s": median("fault_to_action_seconds"), "action": most("action"),
            "final": most("status"), "stalled": median("stalled_share"), "recovering": median("recovering_share"),
            "unaccounted": median("unaccounted_share")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=5, help="runs per case (default 5)")
    parser.add_argument("--case", action="append", choices=sorted(CASES), help="only these cases (repeatable)")
    parser.add_argument("--json", action="store_true", help="one JSON object per case (and per run with -v)")
    parser.add_argument("-v", "--verbose", action="store_true", help="every run's row as it ends")
    parser.add_argument("--keep", action="store_true", help="keep the work folders")
    args = parser.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="bench-faults-"))
    try:
        cdk_out, data, spec = prepare(root)
        uneven_data = uneven(data, root) if "healthy-uneven" in (args.case or CASES) else data
        summaries = []
        for case in args.case or list(CASES):
            rows = []
            for i in range(args.repeat):
                row = one_run(case, cdk_out, uneven_data if case == "healthy-uneven" else data,
                              spec.with_name(SPECS.get(case, spec.name)), root / f"{case}-{i}")
                rows.append(row)
                if args.verbose:
                    print(json.dumps(row), file=sys.stderr, flush=True)
            summaries.append(summarize(case, rows))
            print(json.dumps(summaries[-1]) if args.json else _line(summaries[-1]), flush=True)
        return 0 if all(s["ok"].split("/")[0] == str(s["runs"]) for s in summaries) else 1
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)


def _line(summary: dict) -> str:
    return " | ".join(f"{k}={v}" for k, v in summary.items())


if __name__ == "__main__":
    sys.exit(main())
