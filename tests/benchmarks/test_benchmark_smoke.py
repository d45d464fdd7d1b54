"""The training benchmarks run from a fresh checkout (the packages `make setup` installs, no repository on PYTHONPATH)
and write their results: `--smoke` runs every arm of every task with tiny data, models and step counts."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_bench_goodput_prints_the_policy_table_for_both_fleets(tmp_path):
    """The simulator runs from a fresh checkout: the table, its JSON rows, the sources (its model:
    tests/benchmarks/test_goodput_sim.py; its cross-check against local runs: test_goodput_replay.py)."""
    proc = _run("bench_goodput.py", "--smoke", "--sources", cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "## 16 x ml.p4d.24xlarge" in proc.stdout and "## 4 x ml.g5.12xlarge" in proc.stdout
    assert proc.stdout.count("| 4 | 6 + auto interval (estimated M) |") == 2  # both fleets
    assert "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/spot-instance-termination-notices.html" in proc.stdout
    assert "16 x ml.p4d.24xlarge, 1 interruption(s)/day, last policy, mid costs: " in proc.stdout
    proc = _run("bench_goodput.py", "--smoke", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(rows) == 2 * 4 * 6
    for row in rows:
        assert {"fleet", "interruptions_per_day", "policy", "goodput", "lost_instance_hours", "parts"} <= set(row)
        assert row["goodput_low_costs"] >= row["goodput"] >= row["goodput_high_costs"]
        assert sum(row["parts"].values()) == pytest.approx(1.0, abs=1e-3)


def test_bench_preflight_smoke(tmp_path):
    """Prepare's data check on a small moto channel: both arms run, the added time and the bytes read print."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # as `make bench` runs it
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "bench_preflight.py"), "--objects", "20",
                           "--object-mb", "0.5", "--repeat", "1"], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "Prepare with data check" in proc.stdout and "Prepare without (baseline)" in proc.stdout
    assert "added by the data check: " in proc.stdout and "read 1.05 MB of 0.01 GB" in proc.stdout
