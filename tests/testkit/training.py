"""Helpers for the training-code tests: lay out a job's base dir, run train.py (in or out of process)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from local_mode import synthetic as synth

REPO = Path(__file__).resolve().parents[2]
TRAIN_PY = REPO / "training_code" / "train.py"


@dataclass
class Run:
    returncode: int
    output: str
    base: Path

    @property
    def metrics(self) -> dict:
        return json.loads((self.base / "output" / "data" / "metrics.json").read_text())

    @property
    def metric_lines(self) -> dict:
        out = {}
        for line in self.output.splitlines():
            if line.startswith("METRIC "):
                name, _, value = line[len("METRIC "):].partition("=")
                out[name] = float(value)
        return out


def layout_job(base: Path, *, train=None, validation=None, extra_channels: dict | None = None) -> Path:
    """A SAGEMAKER_BASE_DIR with train/validation channels of JSON lines."""
    data = base / "input" / "data"
    if train is not None:
        synth.write_jsonl(data / "train" / "train.jsonl", train)
    if validation is not None:
        synth.write_jsonl(data / "validation" / "validation.jsonl", validation)
    for name, files in (extra_channels or {}).items():
        (data / name).mkdir(parents=True, exist_ok=True)
        for src in files:
            target = data / name / Path(src).name
            if Path(src).is_dir():
                import shutil

                shutil.copytree(src, target)
            else:
                target.write_bytes(Path(src).read_bytes())
    return base


def to_argv(hps: dict) -> list[str]:
    argv = []
    for key, value in hps.items():
        argv += [f"--{key}", str(value)]
    return argv


def subprocess_env(base: Path) -> dict:
    env = dict(os.environ)
    for var in list(env):
        if var.startswith("SM_"):
            env.pop(var)
    env.update({
        "SAGEMAKER_BASE_DIR": str(base),
        "HF_DATASETS_CACHE": str(base / "hf-cache"),
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "TOKENIZERS_PARALLELISM": "false",
        "PYTHONUNBUFFERED": "1",
    })
    return env


def start_train(base: Path, hps: dict) -> subprocess.Popen:
    """train.py as its own process (for kill/SIGTERM tests); stdout+stderr as text lines."""
    return subprocess.Popen(
        ["nice", "-n", "5", sys.executable, str(TRAIN_PY), *to_argv(hps)],
        env=subprocess_env(base), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
    )


def wait_for(proc, needle: str, timeout: float = 180) -> list[str]:
    """Read lines until one contains `needle`; kill the process and fail on timeout (never hang)."""
    lines, deadline = [], time.time() + timeout
    while True:
        remaining = deadline - time.time()
        ready = select.select([proc.stdout], [], [], max(0.0, remaining))[0] if remaining > 0 else []
        if not ready:
            proc.kill()
            pytest.fail(f"no {needle!r} within {timeout}s:\n{''.join(lines)[-3000:]}")
        line = proc.stdout.readline()
        if not line:
            pytest.fail(f"process ended before {needle!r}:\n{''.join(lines)[-3000:]}")
        lines.append(line)
        if needle in line:
            return lines


def finish(proc, timeout: float = 240) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _ = proc.communicate()
        pytest.fail(f"still running after {timeout}s:\n{out[-3000:]}")
    return out
