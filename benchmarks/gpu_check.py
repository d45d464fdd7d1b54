"""The GPU paths in one run (< 5 minutes on one H200): QA through torchrun on NCCL, FSDP, and bench_gpu.py.

    python benchmarks/gpu_check.py --out DIR           # on a CUDA machine (benchmarks/gpu_check.sh sets it up)
    python benchmarks/gpu_check.py --smoke --out DIR   # CPU, tiny model and data, gloo: checks the driver

Everything goes through the command lines, as a job runs them, not through the training code's modules:

1. qa-nccl: training_code/train.py under torchrun as the sagemaker-training toolkit launches it (`torchrun
   --nnodes 1 --nproc_per_node N --master_addr .. --master_port .. train.py --key value ...`), one process on
   the NCCL backend (`ddp_backend nccl`), extractive QA on a BERT-large-sized model built from a config (random
   weights, no download; the bench_gpu.py QA workload: 24 layers, 1024 wide, 335M parameters, max_seq_length
   384, doc_stride 128, batch 32), bf16 and tf32, final evaluation (SQuAD F1) and model write.
2. qa-blocking: qa-nccl with `background_saves false`: every checkpoint save blocks the loop for its whole time
   (qa-nccl writes its two checkpoints, in the middle and at the end, behind the loop: the loop waits only for the
   copy off the GPU; the table shows both the loop's blocked seconds and when each checkpoint was complete).
3. qa-fsdp: the same with `fsdp "full_shard auto_wrap"` and FSDP2 (`fsdp_config {"version": 2, ...}`, the
   pipeline's default), one sharded checkpoint in the middle (its blocking save time from the GOODPUT lines)
   and the consolidated final model.
4. bench: benchmarks/bench_gpu.py (this code at its defaults against the Hugging Face examples' best flags,
   BERT-large-sized QA and BART-large-sized summarization, MFU) with --steps/--warmup from here, and the
   hf-best+workers arm (the examples' best flags plus the data-loader workers ours uses).

Per training run: samples/s (the `[train] ... samples/s=` lines: the median of the windows after the first,
which holds CUDA start-up), peak GPU memory (nvidia-smi's memory.used, polled every 0.2 s: the whole process,
CUDA context and the allocator's cache included, so above bench_gpu's torch.cuda.max_memory_allocated), the
final eval metrics, whether NCCL initialised (NCCL_DEBUG=VERSION prints its version line), and for FSDP that
the checkpoint holds FSDP shards. MFU of a torchrun run = samples/s x model FLOPs per training sample / peak,
with FLOPs per sample from bench_gpu's `ours` QA arm (same model, same training rows, its formula: 6 x N per
real token + 12 x layers x d_model x L^2 per example of L tokens); without the bench, no MFU.

Results: a table on stdout, gpu_check.json and gpu_check.md in --out; every run's log in --out too. A part that
fails is recorded and the next one still runs; the exit code is 1 when any part failed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import replace
from pathlib import Path

from contract import goodput_line, progress_lines

REPO = Path(__file__).resolve().parents[1]
TRAIN_PY = REPO / "training_code" / "train.py"
BENCH_GPU = REPO / "benchmarks" / "bench_gpu.py"
PEAK_SOURCE = "NVIDIA H200 datasheet: 989 TFLOP/s dense BF16 tensor (1,979 with sparsity), SXM"
FSDP_CONFIG = {"version": 2, "transformer_layer_cls_to_wrap": ["BertLayer"]}
PARTS = ("qa-nccl", "qa-blocking", "qa-fsdp", "bench")
TORCHRUN_PARTS = ("qa-nccl", "qa-blocking", "qa-fsdp")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cuda_info() -> dict:
    import torch

    info = {"torch": torch.__version__, "cuda": torch.cuda.is_available()}
    try:
        import transformers

        info["transformers"] = transformers.__version__
    except ImportError:  # pragma: no cover
        pass
    if info["cuda"]:
        info["device"] = torch.cuda.get_device_name()
        info["nccl"] = ".".join(map(str, torch.cuda.nccl.version()))
        info["bf16_supported"] = bool(torch.cuda.is_bf16_supported())
    return info


class MemoryPoller:
    """Peak of nvidia-smi's memory.used (MiB) on the first GPU while a run is going; None without nvidia-smi."""

    def __init__(self) -> None:
        self.peak: float | None = None
        self._proc: subprocess.Popen | None = None
        self._thread: threading.Thread | None = None

    def __enter__(self) -> MemoryPoller:
        if shutil.which("nvidia-smi") is None:
            return self
        self._proc = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-lms", "200", "-i", "0"],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()
        return self

    def _read(self) -> None:
        for line in self._proc.stdout:
            try:
                value = float(line.strip())
            except ValueError:
                continue
            self.peak = value if self.peak is None else max(self.peak, value)

    def __exit__(self, *exc) -> None:
        if self._proc is not None:
            self._proc.terminate()
            self._proc.wait(timeout=10)
            self._thread.join(timeout=5)


def prepare(work: Path, smoke: bool, train_examples: int, eval_examples: int):
    """(workload, model dir, data files): bench_gpu.py's QA workload, the model built from its config."""
    from benchmarks import bench_gpu, workloads

    w = bench_gpu.GPU_WORKLOADS["question-answering"]
    if smoke:
        w = replace(w, config=bench_gpu.SMOKE_CONFIG["question-answering"], batch_size=4, max_seq_length=256)
    w = replace(w, train_examples=train_examples, eval_examples=eval_examples)
    model_dir = bench_gpu.build_model(w, work / "model-qa")
    files = workloads.write_data(w.task, work / "data-qa", train=w.train_examples, evaluation=w.eval_examples)
    return w, model_dir, files


def hyperparameters(w, model_dir: Path, files: dict, *, steps: int, cuda: bool, fsdp: bool, seed: int,
                    background_saves: bool = True, saves: int = 2) -> dict:
    # `saves` checkpoints evenly spaced, the last at the end: the blocking time of a save, behind the loop or not
    hps = {"task": w.task, "model_name_or_path": model_dir, "train_path": files["train"].parent,
           "validation_path": files["validation"].parent, "max_steps": steps,
           "per_device_train_batch_size": w.batch_size, "learning_rate": w.learning_rate, "seed": seed,
           "max_seq_length": w.max_seq_length, "logging_steps": max(1, steps // 4), "save_steps": max(1, steps // max(1, saves)),
           "resume": "false", "background_saves": str(background_saves).lower(), **w.extra}
    if cuda:
        hps.update({"ddp_backend": "nccl", "precision": "bf16", "tf32": "true"})
    else:
        hps.update({"ddp_backend": "gloo", "padding_free": "true"})  # on CPU auto is off: the packed path anyway
    if fsdp:
        hps.update({"fsdp": "full_shard auto_wrap", "fsdp_config": json.dumps(FSDP_CONFIG)})
    return hps


def torchrun_command(hps: dict, nproc: int) -> list[str]:
    """The toolkit's launch (sagemaker_training.torch_distributed), the master on this machine."""
    argv = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "1", "--nproc_per_node", str(nproc),
            "--master_addr", "127.0.0.1", "--master_port", str(free_port()), str(TRAIN_PY)]
    for key, value in hps.items():
        argv += [f"--{key}", str(value)]
    return argv


def job_env(base: Path, cuda: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SM_")}
    env.update({"SAGEMAKER_BASE_DIR": str(base), "HF_DATASETS_CACHE": str(base / "hf-cache"), "HF_HUB_OFFLINE": "1",
                "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false",
                "PYTHONUNBUFFERED": "1", "NCCL_DEBUG": "VERSION"})
    if not cuda:
        env["OMP_NUM_THREADS"] = "1"
    return env


def parse_log(log: str) -> dict:
    """Window rates, GOODPUT save times, the NCCL version line and the setup line from a run's output."""
    windows = [w for w in map(progress_lines.parse_train_line, log.splitlines()) if w]
    saves, complete = [], []
    for line in log.splitlines():
        record = goodput_line.parse_line(line)
        if record and record.get("event") == goodput_line.SAVE and record.get("save_seconds_last") is not None:
            saves.append(float(record["save_seconds_last"]))
        if record and record.get("event") == goodput_line.COMPLETE:
            complete.append(float(record.get("complete_seconds_last") or 0.0))
    nccl = re.search(r"NCCL version [^\s]+", log)
    setup = re.search(r"^\[setup\] .* process\(es\), device \w+.*$", log, re.M)
    steady = [rate for _, rate in windows[1:]] or [rate for _, rate in windows]
    return {"windows": windows, "samples_per_s": statistics.median(steady) if steady else None,
            "save_seconds": saves, "complete_seconds": complete, "nccl_line": nccl.group(0) if nccl else None,
            "setup_line": setup.group(0) if setup else None}


def run_training(name: str, hps: dict, *, nproc: int, base: Path, out: Path, cuda: bool, timeout: float) -> dict:
    base.mkdir(parents=True, exist_ok=True)
    command = torchrun_command(hps, nproc)
    print(f"\n== {name}: {' '.join(command[1:])}", flush=True)
    started = time.time()
    lines: list[str] = []
    with MemoryPoller() as memory, (out / f"{name}.log").open("w") as log_file:
        proc = subprocess.Popen(command, env=job_env(base, cuda), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, bufsize=1, cwd=base, start_new_session=True)
        timer = threading.Timer(timeout, os.killpg, (proc.pid, signal.SIGKILL))  # torchrun and its workers
        timer.start()
        for line in proc.stdout:
            lines.append(line)
            log_file.write(line)
            log_file.flush()
            if progress_lines.is_window_line(line) or line.startswith(("ERROR", "Traceback")) or "NCCL version" in line:
                print(f"  {line.rstrip()}", flush=True)
        proc.wait()
        timer.cancel()
    log = "".join(lines)
    result = {"name": name, "returncode": proc.returncode, "wall_s": round(time.time() - started, 1),
              "timed_out": proc.returncode == -9, **parse_log(log)}
    if memory.peak is not None:
        result["peak_memory_gb"] = memory.peak / 1024
    metrics_file = base / "output" / "data" / "metrics.json"
    if metrics_file.exists():
        metrics = json.loads(metrics_file.read_text())
        result["metrics"] = {k: v for k, v in metrics.items() if k.startswith(("eval_", "train_"))}
    checkpoints = base / "checkpoints"
    result["checkpoint_entries"] = sorted(
        f"{c.name}/{p.name}" for c in checkpoints.glob("checkpoint-*") for p in c.iterdir()) if checkpoints.exists() else []
    result["fsdp_shards"] = any("pytorch_model_fsdp" in entry for entry in result["checkpoint_entries"])
    result["final_model"] = (base / "model" / "model.safetensors").exists()
    if proc.returncode != 0:
        print("  ... last lines:\n" + "".join(lines[-40:]), flush=True)
    return result


def check_training(result: dict, *, cuda: bool, fsdp: bool) -> list[str]:
    """What a run must show; each problem as a sentence."""
    problems = []
    if result["returncode"] != 0:
        problems.append(f"exit code {result['returncode']}{' (timed out)' if result['timed_out'] else ''}")
        return problems
    if result["samples_per_s"] is None:
        problems.append("no [train] samples/s line")
    if not result["final_model"]:
        problems.append("no final model (model/model.safetensors)")
    if "eval_f1" not in result.get("metrics", {}):
        problems.append("no eval_f1 in metrics.json")
    if cuda and not result["nccl_line"]:
        problems.append("NCCL never initialised (no 'NCCL version' line with NCCL_DEBUG=VERSION)")
    if cuda and (not result["setup_line"] or "device cuda" not in result["setup_line"]):
        problems.append(f"not on the GPU: {result['setup_line']!r}")
    background = result.get("hyperparameters", {}).get("background_saves") == "true" and not fsdp
    if background and len(result.get("complete_seconds", [])) != len(result.get("save_seconds", [])):
        problems.append(f"{len(result.get('save_seconds', []))} save(s) began, "
                        f"{len(result.get('complete_seconds', []))} completed behind the loop")
    if fsdp and not result["fsdp_shards"]:
        problems.append(f"FSDP did not engage: the checkpoint holds no FSDP shards ({result['checkpoint_entries']})")
    return problems


def run_bench(args, out: Path, timeout: float) -> dict:
    command = [sys.executable, str(BENCH_GPU), "--out", str(out / "bench")]
    command += ["--smoke"] if args.smoke else ["--steps", str(args.bench_steps), "--warmup", str(args.bench_warmup)]
    if args.bench_tasks:
        command += ["--tasks", *args.bench_tasks]
    if args.bench_hf_workers:
        command += ["--hf-best-workers", str(args.bench_hf_workers)]
    print(f"\n== bench: {' '.join(command[1:])}", flush=True)
    started = time.time()
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "PYTHONUNBUFFERED": "1"}
    env.pop("OUT", None)
    try:
        proc = subprocess.run(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                              timeout=timeout, cwd=REPO)
        code, output = proc.returncode, proc.stdout
    except subprocess.TimeoutExpired as err:
        code, output = -9, (err.stdout or b"").decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
    (out / "bench.log").write_text(output)
    print("".join(f"  {line}\n" for line in output.splitlines()[-30:]), flush=True)
    result = {"returncode": code, "wall_s": round(time.time() - started, 1), "timed_out": code == -9}
    name = "bench_gpu_smoke.json" if args.smoke else "bench_gpu.json"
    if (out / "bench" / name).exists():
        result["data"] = json.loads((out / "bench" / name).read_text())
    return result


def flops_per_sample(bench: dict | None) -> float | None:
    """Model FLOPs per training row of the `ours` QA arm of bench_gpu.py (its formula), None without it."""
    arm = ((bench or {}).get("data") or {}).get("results", {}).get("question-answering", {}).get("ours")
    if not arm or not arm.get("rows"):
        return None
    return arm["model_flops"] / arm["rows"]


def render(report: dict) -> str:
    info, peak = report["environment"], report["peak_tflops"]
    lines = [f"gpu_check: {info.get('device', 'CPU (smoke)')}, torch {info['torch']}, transformers "
             f"{info.get('transformers')}, NCCL {info.get('nccl', 'n/a')}; peak {peak} TFLOP/s ({report['peak_source']})",
             "", "| run | result | samples/s | MFU | peak GPU memory (nvidia-smi) | eval F1 | eval loss | save: loop blocked s "
             "| save: complete after s | wall s |",
             "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name in TORCHRUN_PARTS:
        r = report["runs"].get(name)
        if r is None:
            continue
        metrics = r.get("metrics", {})
        rate = f"{r['samples_per_s']:.1f}" if r.get("samples_per_s") else "n/a"
        mfu = f"{r['mfu']:.1%}" if r.get("mfu") is not None else "n/a"
        mem = f"{r['peak_memory_gb']:.1f} GiB" if r.get("peak_memory_gb") is not None else "n/a"
        f1 = f"{metrics['eval_f1']:.1f}" if "eval_f1" in metrics else "n/a"
        loss = f"{metrics['eval_loss']:.3f}" if "eval_loss" in metrics else "n/a"
        saves = ", ".join(f"{s:.2f}" for s in r.get("save_seconds", [])) or "-"
        complete = ", ".join(f"{s:.2f}" for s in r.get("complete_seconds", [])) or "-"
        status = "ok" if not r["problems"] else "FAILED: " + "; ".join(r["problems"])
        lines.append(f"| {name} | {status} | {rate} | {mfu} | {mem} | {f1} | {loss} | {saves} | {complete} | "
                     f"{r['wall_s']} |")
    bench = report.get("bench")
    if bench is not None:
        lines += ["", f"bench_gpu.py: exit code {bench['returncode']}, {bench['wall_s']} s"]
        table = bench.get("table")
        if table:
            lines += ["", table]
        for task, arms in (report.get("bench_results") or {}).items():
            if "ours" in arms:
                ratios = [f"{arms['ours']['samples_per_s'] / arms[b]['samples_per_s']:.2f}x vs {b}"
                          for b in ("hf-best", "hf-best+workers") if b in arms]
                lines.append(f"{task}: ours {', '.join(ratios)}")
    if report.get("flops_per_sample") and any(r.get("mfu") is not None for r in report["runs"].values()):
        lines += ["", f"MFU of the torchrun runs: {report['flops_per_sample'] / 1e9:.1f} GFLOP per training sample "
                  "(bench_gpu.py's `ours` QA arm: model FLOPs / rows) x samples/s / peak."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--smoke", action="store_true", help="CPU: tiny model and data, gloo, a few steps")
    parser.add_argument("--out", type=Path, default=None, help="results (default $OUT, else benchmarks/results/)")
    parser.add_argument("--parts", nargs="+", choices=PARTS, default=list(PARTS))
    parser.add_argument("--steps", type=int, default=60, help="optimizer steps of each torchrun run (default 60)")
    parser.add_argument("--saves", type=int, default=2, help="checkpoints per torchrun run, the last at the end")
    parser.add_argument("--train-examples", type=int, default=4096, help="QA training examples (bench_gpu's 4096)")
    parser.add_argument("--eval-examples", type=int, default=256)
    parser.add_argument("--bench-steps", type=int, default=30)
    parser.add_argument("--bench-warmup", type=int, default=10)
    parser.add_argument("--bench-tasks", nargs="+", default=None, help="bench_gpu.py --tasks (default: all)")
    parser.add_argument("--bench-hf-workers", type=int, default=4,
                        help="bench_gpu.py --hf-best-workers (0: no hf-best+workers arm)")
    parser.add_argument("--run-timeout", type=float, default=150, help="seconds per torchrun run")
    parser.add_argument("--bench-timeout", type=float, default=300)
    parser.add_argument("--peak-tflops", type=float, default=989.0)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv)

    out = args.out or Path(os.environ.get("OUT") or REPO / "benchmarks" / "results")
    out.mkdir(parents=True, exist_ok=True)
    info = cuda_info()
    cuda = info["cuda"] and not args.smoke
    if not cuda and not args.smoke:
        print("gpu_check: no CUDA device here (run it on a GPU machine; --smoke checks the driver on CPU)")
        return 0
    if args.smoke:
        args.steps = min(args.steps, 4)
        args.train_examples, args.eval_examples = min(args.train_examples, 48), min(args.eval_examples, 8)
    print(f"gpu_check: {json.dumps(info)}", flush=True)
    started = time.time()
    work = Path(tempfile.mkdtemp(prefix="gpu-check-"))
    report: dict = {"environment": info, "peak_tflops": args.peak_tflops, "peak_source": PEAK_SOURCE,
                    "settings": {k: str(v) for k, v in vars(args).items()}, "runs": {}}
    failed = False
    if set(TORCHRUN_PARTS) & set(args.parts):
        w, model_dir, files = prepare(work, args.smoke, args.train_examples, args.eval_examples)
        print(f"prepared the model and data in {time.time() - started:.0f} s", flush=True)
        for name in TORCHRUN_PARTS:
            if name not in args.parts:
                continue
            fsdp = name == "qa-fsdp"
            hps = hyperparameters(w, model_dir, files, steps=args.steps, cuda=cuda, fsdp=fsdp, seed=args.seed,
                                  background_saves=name != "qa-blocking", saves=args.saves)
            nproc = 2 if (fsdp and not cuda) else 1  # FSDP engages on CPU with 2 gloo ranks only (hftrain/parallel/fsdp.py)
            result = run_training(name, hps, nproc=nproc, base=work / name, out=out, cuda=cuda,
                                  timeout=args.run_timeout)
            result["hyperparameters"] = {k: str(v) for k, v in hps.items()}
            result["nproc_per_node"] = nproc
            result["problems"] = check_training(result, cuda=cuda, fsdp=fsdp)
            failed |= bool(result["problems"])
            report["runs"][name] = result
    if "bench" in args.parts:
        bench = run_bench(args, out, args.bench_timeout)
        if bench["returncode"] != 0 or "data" not in bench:
            failed = True
        md = out / "bench" / ("bench_gpu_smoke.md" if args.smoke else "bench_gpu.md")
        if md.exists():
            bench["table"] = md.read_text().strip()
        report["bench"] = {k: v for k, v in bench.items() if k != "data"}
        report["bench_results"] = (bench.get("data") or {}).get("results")
        report["flops_per_sample"] = flops_per_sample(bench)
        for r in report["runs"].values():
            if cuda and report["flops_per_sample"] and r.get("samples_per_s"):
                r["mfu"] = r["samples_per_s"] * report["flops_per_sample"] / (args.peak_tflops * 1e12)
    report["wall_s"] = round(time.time() - started, 1)
    table = render(report)
    print("\n" + table + f"\n\ngpu_check: {report['wall_s']} s, {'FAILED' if failed else 'all parts ok'}", flush=True)
    (out / "gpu_check.md").write_text(table + "\n")
    (out / "gpu_check.json").write_text(json.dumps(report, indent=2, sort_keys=True, default=str) + "\n")
    shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
