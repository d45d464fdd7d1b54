"""What trustworthy checkpoints cost: content hashing at save time and verification at resume.

A checkpoint directory of about `--gb` GB is written the way the Trainer writes one (safetensors weights,
a torch.save optimizer state twice their size, scheduler and trainer state). Then, in the same run:

* save: the time to write it (the baseline), and the time `write_node_marker` takes right after (hashing every
  file, page cache warm, as in the training code), with xxh3-128 and, for comparison, sha256;
* resume: `verify` (structure + every hash) with the page cache warm and after dropping the files from the
  cache (posix_fadvise DONTNEED: what a restarted instance reading its restored copy sees, bounded by disk).

* blocking (`--blocking`): how long a checkpoint save blocks the training loop, with the saves written behind
  the loop (`background_saves true`, the default) and without, in the same run: train.py under torchrun (one
  process, gloo, CPU) for the demo's tiny QA model and for a BERT-large-sized QA model (334M parameters, 4.0 GB
  with its AdamW state), two checkpoints each, the loop's blocked seconds from the GOODPUT `save` lines.

    python benchmarks/bench_checkpoints.py            # 1 GB
    python benchmarks/bench_checkpoints.py --gb 0.25
    python benchmarks/bench_checkpoints.py --blocking [--models demo large]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import tempfile
import time
from pathlib import Path

from contract.checkpoint_marker import checkpoint_name
from hftrain.checkpoint import manager as ck
from hftrain.checkpoint.storage import hash_file

REPO = Path(__file__).resolve().parents[1]

IDENTITY = {"task": "text-classification", "model_fingerprint": "0" * 32, "model": {"model_type": "bench"}}


def write_checkpoint(directory: Path, total_bytes: int) -> float:
    import torch
    from safetensors.torch import save_file

    directory.mkdir(parents=True)
    weights_bytes = total_bytes // 3  # Adam keeps two moments per weight: the optimizer is twice the model
    n = max(1, weights_bytes // 4 // (1 << 22))
    tensors = {f"layer.{i}.weight": torch.randn(1 << 22) for i in range(n)}
    state = {i: {"exp_avg": torch.randn(1 << 22), "exp_avg_sq": torch.rand(1 << 22)} for i in range(n)}
    started = time.perf_counter()  # the writes only, not making the tensors
    save_file(tensors, directory / "model.safetensors")
    torch.save({"state": state, "param_groups": [{"params": list(range(n)), "lr": 1e-4}]},
               directory / "optimizer.pt")
    torch.save({"last_epoch": 10}, directory / "scheduler.pt")
    (directory / "trainer_state.json").write_text(json.dumps({"global_step": 10}))
    torch.save({"cpu": torch.random.get_rng_state()}, directory / "rng_state.pth")
    return time.perf_counter() - started


def drop_cache(directory: Path) -> None:
    for path in directory.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def _parameters(weights: Path) -> int:
    from safetensors import safe_open

    with safe_open(str(weights), "pt") as handle:
        return sum(math.prod(handle.get_slice(name).get_shape()) for name in handle.keys())  # noqa: SIM118 - no dict


def blocking(models: list[str], steps: int, root: Path) -> list[dict]:
    """Per model: the loop's blocked seconds per save with background saves off (the baseline) and on."""
    from dataclasses import replace

    from benchmarks import bench_gpu, gpu_check, workloads

    rows = []
    for name in models:
        w = bench_gpu.GPU_WORKLOADS["question-answering"]
        if name == "demo":
            w = replace(w, config=bench_gpu.SMOKE_CONFIG["question-answering"])
        w = replace(w, batch_size=2, max_seq_length=128, train_examples=64, eval_examples=8,
                    extra={**w.extra, "doc_stride": 32})
        work = root / name
        model_dir = bench_gpu.build_model(w, work / "model")
        files = workloads.write_data(w.task, work / "data", train=w.train_examples, evaluation=w.eval_examples)
        weights = work / "model" / "model.safetensors"
        row: dict = {"model": name, "parameters": _parameters(weights)}
        for mode in ("blocking", "background"):
            hps = gpu_check.hyperparameters(w, model_dir, files, steps=steps, cuda=False, fsdp=False, seed=7,
                                            background_saves=mode == "background", saves=2)
            result = gpu_check.run_training(f"{name}-{mode}", hps, nproc=1, base=work / mode, out=work, cuda=False,
                                            timeout=1200)
            if result["returncode"] != 0:
                raise SystemExit(f"{name} {mode}: train.py failed (exit {result['returncode']}); log in {work}")
            row[mode] = result["save_seconds"]
            row[f"{mode}_complete"] = result["complete_seconds"]
            checkpoint = work / mode / "checkpoints" / checkpoint_name(steps)
            row["checkpoint_bytes"] = sum(p.stat().st_size for p in checkpoint.rglob("*") if p.is_file())
        rows.append(row)
    print(f"\nbench_checkpoints --blocking: the loop's blocked seconds per save (train.py, 1 process, CPU, "
          f"{os.cpu_count()} CPUs; {steps} steps, checkpoints at {steps // 2} and {steps})")
    print("| model | parameters | checkpoint | blocking saves (baseline) | background saves | ratio | background "
          "checkpoint complete after |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        base, ours = row["blocking"], row["background"]
        ratio = (sum(base) / sum(ours)) if ours and sum(ours) > 0 else float("nan")
        print(f"| {row['model']} | {row['parameters'] / 1e6:.1f}M | {row['checkpoint_bytes'] / 1e9:.2f} GB | "
              f"{', '.join(f'{x:.2f} s' for x in base)} | {', '.join(f'{x:.2f} s' for x in ours)} | "
              f"{ratio:.1f}x less | {', '.join(f'{x:.2f} s' for x in row['background_complete'])} |")
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, default=1.0)
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: a temp dir)")
    parser.add_argument("--blocking", action="store_true", help="the loop's blocked time per save, on and off")
    parser.add_argument("--models", nargs="+", choices=("demo", "large"), default=["demo", "large"])
    parser.add_argument("--steps", type=int, default=4, help="--blocking: steps per run (checkpoints at half, end)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="bench-ckpt-", dir=args.dir))
    if args.blocking:
        try:
            blocking(args.models, args.steps, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
        return 0
    try:
        d = root / "checkpoint-10"
        write_s = write_checkpoint(d, int(args.gb * (1 << 30)))
        size = sum(p.stat().st_size for p in d.rglob("*") if p.is_file())
        timings = {}
        for algorithm in ("xxh3_128", "sha256"):
            started = time.perf_counter()
            for path in sorted(d.rglob("*")):
                if path.is_file() and not ck.is_marker(path.name):
                    hash_file(str(path), algorithm)
            timings[algorithm] = time.perf_counter() - started
        started = time.perf_counter()
        marker = ck.write_node_marker(str(d), host="algo-1", hosts=["algo-1"], step=10, world_size=1,
                                      identity=IDENTITY, lineage="bench")
        marker_s = time.perf_counter() - started
        started = time.perf_counter()
        assert ck.verify(str(d), identity=IDENTITY).ok
        warm_s = time.perf_counter() - started
        drop_cache(d)
        started = time.perf_counter()
        assert ck.verify(str(d), identity=IDENTITY).ok
        cold_s = time.perf_counter() - started
        gb = size / (1 << 30)
        print(f"bench_checkpoints: checkpoint of {gb:.2f} GiB ({len(marker['files'])} files), {os.cpu_count()} CPUs")
        print(f"  save (torch.save/safetensors, no fsync)  {write_s:7.2f} s  {gb / write_s:6.2f} GiB/s   baseline")
        print(f"  + marker with xxh3-128 (page cache warm) {marker_s:7.2f} s  {gb / marker_s:6.2f} GiB/s   "
              f"overhead {marker_s / write_s:.1%} of the save")
        print(f"    hashing only: xxh3-128 {timings['xxh3_128']:.2f} s, sha256 {timings['sha256']:.2f} s "
              f"(sha256 / xxh3 = x{timings['sha256'] / timings['xxh3_128']:.1f})")
        print(f"  resume verification, cache warm          {warm_s:7.2f} s  {gb / warm_s:6.2f} GiB/s")
        print(f"  resume verification, cache dropped       {cold_s:7.2f} s  {gb / cold_s:6.2f} GiB/s   (disk-bound)")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
