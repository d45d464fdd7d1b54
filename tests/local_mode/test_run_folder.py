"""A finished local run's folder keeps what a user reads (report, logs, the job's output files, the local model) and
drops the jobs' work files (code and input copies, checkpoints, packed model copies): local_mode/run_folder.py."""

from __future__ import annotations

from pathlib import Path

from local_mode.run_folder import trim

KEPT = ["report/report.md", "report/run.json", "report/runctl.json", "artifacts/model/model.safetensors",
        "sagemaker/job-train0/logs/attempt-1/algo-1.log", "sagemaker/job-train0/attempt-2/algo-1/opt/ml/output/failure",
        "sagemaker/job-train0/attempt-2/algo-1/opt/ml/input/config/hyperparameters.json",
        "sagemaker/job-tokmap0/logs/algo-1.log"]
DROPPED = ["sagemaker/job-train0/attempt-2/algo-1/opt/ml/code/train.py",
           "sagemaker/job-train0/attempt-2/algo-1/opt/ml/input/data/train/part-0.jsonl",
           "sagemaker/job-train0/attempt-2/algo-2/opt/ml/checkpoints/checkpoint-50/model.safetensors",
           "sagemaker/job-train0/attempt-2/algo-1/opt/ml/model/model.safetensors",
           "sagemaker/job-train0/artifacts/model.tar.gz", "sagemaker/job-train0/bin/python",
           "sagemaker/job-tokmap0/attempt-1/algo-1/opt/ml/processing/input/code/wheels/x.whl",
           "artifacts/model.tar.gz"]


def layout(folder: Path, paths: list[str]) -> None:
    for name in paths:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"\0" * 1000)


def test_trim_keeps_what_a_user_reads(tmp_path: Path) -> None:
    layout(tmp_path, KEPT + DROPPED + ["inputs/datasets/x/part-0.jsonl"])
    before, after = trim(tmp_path)
    assert (before, after) == (1000 * (len(KEPT) + len(DROPPED) + 1), 1000 * (len(KEPT) + 1))
    assert all((tmp_path / p).is_file() for p in KEPT)
    assert not any((tmp_path / p).exists() for p in DROPPED)
    assert (tmp_path / "inputs").exists()  # a user's run: its folder may hold their own inputs/
    trim(tmp_path, inputs=True)  # the demo's generated inputs go
    assert not (tmp_path / "inputs").exists() and all((tmp_path / p).is_file() for p in KEPT)


def test_trim_reaches_the_runs_of_several_specs(tmp_path: Path) -> None:
    layout(tmp_path, DROPPED + ["01-a/report/report.md", "01-a/artifacts/model.tar.gz", "01-a/artifacts/model/c.json"])
    trim(tmp_path)
    assert (tmp_path / "01-a" / "report" / "report.md").exists() and (tmp_path / "01-a/artifacts/model/c.json").exists()
    assert not (tmp_path / "01-a" / "artifacts" / "model.tar.gz").exists()


def test_trim_of_a_missing_folder_is_nothing(tmp_path: Path) -> None:
    assert trim(tmp_path / "none") == (0, 0)
