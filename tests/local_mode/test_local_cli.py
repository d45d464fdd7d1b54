"""`python -m local_mode` as a user runs it (a subprocess): clear one-line errors for bad input, generated
data, and a failing job whose script's message reaches DescribeTrainingJob, the notification and the console."""

from __future__ import annotations

import json
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


@pytest.mark.slow
def test_a_wrong_column_fails_the_job_and_says_why_everywhere(dev_outdir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    done = local_mode("--cdk-out", str(dev_outdir), "data", "text-classification", str(data))
    assert done.returncode == 0, done.stderr
    spec_path = data / "text-classification.json"
    assert f"run it: python -m local_mode run {spec_path} --data {data}" in done.stdout
    spec = json.loads(spec_path.read_text())
    spec["compute"]["instance_count"] = 1
    spec["hyperparameters"]["label_column"] = "sentiment"  # the data's column is "label"
    spec_path.write_text(json.dumps(spec))

    work = tmp_path / "work"
    done = local_mode("--cdk-out", str(dev_outdir), "--work-dir", str(work), "run", str(spec_path), "--data",
                      str(data))
    out = done.stdout
    assert done.returncode == 1, done.stderr[-3000:]
    message = "the training data is missing column(s) ['sentiment']; it has "

    # the local output: failing state, the script's message, each host's log with its last lines, the report
    assert "FAILED in state TrainingFailed" in out and ": TrainingJobFailed" in out
    assert message in out and "What to do:" in out
    log = next(work.glob("sagemaker/*-train0/logs/attempt-1/algo-1.log"))
    assert f"algo-1 log: {log}" in out and "      | " in out
    assert f"report: {work / 'report' / 'report.md'}" in out
    assert "Traceback" not in out + done.stderr and '{"' not in out + done.stderr and "\\n" not in out
    assert out.splitlines()[-1].strip().startswith("report: ")
    assert f"run {json.loads((work / 'report' / 'run.json').read_text())['run_id']} FAILED" in out
    assert "      | ERROR: the training data is missing column(s) ['sentiment']" in out

    # DescribeTrainingJob's FailureReason and the failure notification carry the script's message
    record = json.loads((work / "report" / "run.json").read_text())
    (train,) = [j for j in record["jobs"] if j.get("TrainingJobName")]
    assert train["TrainingJobStatus"] == "Failed"
    assert train["FailureReason"].startswith(f"AlgorithmError: {message}")
    assert "ExecuteUserScriptError" not in train["FailureReason"]
    (note,) = [n for n in record["notifications"] if "FAILED" in n["subject"]]
    assert message in note["message"] and record["failed_state"] == "TrainingFailed"
    assert (work / "report" / "report.md").read_text().startswith(f"# Run {record['run_id']}: FAILED")
