"""A failing job says why where SageMaker reads it back: <base>/output/failure (DescribeTrainingJob's
FailureReason), with the script's message first, and the real toolkit keeps it instead of its own text."""

from __future__ import annotations

import tarfile

import pytest
from testkit import smhost
from testkit.training import layout_job

from hftrain.run import failure
from local_mode import synthetic as synth


def test_wrong_label_column_writes_the_reason_first(tiny_models, tmp_path, run_inprocess):
    base = layout_job(tmp_path, train=synth.cls_examples(12, 1), validation=synth.cls_examples(6, 2))
    run = run_inprocess(base, {"task": "text-classification", "model_name_or_path": tiny_models["bert"],
                               "label_column": "sentiment", "max_steps": 2})
    assert run.returncode == 2
    lines = (base / "output" / "failure").read_text().splitlines()
    assert lines[0].startswith("the training data is missing column(s) ['sentiment']; it has ")
    assert "label_column" in lines[0] or "_column hyperparameters" in lines[0]
    assert lines[1] == "(train.py on algo-1, rank 0; a settings or data error, exit code 2)"


def test_first_failure_wins_and_is_clipped(tmp_path, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    assert failure.write_failure("x" * 5000)
    assert not failure.write_failure("a later rank's error")
    text = (tmp_path / "output" / "failure").read_text()
    assert len(text.rstrip("\n")) == failure.FAILURE_REASON_LIMIT and text.startswith("xxx")


@pytest.mark.slow
def test_the_toolkit_keeps_the_scripts_failure_file(tiny_models, tmp_path):
    sourcedir = smhost.build_sourcedir(tmp_path / "sourcedir.tar.gz")
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in tiny_models["bert"].iterdir():
            tar.add(path, arcname=path.name)
    train = synth.write_jsonl(tmp_path / "data" / "train.jsonl", synth.cls_examples(12, 1))
    job = smhost.lay_out(
        tmp_path / "hosts", hosts=["algo-1"],
        hyperparameters={"task": "text-classification", "label_column": "sentiment", "max_steps": 2},
        channels={"train": {"algo-1": [train]}, "model": {"algo-1": [archive]}}, sourcedir=sourcedir)
    (result,) = job.run(timeout=300)
    assert result.returncode != 0
    text = result.host.path("/opt/ml/output/failure").read_text()
    assert text.startswith("the training data is missing column(s) ['sentiment']"), text[:500]
    assert "ExecuteUserScriptError" not in text
    assert "Failure file exists. Skipping creation" in result.log
