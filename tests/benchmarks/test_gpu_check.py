"""benchmarks/gpu_check.py, the one-run GPU check (issue 38): its log reading, and its CPU smoke run (the two
torchrun runs through train.py: gloo, FSDP2 on two CPU ranks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import gpu_check

REPO = Path(__file__).resolve().parents[2]

LOG = """[setup] train.py started: importing torch and transformers, then joining the other processes
[setup] question-answering on 1 host(s), 1 process(es), device cuda
NCCL version 2.28.9+cuda13.0
[train] step 15/60 (25%) loss=4.8958 lr=3.83e-05 samples/s=115.3 elapsed=0:00:04 eta=0:00:12
[train] step 30/60 (50%) loss=4.8827 lr=2.58e-05 samples/s=258.0 elapsed=0:00:06 eta=0:00:04
GOODPUT {"v":1,"event":"save_begin","step":30}
GOODPUT {"v":1,"event":"save","step":30,"save_seconds_last":10.5398}
[train] step 45/60 (75%) loss=4.8671 lr=1.33e-05 samples/s=37.0 elapsed=0:00:08 eta=0:00:02
[train] step 60/60 (100%) loss=4.8891 lr=8.33e-07 samples/s=318.0 elapsed=0:00:09 eta=0:00:00
GOODPUT {"v":1,"event":"save","step":60,"save_seconds_last":8.2264}
[eval] step 60/60 eval_loss=5.1721 eval_exact_match=0.0000 eval_f1=5.3278
"""


def test_the_log_gives_the_steady_rate_the_saves_and_the_nccl_line():
    parsed = gpu_check.parse_log(LOG)
    assert parsed["windows"] == [(15, 115.3), (30, 258.0), (45, 37.0), (60, 318.0)]
    assert parsed["samples_per_s"] == 258.0  # the median after the first window (CUDA start-up)
    assert parsed["save_seconds"] == [10.5398, 8.2264]
    assert parsed["nccl_line"] == "NCCL version 2.28.9+cuda13.0"
    assert parsed["setup_line"].endswith("device cuda")
    result = {"returncode": 0, "timed_out": False, **parsed, "final_model": True, "metrics": {"eval_f1": 5.3},
              "fsdp_shards": False, "checkpoint_entries": ["checkpoint-60/model.safetensors"]}
    assert gpu_check.check_training(result, cuda=True, fsdp=False) == []
    problems = gpu_check.check_training(result, cuda=True, fsdp=True)
    assert len(problems) == 1 and "FSDP did not engage" in problems[0]
    no_nccl = {**result, "nccl_line": None, "setup_line": "[setup] qa on 1 host(s), 1 process(es), device cpu"}
    assert len(gpu_check.check_training(no_nccl, cuda=True, fsdp=False)) == 2


@pytest.mark.slow
def test_the_smoke_run_trains_through_torchrun_with_and_without_fsdp(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "OUT")}
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--smoke", "--parts", "qa-nccl",
                           "qa-blocking", "qa-fsdp", "--out", str(tmp_path / "out")], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "gpu_check.json").read_text())
    runs = report["runs"]
    assert set(runs) == {"qa-nccl", "qa-blocking", "qa-fsdp"} and all(not r["problems"] for r in runs.values())
    # two checkpoints each (middle, end): written behind the loop in qa-nccl, blocking in qa-blocking
    assert len(runs["qa-nccl"]["save_seconds"]) == 2 and len(runs["qa-nccl"]["complete_seconds"]) == 2
    assert len(runs["qa-blocking"]["save_seconds"]) == 2 and runs["qa-blocking"]["complete_seconds"] == []
    assert runs["qa-fsdp"]["fsdp_shards"] and runs["qa-fsdp"]["nproc_per_node"] == 2
    assert runs["qa-nccl"]["hyperparameters"]["ddp_backend"] == "gloo"  # CPU; nccl, bf16 and tf32 on CUDA
    assert "| qa-fsdp | ok |" in (tmp_path / "out" / "gpu_check.md").read_text()


def test_without_cuda_it_says_so_and_skips(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here")
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "gpu_check.py"), "--out", str(tmp_path)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0 and "no CUDA device here" in proc.stdout
