"""Restart start-up with and without the tokenized data set kept with the run (hftrain/data/tokenized_cache.py).

    python benchmarks/bench_restart.py               # 100,000 generated QA examples (SQuAD-like lengths)
    python benchmarks/bench_restart.py --smoke       # 2,000 examples

One job base dir (a `train` and a `validation` channel of generated SQuAD-format JSON lines, a tiny BERT built
from a config), train.py run as its own process on one CPU rank:
1. the first attempt tokenizes, keeps the tokenized data set beside its checkpoints, trains one step;
2. then restarts, alternately with the cache and without it (`tokenized_cache false`), each resuming from the
   newest checkpoint and training one more step, `--rounds` times each. Every run gets an empty Hugging Face
   datasets cache, as a restarted instance has: what a restart pays without the cache is tokenizing again.
Measured from each run's GOODPUT `startup` line: the start-up (process start to the first optimizer step) and its
phases. Printed: median start-up and tokenize phase of each arm and their ratio; JSON in --out.

    python benchmarks/bench_restart.py --hosts 2     # the same data end to end: `python -m local_mode run`

With --hosts 2 the run is the user's (a synthesized dev app, `local_mode data question-answering`, its train
channel replaced by the same generated SQuAD-like examples, a tiny BERT, 2 hosts, checkpoints every 10 steps, 30
steps), interrupted at step 15 as a spot reclaim (`--interrupt-at-step 15`: SIGTERM, a save, a new attempt of the
same job), `--rounds` times. Each run's goodput ledger gives, per instance, the cold start (attempt 1) and the
restart (attempt 2): `downloading`, then the start-up's parts: `launch` (the instance's start to train.py's: the
toolkit, its requirements install, torchrun), `imports`, `setup` (process group), `data_load`, `model_load`,
`tokenize` (the cache load on the restart), `layout`, `resume_verify`, `restore`, `other`. Printed: the median of
each part for both and their ratio; JSON in --out (bench_restart_hosts.json).
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
from pathlib import Path

from contract import goodput_line
from hftrain.run.goodput import STARTUP_PHASES

REPO = Path(__file__).resolve().parents[1]
TRAIN_PY = REPO / "training_code" / "train.py"


def write_train_parts(folder: Path, rows: int) -> float:
    """`rows` generated SQuAD-like examples as four JSON-lines objects (ShardedByS3Key gives each of 2 hosts two);
    returns their megabytes."""
    from local_mode import synthetic

    examples = synthetic.qa_examples(rows, seed=1, squad_lengths=True)
    for i in range(4):
        synthetic.write_jsonl(folder / f"part-{i}.jsonl", examples[i::4])
    return round(sum((folder / f"part-{i}.jsonl").stat().st_size for i in range(4)) / 1e6, 1)


def generate(base: Path, rows: int) -> dict:
    from local_mode import synthetic

    write_train_parts(base / "input" / "data" / "train", rows)
    synthetic.write_jsonl(base / "input" / "data" / "validation" / "part-0.jsonl",
                          synthetic.qa_examples(max(64, rows // 100), seed=2, squad_lengths=True))
    model = synthetic.build_model_dir("bert", base.parent / "tiny-bert")
    size = sum(p.stat().st_size for p in (base / "input" / "data").rglob("*.jsonl"))
    return {"rows": rows, "megabytes": round(size / 1e6, 1), "model": str(model)}


def run(base: Path, model: str, max_steps: int, cache: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "PYTHONPATH"))}
    hf_cache = Path(tempfile.mkdtemp(prefix="hf-cache-", dir=base.parent))  # a fresh instance's empty cache
    env.update({"SAGEMAKER_BASE_DIR": str(base), "HF_DATASETS_CACHE": str(hf_cache), "HF_HUB_OFFLINE": "1",
                "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                "PYTHONUNBUFFERED": "1", "TRANSFORMERS_VERBOSITY": "error"})
    args = ["--task", "question-answering", "--model_name_or_path", model, "--max_steps", str(max_steps),
            "--save_steps", "1", "--per_device_train_batch_size", "16", "--max_seq_length", "128",
            "--doc_stride", "32", "--eval_at_end", "false", "--tokenized_cache", str(cache).lower()]
    started = time.time()
    proc = subprocess.run([sys.executable, str(TRAIN_PY), *args], env=env, capture_output=True, text=True,
                          timeout=3600)
    shutil.rmtree(hf_cache, ignore_errors=True)
    if proc.returncode != 0:
        raise SystemExit(f"train.py failed ({proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    startup = next(report for report in map(goodput_line.parse_line, proc.stdout.splitlines())
                   if report and report.get("event") == goodput_line.STARTUP)
    kept = re.search(r"tokenized data set kept at \S+ \((\d+) file\(s\), ([0-9.]+) MB\)", proc.stderr + proc.stdout)
    return {"cache": cache, "max_steps": max_steps, "wall_seconds": round(time.time() - started, 2),
            "cache_megabytes": float(kept.group(2)) if kept else None,
            "startup_seconds": round(startup["first_step_at"] - startup["script_started_at"], 3),
            "phases": startup["startup"], "tokenize_cache": startup["tokenize_cache"]}


# the ledger's start-up parts per instance: the launch (instance start to train.py's start), the training code's own
# phases (hftrain/run/goodput.py), and the rest
START_PARTS = ("launch", *STARTUP_PHASES, "other")


def hosts_run(root: Path, cdk_out: Path, data: Path, spec: Path, n: int) -> dict:
    """One local run interrupted at step 15: per instance, attempt 1's and attempt 2's download and start-up parts."""
    from benchmarks import bench_faults

    work = root / f"run-{n}"
    run = bench_faults.cli("--cdk-out", str(cdk_out), "--work-dir", str(work), "run", str(spec), "--data", str(data),
                           "--interrupt-at-step", "15", timeout=1800)
    record = json.loads((work / "report" / "run.json").read_text())
    attempts = ((record.get("result") or {}).get("goodput") or {}).get("attempts") or []
    if run.returncode != 0 or len(attempts) != 2:
        raise SystemExit(f"run {n}: exit {run.returncode}, {len(attempts)} attempt(s), expected 2:\n"
                         f"{run.stdout[-3000:]}\n{run.stderr[-3000:]}")
    out = {}
    for name, attempt in zip(("cold", "restart"), attempts, strict=True):
        count = attempt["instance_count"]
        startup = attempt["details"].get("startup") or {}
        parts = {part: round(startup.get(part, 0.0) / count, 3) for part in START_PARTS}
        out[name] = {"downloading": round(attempt["parts"]["downloading"] / count, 3),
                     "startup": round(attempt["parts"]["startup"] / count, 3), "phases": parts,
                     "tokenize_cache": attempt.get("tokenize_cache")}
    shutil.rmtree(work / "sagemaker", ignore_errors=True)
    return out


def hosts_main(args: argparse.Namespace, rows: int, rounds: int) -> int:
    from benchmarks import bench_faults

    with tempfile.TemporaryDirectory(prefix="bench-restart-hosts-") as tmp:
        root = Path(tmp)
        cdk_out, data = root / "cdk-out", root / "data"
        bench_faults.synth(cdk_out)
        made = bench_faults.cli("--cdk-out", str(cdk_out), "data", "question-answering", str(data), "--rows", "64")
        if made.returncode != 0:
            raise SystemExit(f"local_mode data failed:\n{made.stderr[-3000:]}")
        train = next(data.glob("datasets/*/train"))
        for part in train.glob("*.jsonl"):
            part.unlink()
        megabytes = write_train_parts(train, rows)
        print(f"data: {rows:,} generated QA examples, {megabytes} MB of JSON lines, 2 hosts")
        spec = next(data.glob("question-answering*.json"))
        runs = []
        for n in range(rounds):
            runs.append(hosts_run(root, cdk_out, data, spec, n))
            cold, restart = runs[-1]["cold"], runs[-1]["restart"]
            print(f"run {n + 1}: cold start-up {cold['startup']:.1f} s + download {cold['downloading']:.1f} s; "
                  f"restart {restart['startup']:.1f} s + {restart['downloading']:.1f} s (cache "
                  f"{restart['tokenize_cache']}), per instance")

    def median(arm: str, key: str, phase: bool = False) -> float:
        return statistics.median(r[arm]["phases"][key] if phase else r[arm][key] for r in runs)

    rows_out = [("downloading", median("cold", "downloading"), median("restart", "downloading"))]
    rows_out += [(p, median("cold", p, True), median("restart", p, True)) for p in START_PARTS]
    rows_out.append(("start-up", median("cold", "startup"), median("restart", "startup")))
    print(f"\n| per instance, median of {rounds} run(s) | cold start | restart | cold / restart |\n|---|---|---|---|")
    for name, cold, restart in rows_out:
        ratio = f"{cold / restart:.1f}x" if restart > 0.05 else "-"
        print(f"| {name} | {cold:.2f} s | {restart:.2f} s | {ratio} |")
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / "bench_restart_hosts.json"
    path.write_text(json.dumps({"rows": rows, "megabytes": megabytes, "hosts": 2, "runs": runs,
                                "medians": {n: {"cold": c, "restart": r} for n, c, r in rows_out}}, indent=1))
    print(f"wrote {path}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2, help="restarts per arm, interleaved")
    parser.add_argument("--smoke", action="store_true", help="2,000 examples, one round")
    parser.add_argument("--hosts", type=int, choices=(1, 2), default=1,
                        help="2: end to end through python -m local_mode run on 2 hosts")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    args = parser.parse_args(argv)
    rows, rounds = (2000, 1) if args.smoke else (args.rows, args.rounds)
    if args.hosts == 2:
        return hosts_main(args, rows, rounds)
    with tempfile.TemporaryDirectory(prefix="bench-restart-") as tmp:
        base = Path(tmp) / "job"
        data = generate(base, rows)
        print(f"data: {data['rows']:,} generated QA examples, {data['megabytes']} MB of JSON lines")
        first = run(base, data["model"], 1, cache=True)
        print(f"first attempt: start-up {first['startup_seconds']:.1f} s (tokenize {first['phases']['tokenize']:.1f} s, "
              f"cache {first['tokenize_cache']}: {first['cache_megabytes']} MB kept with the checkpoints)")
        restarts = []
        step = 1
        for _ in range(rounds):
            for cache in (True, False):
                step += 1
                restarts.append(run(base, data["model"], step, cache=cache))
                r = restarts[-1]
                print(f"restart {'with' if cache else 'without'} the cache: start-up {r['startup_seconds']:.1f} s "
                      f"(tokenize {r['phases']['tokenize']:.2f} s, data_load {r['phases']['data_load']:.1f} s, "
                      f"cache {r['tokenize_cache']})")
    arms = {}
    for cache in (True, False):
        runs = [r for r in restarts if r["cache"] is cache]
        arms["with" if cache else "without"] = {
            "startup_seconds": statistics.median(r["startup_seconds"] for r in runs),
            "tokenize_seconds": statistics.median(r["phases"]["tokenize"] for r in runs), "runs": runs}
    with_, without = arms["with"], arms["without"]
    print(f"\n| restart start-up | median | tokenize phase |\n|---|---|---|\n"
          f"| without the cache | {without['startup_seconds']:.1f} s | {without['tokenize_seconds']:.2f} s |\n"
          f"| with the cache | {with_['startup_seconds']:.1f} s | {with_['tokenize_seconds']:.2f} s |\n"
          f"start-up without / with: {without['startup_seconds'] / with_['startup_seconds']:.2f}x; tokenize phase "
          f"without / with: {without['tokenize_seconds'] / max(with_['tokenize_seconds'], 1e-6):.1f}x")
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"data": data, "first": first, "arms": arms, "tokenize_seconds": without["tokenize_seconds"],
              "cache_load_seconds": with_["tokenize_seconds"]}
    path = args.out / f"bench_restart{'_smoke' if args.smoke else ''}.json"
    path.write_text(json.dumps(result, indent=1))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
