"""Mistakes caught before a job starts, as a user meets them: `python -m local_mode run` (a subprocess, one
emulator for all the specs) with a wrong label column, a wrong text column, QA data without answers, Parquet
without the label column, an empty object, a runtime limit of 5 s, an unknown instance type and a model folder on
this machine; each fails in Prepare, names the field, starts no job. The training code keeps its own checks: a
mistake Prepare does not look at (a model that cannot do the task) still fails the job and says why everywhere.
Then `runctl list/status/logs --local` read these finished local runs with no AWS at all."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
BUCKET = "hfsm-dev-data-111111111111-us-east-1"


def _cli(module: str, *args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}  # runctl: no AWS; local_mode: its own
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=env)


def _inputs(data: Path, dev_outdir: Path, specs: Path) -> dict[str, dict]:
    """The data of every case under `data`, and the spec of every case (name -> spec)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from local_mode import spec_inputs, synthetic

    done = _cli("local_mode", "--cdk-out", str(dev_outdir), "data", "text-classification", str(data))
    assert done.returncode == 0, done.stderr
    assert f"run it: python -m local_mode run {data / 'text-classification.json'} --data {data}" in done.stdout
    base = json.loads((data / "text-classification.json").read_text())
    base["compute"]["instance_count"] = 1

    qa = {**base, "task": "question-answering", "data": {"train": {"s3": "datasets/qa/train/"}}}
    rows = [{k: v for k, v in r.items() if k != "answers"} for r in synthetic.qa_examples(20, 1)]
    synthetic.write_jsonl(data / "datasets/qa/train/part-0.jsonl", rows)
    parquet = {**base, "data": {"train": {"s3": "datasets/pq/train/"}}}
    (data / "datasets/pq/train").mkdir(parents=True)
    pq.write_table(pa.Table.from_pylist([{k: v for k, v in r.items() if k != "label"}
                                         for r in synthetic.cls_examples(20, 1)]),
                   data / "datasets/pq/train/part-0.parquet")
    empty = {**base, "data": {"train": {"s3": "datasets/empty/train/"}}}
    synthetic.write_jsonl(data / "datasets/empty/train/part-0.jsonl", synthetic.cls_examples(20, 1))
    (data / "datasets/empty/train/part-1.jsonl").write_bytes(b"")

    # a model that cannot do the task, named as a folder on this machine: uploaded for the run, then the job fails
    summ = {**base, "task": "summarization", "model": "./my-roberta", "hyperparameters": {
        **base["hyperparameters"], "max_steps": 5}, "data": {"train": {"s3": "datasets/summ/train/"},
                                                             "validation": {"s3": "datasets/summ/validation/"}}}
    spec_inputs.write_spec_data(summ, data, parts=1, train_rows=32, eval_rows=8)
    synthetic.build_model_dir("roberta", specs / "my-roberta")
    shutil.copytree(specs / "my-roberta", specs / "my-model")
    return {
        "wrong-label": {**base, "hyperparameters": {**base["hyperparameters"], "label_column": "sentiment"}},
        "wrong-text": {**base, "hyperparameters": {**base["hyperparameters"], "text_column": "txt"}},
        "qa-no-answers": qa, "parquet-no-label": parquet, "empty-object": empty,
        "short-runtime": {**base, "max_runtime_seconds": 5},
        "unknown-type": {**base, "compute": {"instance_type": "ml.g9.2xlarge", "instance_count": 1}},
        "local-model": {**base, "model": "my-model", "hyperparameters": {**base["hyperparameters"],
                                                                         "label_column": "sentiment"}},
        "cannot-do-the-task": summ,
    }


# case -> (error, the problem as Prepare states it)
CAUGHT = {
    "wrong-label": ("PreflightError", "hyperparameters.label_column: 'sentiment' is not a column of data.train. "
                                      "Set hyperparameters.label_column to the column that holds the label; "
                                      f"s3://{BUCKET}/datasets/local-text-classification/train/part-0.jsonl has "
                                      "'id', 'text', 'label'"),
    "wrong-text": ("PreflightError", "hyperparameters.text_column: 'txt' is not a column of data.train"),
    "qa-no-answers": ("PreflightError", "data.train: no answers column 'answers' (the default of answers_column). "
                                        "Set hyperparameters.answers_column to the column that holds the answers; "
                                        f"s3://{BUCKET}/datasets/qa/train/part-0.jsonl has 'id', 'question', "
                                        "'context'"),
    "parquet-no-label": ("PreflightError", "data.train: no label column 'label' (the default of label_column). Set "
                                           "hyperparameters.label_column to the column that holds the label; "
                                           f"s3://{BUCKET}/datasets/pq/train/part-0.parquet has 'id', 'text'"),
    "empty-object": ("PreflightError", f"data.train: 1 empty object(s) (0 bytes) under s3://{BUCKET}/datasets/empty/"
                                       "train/: part-1.jsonl; remove them or upload their content"),
    "short-runtime": ("SpecError", "max_runtime_seconds: 5 is below 900 s: 600 s for the job's start-up"),
    "unknown-type": ("PreflightError", "compute.instance_type: ml.g9.2xlarge is not allowed in environment dev; "
                                       "allowed: ml.g5.xlarge"),
    "local-model": ("PreflightError", "hyperparameters.label_column: 'sentiment' is not a column of data.train"),
}


def _assert_failed_in_prepare(name: str, record: dict, out: str) -> None:
    error, problem = CAUGHT[name]
    assert record["error"] == error and record["failed_state"] == "Prepare", (name, record["cause"])
    assert record["jobs"] == [], name  # no job was created
    assert any(problem in line for line in out.splitlines()), (name, problem)
    problems = [line for line in json.loads(record["cause"])["errorMessage"].splitlines() if line.startswith("- ")]
    assert len(problems) == 1, (name, problems)  # one mistake, one problem


def _assert_the_training_code_says_why(work: Path, failed: dict, out: str, reason: str) -> None:
    (train,) = [j for j in failed["jobs"] if j.get("TrainingJobName")]
    assert failed["failed_state"] == "TrainingFailed" and train["FailureReason"].startswith(f"AlgorithmError: {reason}")
    (note,) = [n for n in failed["notifications"] if n["status"] == "Failed"]
    assert reason in note["message"] and "(link below)" in note["message"]  # SNS: the CloudWatch link is below it
    local = out.split("spec ")[-1]
    assert reason in local and "What to do: Read the training job's CloudWatch logs (the host log files below)" in local
    log = work / "sagemaker" / train["TrainingJobName"] / "logs" / "attempt-1" / "algo-1.log"
    assert f"algo-1 log: {log}" in local and f"      | ERROR: {reason}" in local


def _assert_runctl_lists_the_local_runs(work: Path, cases: dict[str, dict], failed: dict) -> str:
    listing = _cli("runctl", "list", "--local", "--local-runs", str(work))
    assert listing.returncode == 0, listing.stderr
    lines = listing.stdout.splitlines()
    assert lines[0].split() == ["RUN", "STATE", "STARTED", "(UTC)", "DURATION", "COST", "NOTE"]
    assert len(lines) == 1 + len(cases) and sum(" PreflightError" in line for line in lines) == 7
    run_id = failed["run_id"]
    (row,) = [line for line in lines if line.startswith(run_id)]
    assert " FAILED " in row and "TrainingJobFailed" in row
    return run_id


def _assert_runctl_status_and_logs(work: Path, records: dict[str, dict], run_id: str, reason: str) -> None:
    status = _cli("runctl", "status", run_id, "--local", "--local-runs", str(work))
    assert status.returncode == 0 and f"Run:        {run_id}" in status.stdout
    assert f"Report:     {work / '09-cannot-do-the-task' / 'report' / 'report.md'}" in status.stdout
    logs = _cli("runctl", "logs", run_id, "--local", "--local-runs", str(work))
    assert logs.returncode == 0 and f"[train attempt 0, algo-1] ERROR: {reason}" in logs.stdout
    stamps = [line.split(" ", 1)[0] for line in logs.stdout.splitlines()]
    assert stamps == sorted(stamps) and len(stamps) > 10
    execution = records["wrong-label"]["execution_arn"].rsplit(":", 1)[-1]
    logs = _cli("runctl", "logs", execution, "--local", "--local-runs", str(work))
    assert logs.stdout.strip() == "the run has no jobs (execution FAILED)"
    missing = _cli("runctl", "status", "nope", "--local", "--local-runs", str(work))
    assert missing.returncode == 2 and "no local run 'nope' under" in missing.stderr


def test_mistakes_fail_in_prepare_and_runctl_reads_the_local_runs(dev_outdir: Path, tmp_path: Path) -> None:
    data, specs, work = tmp_path / "data", tmp_path / "specs", tmp_path / "runs"
    specs.mkdir()
    cases = _inputs(data, dev_outdir, specs)
    paths = []
    for name, spec in cases.items():
        paths.append(specs / f"{name}.json")
        paths[-1].write_text(json.dumps(spec))
    done = _cli("local_mode", "--cdk-out", str(dev_outdir), "--work-dir", str(work), "run", *map(str, paths),
                "--data", str(data))
    out = done.stdout
    assert done.returncode == 1, out[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in out + done.stderr
    records = {}
    for index, name in enumerate(cases):
        record = json.loads((work / f"{index + 1:02d}-{name}" / "report" / "run.json").read_text())
        records[name] = record
        if name not in CAUGHT:
            continue
        _assert_failed_in_prepare(name, record, out)
    files = len(list((specs / "my-model").iterdir()))
    assert f"model: my-model is a folder on this machine ({specs / 'my-model'}): uploaded its {files} files to " \
           f"s3://{BUCKET}/base-models/local-my-model/, which the run uses as its model" in out
    title = (work / "01-wrong-label" / "report" / "report.md").read_text().splitlines()[0]
    assert title == "# Run local-text (no run id: it failed in Prepare): FAILED"

    # the training code keeps its own checks: what Prepare does not read still stops the job, with the reason
    failed = records["cannot-do-the-task"]
    reason = "a 'roberta' model cannot do summarization here: it needs an encoder-decoder"
    _assert_the_training_code_says_why(work, failed, out, reason)

    # runctl reads the finished local runs: list, status, logs, as for AWS runs, with no AWS variable set
    run_id = _assert_runctl_lists_the_local_runs(work, cases, failed)
    _assert_runctl_status_and_logs(work, records, run_id, reason)
