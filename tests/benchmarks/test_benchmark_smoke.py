"""The training benchmarks run from a fresh checkout (the packages `make setup` installs, no repository on PYTHONPATH)
and write their results: `--smoke` runs every arm of every task with tiny data, models and step counts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _run(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update({"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                "HF_DATASETS_CACHE": str(cwd / "hf-cache"), "TOKENIZERS_PARALLELISM": "false"})
    env.pop("OUT", None)
    return subprocess.run([sys.executable, str(REPO / "benchmarks" / script), *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


def test_bench_training_smoke(tmp_path):
    proc = _run("bench_training.py", "--smoke", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads((tmp_path / "out" / "bench_training_smoke.json").read_text())
    assert set(data["results"]) == {"question-answering", "text-classification", "summarization"}
    for result in data["results"].values():
        assert set(result["arms"]) == {"hf-default", "hf-best", "ours"}
        for arm in ("hf-default", "hf-best", "ours"):
            assert result["arms"][arm]["samples_per_cpu_s"]["median"] > 0
            assert "eval_loss" in result["learning"][arm]
        assert result["ratio_vs_hf-best"]["median"] > 0
    qa = data["results"]["question-answering"]["arms"]
    assert qa["hf-default"]["padded_share"] > qa["hf-best"]["padded_share"]  # run_qa's default pads to 384
    table = (tmp_path / "out" / "bench_training_smoke.md").read_text()
    assert "| question-answering | ours |" in table and "ours / hf-best" in table


def test_bench_gpu_smoke_and_skip_without_cuda(tmp_path):
    proc = _run("bench_gpu.py", "--smoke", "--hf-best-workers", "1", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    data = json.loads((tmp_path / "out" / "bench_gpu_smoke.json").read_text())
    qa = data["results"]["question-answering"]
    assert set(qa) == {"hf-best", "hf-best+workers", "ours", "ours-padded"}
    assert all(arm["steps"] == 2 and 0 < arm["rows"] <= 2 * 4 for arm in qa.values())  # the measured steps only
    assert qa["ours"]["packed"] is True and qa["ours"]["padded_share"] == 0.0  # the padding-free path ran
    assert qa["ours-padded"]["packed"] is False
    assert qa["ours"]["model_flops"] > 0 and qa["ours"]["layer_parameters"]["layers"] == 2
    assert set(data["results"]["summarization"]) == {"hf-best", "hf-best+workers", "ours"}
    assert "| question-answering | ours (padding-free) |" in (tmp_path / "out" / "bench_gpu_smoke.md").read_text()
    import torch

    if not torch.cuda.is_available():  # what `make bench` does on a machine without a GPU
        proc = _run("bench_gpu.py", cwd=tmp_path)
        assert proc.returncode == 0 and "no CUDA device here: skipped" in proc.stdout


def test_bench_goodput_prints_the_policy_table_and_replays_known_interruptions(tmp_path):
    """The simulator runs from a fresh checkout (its cross-check against a run: tests/e2e/test_local_mode.py)."""
    from benchmarks import bench_goodput

    proc = _run("bench_goodput.py", "--smoke", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert proc.stdout.count("| 4 | auto, cache, MaxRuntime |") == 2  # both cost profiles
    assert "auto vs fixed" in proc.stdout and "detection vs MaxRuntime" in proc.stdout
    # the model on known interruptions: an abrupt one at 130 s of work loses the 30 s since the checkpoint at 100
    # and the 4 s the attempt is billed until its processes are gone
    costs = bench_goodput.Costs(download=1, startup=10, tokenize=0, cache_load=0, restore=2, save=1, eval=0,
                                upload=3, stop=4)
    parts = bench_goodput.replay(costs, work=300, every=50, interruptions=[130], notice=False)
    assert parts["replayed"] == 30 + 4 and parts["startup"] == 10 + 12 and parts["checkpointing"] == 6
    assert bench_goodput.replay(costs, work=300, every=50, interruptions=[130], notice=True)["replayed"] == 4
    # many interruptions a day: auto saves more often than every 30 minutes and loses less
    busy = bench_goodput.Scenario(rate_per_day=24, stall_per_day=0)
    fixed = bench_goodput.simulate(busy, bench_goodput.P4D, samples=60)
    auto = bench_goodput.simulate(bench_goodput.Scenario(rate_per_day=24, stall_per_day=0, interval="auto"),
                                  bench_goodput.P4D, samples=60)
    assert auto["interval_minutes"] < 30 and auto["goodput"] > fixed["goodput"]


def test_bench_preflight_smoke(tmp_path):
    """Prepare's data check on a small moto channel: both arms run, the added time and the bytes read print."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as `make bench` runs it
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_preflight.py"), "--objects", "20",
                           "--object-mb", "0.5", "--repeat", "1"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Prepare with data check" in proc.stdout and "Prepare without (baseline)" in proc.stdout
    assert "added by the data check: " in proc.stdout and "read 1.05 MB of 0.01 GB" in proc.stdout
