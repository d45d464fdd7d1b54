"""The training code's MLflow worker against a real MLflow server: params and metrics land in the pipeline run's
MLflow run; a resumed attempt finds the same run and logs no step twice; a hung or absent server neither blocks
the caller nor raises, and is reported once."""

from __future__ import annotations

import logging
import time

import pytest
from mlflow import MlflowClient
from testkit.tracking import mlflow_server, silent_server

from contract import tracking
from hftrain.tracking.worker import TrackingWorker
from local_mode.tracking_server import free_port


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    with mlflow_server(tmp_path_factory.mktemp("mlflow")) as running:
        yield running


def _env(uri: str, run: str) -> dict[str, str]:
    return tracking.environment(uri, "summarization", run)


def _steps(client: MlflowClient, run_id: str, key: str) -> list[int]:
    return sorted(m.step for m in client.get_metric_history(run_id, key))


def test_new_points_skip_steps_at_or_below_the_last_logged():
    last = {"loss": 4}
    kept = tracking.new_points([("loss", 1.0, 3), ("loss", 1.0, 4), ("loss", 0.9, 5), ("lr", 0.1, 1)], last)
    assert kept == [("loss", 0.9, 5), ("lr", 0.1, 1)] and last == {"loss": 5, "lr": 1}


def test_environment_is_empty_without_a_uri_and_enables_tracking_with_one():
    assert tracking.environment("", "exp", "run-1") == {}
    assert not tracking.enabled({})
    assert tracking.enabled(tracking.environment("http://127.0.0.1:1", "exp", "run-1"))
    assert tracking.enabled({tracking.URI_VARIABLE: "arn:x", tracking.RUN_ID_VARIABLE: "abc"})


def test_a_resumed_attempt_continues_the_same_run_without_repeated_steps(server):
    client = MlflowClient(server.uri)
    first = TrackingWorker(_env(server.uri, "resume-1"))
    first.start()
    first.log_params({"learning_rate": 5e-5, "max_steps": 8}, "job-a")
    for step in range(1, 6):
        first.log_metrics({"loss": 1.0 / step, "learning_rate": 5e-5}, step)
    assert first.close(30) and first.failures == 0
    second = TrackingWorker(_env(server.uri, "resume-1"))
    second.start()
    second.log_params({"learning_rate": 5e-5, "max_steps": 8, "save_every_minutes": 3}, "job-b")
    for step in range(3, 9):  # resumed from the checkpoint of step 2: steps 3..5 are replayed
        second.log_metrics({"loss": 2.0 / step}, step)
    assert second.close(30) and second.failures == 0
    assert second.run_id == first.run_id
    assert _steps(client, first.run_id, "loss") == list(range(1, 9))
    assert _steps(client, first.run_id, "learning_rate") == list(range(1, 6))
    params = client.get_run(first.run_id).data.params
    assert params == {"learning_rate": "5e-05", "max_steps": "8", "save_every_minutes": "3"}
    runs = client.search_runs([client.get_experiment_by_name("summarization").experiment_id],
                              filter_string=f"tags.`{tracking.PIPELINE_RUN_TAG}` = 'resume-1'")
    assert len(runs) == 1


def test_a_changed_param_of_a_later_attempt_is_an_attempt_tag(server):
    client = MlflowClient(server.uri)
    for job, interval in (("job-a", 3), ("job-b", 7)):
        worker = TrackingWorker(_env(server.uri, "changed-1"))
        worker.start()
        worker.log_params({"save_every_minutes": interval}, job)
        assert worker.close(30) and worker.failures == 0
    run = client.get_run(worker.run_id)
    assert run.data.params["save_every_minutes"] == "3"
    assert run.data.tags[tracking.attempt_tag("job-b", "param.save_every_minutes")] == "7"


def test_no_server_is_reported_once_and_never_raises(caplog):
    worker = TrackingWorker({**_env(f"http://127.0.0.1:{free_port()}", "absent-1"),
                             tracking.TIMEOUT_VARIABLE: "1"})
    with caplog.at_level(logging.WARNING, logger="hftrain.tracking.worker"):
        worker.start()
        for step in range(1, 50):
            worker.log_metrics({"loss": 1.0}, step)
        assert worker.close(30)
    warnings = [r for r in caplog.records if "failed" in r.getMessage() and "training goes on" in r.getMessage()]
    assert len(warnings) == 1 and worker.failures == 1 and not worker.opened  # nothing logged after the open failed


def test_a_hung_server_never_blocks_the_caller():
    with silent_server() as uri:
        worker = TrackingWorker({**_env(uri, "hung-1"), tracking.TIMEOUT_VARIABLE: "1"})
        began = time.monotonic()
        worker.start()
        for step in range(1, 2000):
            worker.log_metrics({"loss": 1.0, "learning_rate": 1e-5}, step)
        enqueued = time.monotonic() - began
        closed = worker.close(0.5)
        assert enqueued < 1.0, enqueued
        assert not closed and time.monotonic() - began < 5


class _SlowClient:
    """An MLflow client stand-in whose log_batch takes 0.2 s: points queue up behind it."""

    def __init__(self) -> None:
        self.batches: list[list] = []

    def get_experiment_by_name(self, name):
        return type("E", (), {"experiment_id": "1"})()

    def search_runs(self, *args, **kwargs):
        return []

    def create_run(self, *args, **kwargs):
        return type("R", (), {"info": type("I", (), {"run_id": "r1"})()})()

    def get_run(self, run_id):
        return type("R", (), {"data": type("D", (), {"params": {}, "metrics": {}})()})()

    def log_batch(self, run_id, metrics=(), params=(), tags=()):
        time.sleep(0.2)
        if metrics:
            self.batches.append(list(metrics))


def test_points_queued_behind_a_slow_call_leave_together():
    client = _SlowClient()
    worker = TrackingWorker(_env("http://127.0.0.1:1", "slow-1"), make_client=lambda uri: client)
    worker.start()
    for step in range(1, 51):
        worker.log_metrics({"loss": 1.0 / step}, step)
    assert worker.close(30) and worker.failures == 0
    steps = [m.step for batch in client.batches for m in batch]
    assert steps == list(range(1, 51)) and len(client.batches) < 10, len(client.batches)
