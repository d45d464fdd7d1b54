"""Local runs with tracking on, through the CLI in a subprocess, queried with mlflow.MlflowClient: the run exists in
the spec's experiment, its loss curve has one point per logged step, also across an abrupt interruption whose
resumed attempt replays steps (none is logged twice), the params match the spec, the goodput ledger and the verdict
are there; and a run whose tracking server is down completes all the same."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient
from testkit.tracking import mlflow_server

from contract import tracking
from local_mode.tracking_server import free_port

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
STEPS = 40
INTERRUPT_AT = 30


def _cli(*args: str, timeout: int = 900) -> subprocess.CompletedProcess:
    env = {**os.environ, "LOCAL_MODE_TRACKING": "off"}  # --tracking-uri below names the server
    return subprocess.run([sys.executable, "-m", "local_mode", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=timeout)


@pytest.fixture(scope="module")
def data(dev_outdir: Path, tmp_path_factory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("data")
    done = _cli("data", "text-classification", str(folder), "--cdk-out", str(dev_outdir))
    assert done.returncode == 0, done.stderr[-3000:]
    spec = json.loads((folder / "text-classification.json").read_text())
    spec["hyperparameters"].update(max_steps=STEPS, logging_steps=1)
    spec["checkpoint"] = {"every_steps": 5, "every_minutes": 0}
    spec["tracking"] = {"experiment": "local-e2e"}
    path = folder / "tracked.json"
    path.write_text(json.dumps(spec))
    return folder, path


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as running:
        yield running


def test_an_interrupted_and_resumed_run_is_one_mlflow_run_without_repeated_steps(dev_outdir, data, server, tmp_path):
    folder, spec_path = data
    done = _cli("run", str(spec_path), "--data", str(folder), "--interrupt-abruptly-at-step", str(INTERRUPT_AT),
                "--tracking-uri", server.uri, "--cdk-out", str(dev_outdir), "--work-dir", str(tmp_path / "run"))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-5000:]
    url = re.search(r"MLflow run\s+(http://127\.0\.0\.1:\d+/#/experiments/(\w+)/runs/(\w+))", out)
    assert url, out[-3000:]
    client = MlflowClient(server.uri)
    experiment = client.get_experiment_by_name("local-e2e")
    (run,) = client.search_runs([experiment.experiment_id])
    assert (url.group(2), url.group(3)) == (experiment.experiment_id, run.info.run_id)
    steps = [m.step for m in client.get_metric_history(run.info.run_id, "loss")]
    assert sorted(steps) == list(range(1, STEPS + 1)), steps  # one point per logged step, replayed ones not again
    assert run.info.status == "FINISHED"
    resumed = {k: v for k, v in run.data.tags.items() if k.endswith(".resumed_step")}
    # the second attempt started below the step the first reached: it replayed steps, none logged twice
    assert resumed and 0 <= int(next(iter(resumed.values()))) < INTERRUPT_AT, resumed
    spec = json.loads(spec_path.read_text())
    params = run.data.params
    assert params["learning_rate"] == str(spec["hyperparameters"]["learning_rate"])
    assert params["spec.hyperparameters.learning_rate"] == str(spec["hyperparameters"]["learning_rate"])
    assert params["spec.task"] == "text-classification" and params["spec.tracking.experiment"] == "local-e2e"
    assert 0 < run.data.metrics["goodput.ratio"] <= 1 and "goodput.productive_seconds" in run.data.metrics
    assert run.data.tags["verdict"] and run.data.tags["model_package_arn"].startswith("arn:aws:sagemaker:")
    assert run.data.tags[tracking.PIPELINE_RUN_TAG] in out


def test_a_run_whose_tracking_server_is_down_completes(dev_outdir, data, tmp_path):
    folder, spec_path = data
    done = _cli("run", str(spec_path), "--data", str(folder), "--tracking-uri", f"http://127.0.0.1:{free_port()}",
                "--cdk-out", str(dev_outdir), "--work-dir", str(tmp_path / "run"))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-5000:]
    assert "succeeded" in out and "MLflow run" not in out
