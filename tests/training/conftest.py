"""Fixtures for the training-code tests: tiny models built once per session, and a way to run train.py."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import synth  # noqa: E402

REPO = HERE.parents[1]
TRAIN_PY = REPO / "training_code" / "train.py"


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """kind -> directory of a tiny pretrained-style model (bert, roberta, bart, t5; `-small` for 128 wide),
    built lazily."""
    root = tmp_path_factory.mktemp("tiny-models")

    class Models(dict):
        def __missing__(self, key):  # "bert", or "bart-small" for the next size up
            kind, _, size = key.partition("-")
            path = synth.build_model_dir(kind, root / key, size=size or "tiny")
            self[key] = path
            return path

    return Models()


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


@pytest.fixture
def run_inprocess(monkeypatch):
    """Run train.py's main() in this process (fast: no interpreter start-up) against a base dir."""

    def _run(base: Path, hps: dict) -> Run:
        from hftrain import runner

        monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(base))
        monkeypatch.setenv("HF_DATASETS_CACHE", str(base / "hf-cache"))
        for var in list(os.environ):
            if var.startswith("SM_") or var in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
                monkeypatch.delenv(var, raising=False)
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            code = runner.main(to_argv(hps))
        return Run(code, buffer.getvalue(), base)

    return _run


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
