"""`python -m local_mode` as a user runs it (a subprocess): clear one-line errors for bad input (mistakes in the
spec or the data: tests/local_mode/test_caught_in_prepare.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def local_mode(*args: str, timeout: float = 600) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "local_mode", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture
def spec_file(tmp_path: Path) -> Path:
    path = tmp_path / "spec.json"
    path.write_text((REPO / "examples" / "question-answering.json").read_text())
    return path


def test_missing_or_empty_data_is_an_error(tmp_path: Path, spec_file: Path) -> None:
    done = local_mode("--cdk-out", str(tmp_path / "none"), "run", str(spec_file), "--data", str(tmp_path / "nope"))
    assert done.returncode == 2
    assert done.stderr.strip() == (f"error: --data {tmp_path / 'nope'}: no such folder (generate one with "
                                   "`python -m local_mode data TASK DIR`)")
    (tmp_path / "empty").mkdir()
    done = local_mode("run", str(spec_file), "--data", str(tmp_path / "empty"))
    assert done.returncode == 2 and "the folder is empty" in done.stderr and len(done.stderr.splitlines()) == 1
    done = local_mode("run", str(spec_file))
    assert done.returncode == 2 and "the following arguments are required: --data" in done.stderr


def test_no_synthesized_app_says_how_to_make_one(tmp_path: Path, spec_file: Path) -> None:
    (tmp_path / "data" / "x").mkdir(parents=True)
    (tmp_path / "data" / "x" / "a.jsonl").write_text("{}\n")
    done = local_mode("--cdk-out", str(tmp_path / "cdk.out"), "run", str(spec_file), "--data", str(tmp_path / "data"))
    assert done.returncode == 2
    assert done.stderr.strip() == f"error: {tmp_path / 'cdk.out' / 'manifest.json'} not found: run `make synth " \
                                  "ENV=dev` first"


def test_unknown_example_lists_the_examples() -> None:
    done = local_mode("example", "squad")
    assert done.returncode == 2
    shipped = sorted(path.stem for path in (REPO / "examples").glob("*.json"))
    assert len(shipped) >= 4, shipped  # the examples as shipped: one per task plus the tokenizer pipeline
    assert done.stderr.strip() == f"error: no example squad; the examples are: {', '.join(shipped)}"


@pytest.mark.slow
def test_a_prod_cdk_out_gets_one_sentence(prod_outdir: Path, tmp_path: Path, spec_file: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl").write_text("{}\n")
    done = local_mode("--cdk-out", str(prod_outdir), "--work-dir", str(tmp_path / "w"), "run", str(spec_file),
                      "--data", str(tmp_path / "data"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith(f"error: {prod_outdir} holds environment 'prod', which local mode cannot deploy")
    assert line.endswith("local mode runs the dev environment (no NAT gateway, no FSx): run `make synth ENV=dev`, "
                         "then try again")
