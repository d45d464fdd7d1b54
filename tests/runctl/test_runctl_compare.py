"""runctl compare: two runs side by side from MLflow (a real server: the runs as Finish records them) and from the
runs' summaries (local runs' kept records), through the CLI's main()."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mlflow import MlflowClient
from testkit.tracking import mlflow_server

from contract import tracking
from hfsm_lambda.tracking import record
from hfsm_lambda.tracking.rest import MlflowRest
from pipeline_runs.record import RECORD
from runctl import cli, compare


def _summary(lr_run: str, ratio: float, cost: float, f1: float, verdict: str, instance: str) -> dict:
    return {"run_id": lr_run, "job_name": f"{lr_run}-train0", "metrics": {"eval_f1": f1, "train_loss": 1.0},
            "cost": {"cost_usd": cost}, "verdict": {"verdict": verdict, "text": verdict},
            "goodput": {"ratio": ratio, "attempts": [{"attempt": 0, "job_name": f"{lr_run}-train0",
                                                      "instance_type": instance, "instance_count": 1,
                                                      "spot": True}]}}


RUNS = {
    "qa-a": (_summary("qa-a", 0.81, 1.5, 0.62, "beat-baseline", "ml.g5.2xlarge"),
             {"task": "question-answering", "hyperparameters": {"learning_rate": 5e-5}}),
    "qa-b": (_summary("qa-b", 0.64, 2.25, 0.55, "not-beaten", "ml.g5.12xlarge"),
             {"task": "question-answering", "hyperparameters": {"learning_rate": 3e-4}}),
}


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as running:
        rest = MlflowRest(running.uri, timeout=60)
        for run_id, (summary, spec) in RUNS.items():
            record.record_finish(rest, "question-answering", run_id, summary, spec)
        yield running


def test_from_mlflow_shows_spec_differences_metrics_goodput_cost_and_verdict(server, capsys):
    assert cli.main(["compare", "qa-a", "qa-b", "--tracking-uri", server.uri]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    spec = lines[lines.index("spec (differences):") + 2]
    assert spec.split() == ["hyperparameters.learning_rate", "5e-05", "0.0003"]
    assert "(1 spec field(s) the same)" in out  # task
    assert any(line.split() == ["eval_f1", "0.62", "0.55"] for line in lines), out
    assert any(line.split() == ["goodput", "0.81", "0.64"] for line in lines), out
    assert any(line.split() == ["cost", "(USD)", "1.5", "2.25"] for line in lines), out
    assert any(line.split() == ["verdict", "beat-baseline", "not-beaten"] for line in lines), out
    assert f"({'mlflow ' + server.uri})" in out and "/#/experiments/" in out


def test_a_run_missing_from_mlflow_falls_back_to_its_summary(server):
    rest = MlflowRest(server.uri, timeout=60)
    view = compare.view("not-tracked", rest, lambda: RUNS["qa-b"][0])
    assert view.source == "summary" and view.goodput == 0.64
    assert view.spec == {"instance_type": "ml.g5.12xlarge", "instance_count": "1", "spot": "true",
                         "job starts": "1"}
    assert MlflowClient(server.uri).search_runs(
        [MlflowClient(server.uri).get_experiment_by_name("question-answering").experiment_id],
        filter_string=f"tags.`{tracking.PIPELINE_RUN_TAG}` = 'not-tracked'") == []


def _keep_local_run(root: Path, run_id: str, summary: dict) -> None:
    report = root / run_id / "report"
    report.mkdir(parents=True)
    (report / RECORD).write_text(json.dumps({
        "execution_arn": f"arn:aws:states:us-east-1:111111111111:execution:hfsm-dev-fine-tune:{run_id}",
        "status": {"run_id": run_id, "status": "SUCCEEDED", "result": summary}, "row": {}}))


def test_local_runs_without_tracking_compare_their_summaries(tmp_path, capsys):
    for run_id, (summary, _) in RUNS.items():
        _keep_local_run(tmp_path, run_id, summary)
    assert cli.main(["compare", "qa-a", "qa-b", "--local", "--local-runs", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "A: qa-a (summary)" in out
    assert any(line.split() == ["instance_type", "ml.g5.2xlarge", "ml.g5.12xlarge"]
               for line in out.splitlines()), out
    assert any(line.split() == ["verdict", "beat-baseline", "not-beaten"] for line in out.splitlines()), out
    assert cli.main(["compare", "qa-a", "qa-b", "--local", "--local-runs", str(tmp_path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["a"]["cost_usd"] == 1.5 and data["b"]["verdict"] == "not-beaten"


def test_an_unknown_local_run_is_named(tmp_path, capsys):
    _keep_local_run(tmp_path, "qa-a", RUNS["qa-a"][0])
    assert cli.main(["compare", "qa-a", "nope", "--local", "--local-runs", str(tmp_path)]) == 2
    assert "no local run 'nope'" in capsys.readouterr().err
