"""Fixtures for the training-code tests: tiny models built once per session, and a way to run train.py."""

from __future__ import annotations

import contextlib
import io
import os
from pathlib import Path

import pytest
from testkit.shared import shared_dir
from testkit.training import Run, to_argv

from local_mode import synthetic as synth

HERE = Path(__file__).resolve().parent

REPO = HERE.parents[1]
TRAIN_PY = REPO / "training_code" / "train.py"


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory):
    """kind -> directory of a tiny pretrained-style model (bert, roberta, bart, t5; `-small` for 128 wide),
    built lazily, once per session for all xdist workers."""

    class Models(dict):
        def __missing__(self, key):  # "bert", or "bart-small" for the next size up
            kind, _, size = key.partition("-")
            path = shared_dir(tmp_path_factory, f"tiny-model-{key}",
                              lambda out: synth.build_model_dir(kind, out, size=size or "tiny"))
            self[key] = path
            return path

    return Models()


@pytest.fixture
def run_inprocess(monkeypatch):
    """Run train.py's main() in this process (fast: no interpreter start-up) against a base dir."""

    def _run(base: Path, hps: dict) -> Run:
        from hftrain.run import runner

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


