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
    # --tracking-uri below names the server; the jobs' calls get a longer timeout on a loaded test machine
    env = {**os.environ, "LOCAL_MODE_TRACKING": "off", tracking.TIMEOUT_VARIABLE: "30"}
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


def _run(dev_outdir: Path, data: tuple[Path, Path], server_uri: str, work: Path, *flags: str) -> str:
    folder, spec_path = data
    done = _cli("run", str(spec_path), "--data", str(folder), *flags, "--tracking-uri", server_uri,
                "--cdk-out", str(dev_outdir), "--work-dir", str(work))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-5000:]
    return out


def _the_run(client: MlflowClient, out: str):
    experiment = client.get_experiment_by_name("local-e2e")
    run_id = re.search(r"Run (\S+) succeeded", out).group(1)
    (run,) = client.search_runs([experiment.experiment_id],
                                filter_string=f"tags.`{tracking.PIPELINE_RUN_TAG}` = '{run_id}'")
    return experiment, run


def _loss_steps(client: MlflowClient, run) -> list[int]:
    return [m.step for m in client.get_metric_history(run.info.run_id, "loss")]


def test_a_tracked_run_has_its_curve_params_goodput_and_verdict(dev_outdir, data, server, tmp_path):
    # a spot interruption as SageMaker stops a job (SIGTERM): the job saves, flushes what it queued, and the next
    # attempt resumes from that checkpoint
    out = _run(dev_outdir, data, server.uri, tmp_path / "run", "--interrupt-at-step", "20")
    client = MlflowClient(server.uri)
    experiment, run = _the_run(client, out)
    url = re.search(r"MLflow run\s+(http://127\.0\.0\.1:\d+/#/experiments/(\w+)/runs/(\w+))", out)
    assert url and (url.group(2), url.group(3)) == (experiment.experiment_id, run.info.run_id), out[-3000:]
    assert sorted(_loss_steps(client, run)) == list(range(1, STEPS + 1))  # one point per logged step
    assert run.info.status == "FINISHED"
    spec = json.loads(data[1].read_text())
    params = run.data.params
    assert params["learning_rate"] == str(spec["hyperparameters"]["learning_rate"])
    assert params["spec.hyperparameters.learning_rate"] == str(spec["hyperparameters"]["learning_rate"])
    assert params["spec.task"] == "text-classification" and params["spec.tracking.experiment"] == "local-e2e"
    assert params["spec.compute.instance_count"] == "2"
    assert 0 < run.data.metrics["goodput.ratio"] <= 1 and "goodput.productive_seconds" in run.data.metrics
    assert "final.eval_accuracy" in run.data.metrics and "samples_per_second" in run.data.metrics
    assert run.data.tags["verdict"] and run.data.tags["model_package_arn"].startswith("arn:aws:sagemaker:")


def test_an_abruptly_interrupted_and_resumed_run_logs_no_step_twice(dev_outdir, data, server, tmp_path):
    # the instances lost at once (SIGKILL): the next attempt resumes from an older checkpoint and replays steps
    out = _run(dev_outdir, data, server.uri, tmp_path / "run", "--interrupt-abruptly-at-step", str(INTERRUPT_AT))
    client = MlflowClient(server.uri)
    _, run = _the_run(client, out)
    steps = _loss_steps(client, run)
    resumed = int(next(v for k, v in run.data.tags.items() if k.endswith(".resumed_step")))
    assert 0 <= resumed < INTERRUPT_AT  # steps after `resumed` up to where the first attempt got were replayed
    assert len(steps) == len(set(steps)), sorted(steps)  # no step twice
    # every step of the resumed attempt is there; the killed attempt's points still queued at SIGKILL are lost
    assert set(range(resumed + 1, STEPS + 1)) <= set(steps) <= set(range(1, STEPS + 1)), sorted(steps)


def test_a_run_whose_tracking_server_is_down_completes(dev_outdir, data, tmp_path):
    folder, spec_path = data
    done = _cli("run", str(spec_path), "--data", str(folder), "--tracking-uri", f"http://127.0.0.1:{free_port()}",
                "--cdk-out", str(dev_outdir), "--work-dir", str(tmp_path / "run"))
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-5000:]
    assert "succeeded" in out and not re.search(r"MLflow run\s+http", out)  # no run page to show
    assert "tracking: Prepare could not open the MLflow run" in out  # said, and the run went on
