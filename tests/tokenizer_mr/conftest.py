"""Fixtures for the tokenizer map/reduce tests (helpers live in tokenizer_testlib.py)."""

from __future__ import annotations

import io
import sys
import tarfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
TRAINING_CODE = REPO / "training_code"


@pytest.fixture(scope="session")
def sourcedir_tarball(tmp_path_factory) -> Path:
    """training_code/ packed as the pipeline ships it (sourcedir.tar.gz), without caches."""
    out = tmp_path_factory.mktemp("code") / "sourcedir.tar.gz"
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for path in sorted(TRAINING_CODE.rglob("*")):
            rel = path.relative_to(TRAINING_CODE)
            if "__pycache__" in rel.parts or path.suffix == ".pyc" or not path.is_file():
                continue
            tar.add(path, arcname=str(rel))
    out.write_bytes(buf.getvalue())
    return out


@pytest.fixture
def processing_host(tmp_path, sourcedir_tarball):
    """Make a relocated /opt/ml for one processing host: code dir with sourcedir.tar.gz and runproc.sh,
    resourceconfig.json; returns a function (host, hosts) -> base dir."""

    def make(host: str = "algo-1", hosts: tuple[str, ...] = ("algo-1",), name: str | None = None) -> Path:
        base = tmp_path / (name or host)
        code = base / "processing" / "input" / "code"
        code.mkdir(parents=True)
        (code / "sourcedir.tar.gz").write_bytes(sourcedir_tarball.read_bytes())
        (code / "runproc.sh").write_bytes((TRAINING_CODE / "runproc.sh").read_bytes())
        (base / "config").mkdir(parents=True)
        import json

        (base / "config" / "resourceconfig.json").write_text(
            json.dumps({"current_host": host, "hosts": list(hosts), "network_interface_name": "eth0"})
        )
        return base

    return make


@pytest.fixture
def runproc_env():
    """Environment for runproc.sh in tests: no pip, this interpreter."""
    import os

    env = dict(os.environ)
    env.update({"RUNPROC_SKIP_PIP": "1", "RUNPROC_PYTHON": sys.executable, "TOKENIZER_LOG_LEVEL": "INFO"})
    env.pop("PYTHONPATH", None)
    return env
