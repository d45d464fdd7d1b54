"""The durability watchdog: the newest checkpoint complete in S3, its age, one warning per stale period, a stop
that the fallback path treats as retryable; and the interruptions in the run summary."""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from typing import Any

import pytest
from moto.sns.models import sns_backends
from testkit.checkpoints import upload_checkpoint
from testkit.lambdas import ACCOUNT, REGION, SETTINGS, SPEC, T0, start_watched_job, strict_json

from hfsm_lambda import aws, handlers
from hfsm_lambda.watch import durability

WATCH = {"every_minutes": 10, "intervals": 3, "action": "warn"}


def durable(step: int, saved: datetime) -> dict[str, Any]:
    return {"step": step, "saved_at": durability.iso(saved), "uploaded_at": durability.iso(saved), "pending": []}


# --- pure -------------------------------------------------------------------------------------------------
def test_fresh_then_stale_warns_once_per_stale_period():
    report, actions = durability.watch(None, durable(100, T0), now=T0 + timedelta(minutes=20), since=T0,
                                       watchdog=WATCH)
    assert actions == [] and report["age_minutes"] == 20 and not report["stale"]
    assert report["last_durable_step"] == 100 and report["threshold_minutes"] == 30
    report, actions = durability.watch(report, durable(100, T0), now=T0 + timedelta(minutes=31), since=T0,
                                       watchdog=WATCH)
    assert actions == ["warn"] and report["stale"]
    report, actions = durability.watch(report, durable(100, T0), now=T0 + timedelta(minutes=45), since=T0,
                                       watchdog=WATCH)
    assert actions == [] and report["stale"], "one warning per stale period"
    report, actions = durability.watch(report, durable(200, T0 + timedelta(minutes=46)),
                                       now=T0 + timedelta(minutes=47), since=T0, watchdog=WATCH)
    assert actions == [] and not report["stale"] and report["last_durable_step"] == 200
    report, actions = durability.watch(report, durable(200, T0 + timedelta(minutes=46)),
                                       now=T0 + timedelta(minutes=80), since=T0, watchdog=WATCH)
    assert actions == ["warn"], "a new stale period warns again"


def test_time_outside_training_is_not_lost_work():
    # waiting for capacity / restarting after a spot interruption: no age, no action
    report, actions = durability.watch(None, durable(100, T0), now=T0 + timedelta(hours=5), since=None,
                                       watchdog=WATCH)
    assert actions == [] and report["age_minutes"] is None
    # the job trains again since 4h50: the age counts from then
    report, actions = durability.watch(None, durable(100, T0), now=T0 + timedelta(hours=5),
                                       since=T0 + timedelta(hours=4, minutes=50), watchdog=WATCH)
    assert report["age_minutes"] == 10 and actions == []
    # no checkpoint yet: from the start of training
    report, actions = durability.watch(None, None, now=T0 + timedelta(minutes=40), since=T0, watchdog=WATCH)
    assert actions == ["warn"] and report["last_durable_step"] is None


def test_stop_is_requested_once_and_names_the_resume_point():
    watch = {**WATCH, "action": "stop"}
    report, actions = durability.watch(None, durable(100, T0), now=T0 + timedelta(minutes=31), since=T0,
                                       watchdog=watch)
    assert actions == ["warn", "stop"] and "resumes from checkpoint-100" in report["stop_reason"]
    report, actions = durability.watch(report, durable(100, T0), now=T0 + timedelta(minutes=33), since=T0,
                                       watchdog=watch)
    assert actions == [] and report["stopped_at"]
    _, actions = durability.watch(None, durable(100, T0), now=T0 + timedelta(hours=9), since=T0,
                                  watchdog={**WATCH, "action": "off"})
    assert actions == []


# --- S3 -------------------------------------------------------------------------------------------------------
def test_last_durable_needs_every_hosts_marker_and_every_listed_file(aws_account, tmp_path):
    s3 = aws.client("s3")
    uri = f"s3://{SETTINGS['artifacts_bucket']}/checkpoints/run-1/"
    saved = T0.timestamp()
    upload_checkpoint(s3, uri, tmp_path, 10, hosts=("algo-1", "algo-2"), saved_at=saved)
    upload_checkpoint(s3, uri, tmp_path, 20, hosts=("algo-1", "algo-2"), saved_at=saved + 600,
                      skip=("checkpoint-20/_complete.algo-2.json",))
    upload_checkpoint(s3, uri, tmp_path, 30, hosts=("algo-1", "algo-2"), saved_at=saved + 1200,
                      skip=("checkpoint-30/optimizer.pt",))
    s3.put_object(Bucket=SETTINGS["artifacts_bucket"], Key="checkpoints/run-1/checkpoint-3/user.txt", Body=b"x")
    found = durability.last_durable(s3, uri)
    assert found["step"] == 10 and found["saved_at"] == "2025-06-01T12:00:00Z"
    assert found["hosts"] == ["algo-1", "algo-2"]
    assert found["pending"] == [{"step": 30, "reason": "optimizer.pt (listed by algo-1) is not in S3 yet"},
                                {"step": 20, "reason": "no marker from algo-2 yet"}]
    assert durability.last_durable(s3, f"s3://{SETTINGS['artifacts_bucket']}/checkpoints/other/") is None


# --- check_job ------------------------------------------------------------------------------------------------
@pytest.fixture
def training(aws_account, put_data, context, monkeypatch):
    # the durability watchdog alone: this fake job writes checkpoints but no heartbeat, which the stall watch
    # would stop after its start-up limit (tests/lambda/watch/test_lambda_stalls.py)
    spec = {**SPEC, "checkpoint": {"every_minutes": 10, "watchdog": {"action": "stop"}},
            "fallback": {"max_attempts": 2}, "stall": {"action": "off"}}
    return start_watched_job(spec, put_data, context, monkeypatch)


def notes() -> list[tuple]:
    return sns_backends[ACCOUNT][REGION].topics[SETTINGS["topic_arn"]].sent_notifications


def test_check_job_reports_durability_warns_and_stops_a_job_whose_checkpoints_stopped(training, context,
                                                                                      tmp_path):
    run, job, fake, clock, stops = training
    assert job["checkpoint_uri"] == run["uris"]["checkpoint"] and job["watchdog"] == {
        "every_minutes": 10, "auto": False, "intervals": 3, "action": "stop"}
    s3 = aws.client("s3")
    status: dict[str, Any] = {"state": "running"}
    for minute, step in ((5, 50), (15, 100)):
        upload_checkpoint(s3, run["uris"]["checkpoint"], tmp_path, step, saved_at=(T0 + timedelta(minutes=minute)
                                                                                   ).timestamp())
        clock["now"] = T0 + timedelta(minutes=minute + 1)
        status = strict_json(handlers.check_job({"job": job, "previous": status}, context))
        assert status["state"] == "running" and status["durability"]["last_durable_step"] == step
    assert notes() == [] and stops == []
    for minute in (30, 44):  # checkpoints stopped arriving at minute 15; the limit is 30 minutes
        clock["now"] = T0 + timedelta(minutes=minute)
        status = strict_json(handlers.check_job({"job": job, "previous": status}, context))
        assert not status["durability"]["stale"] and stops == []
    clock["now"] = T0 + timedelta(minutes=46)
    status = strict_json(handlers.check_job({"job": job, "previous": status}, context))
    assert status["durability"]["stale"] and stops == [job["job_name"]]
    assert status["state"] == "running"  # Stopping
    (_, message, subject, attributes, _) = notes()[-1]
    assert "stopped: no new checkpoint for 31 min" in subject
    assert "Last durable checkpoint: step 100 saved 2025-06-01T12:15:00Z" in message
    assert "resumes from the last durable checkpoint" in message
    fake.training_job_status, fake.secondary_status = "Stopped", "Stopped"
    status = strict_json(handlers.check_job({"job": job, "previous": status}, context))
    assert status["state"] == "retryable" and "durability watchdog" in status["failure_reason"]
    assert len(notes()) == 1 and stops == [job["job_name"]], "one warning, one stop"
    assert handlers.plan_fallback({"run": run, "attempt": 0, "status": status}, context) == 1


def test_a_stop_by_someone_else_is_still_a_failure(training, context):
    run, job, fake, clock, stops = training
    fake.training_job_status, fake.secondary_status = "Stopped", "Stopped"
    status = strict_json(handlers.check_job({"job": job, "previous": {"state": "running"}}, context))
    assert status["state"] == "failed" and status["durability"]["last_durable_step"] is None


def test_finish_reports_interruptions_and_rejected_checkpoints(training, context, tmp_path):
    run, job, fake, clock, stops = training
    s3 = aws.client("s3")
    upload_checkpoint(s3, run["uris"]["checkpoint"], tmp_path, 120, saved_at=T0.timestamp())
    history = {"format": 1, "starts": [
        {"job": job["job_name"], "resumed_from_step": None, "decision": "start from scratch: no checkpoint yet",
         "rejected": []},
        {"job": job["job_name"], "resumed_from_step": 80, "decision": "resume from checkpoint-80",
         "rejected": [{"checkpoint": "checkpoint-100", "kind": "corrupt", "reason": "file model.safetensors does "
                       "not match its content hash"}]}],
        "interruptions": [{"job": job["job_name"], "step_reached": 104, "resumed_from_step": 80, "lost_steps": 24,
                           "lost_minutes": 6.0, "resumed_by_job": job["job_name"]}]}
    bucket, _, prefix = run["uris"]["checkpoint"].removeprefix("s3://").partition("/")
    s3.put_object(Bucket=bucket, Key=f"{prefix}_history.json", Body=json.dumps(history).encode())
    fake.training_job_status, fake.secondary_status = "Completed", "Completed"
    fake.final_metric_data_list = [{"MetricName": "train_loss", "Value": 0.5}]
    # What SageMaker uploads at the end of the job (finish registers a frozen copy of it).
    model_bucket, _, model_key = fake.model_artifacts["S3ModelArtifacts"].removeprefix("s3://").partition("/")
    s3.put_object(Bucket=model_bucket, Key=model_key, Body=b"weights")
    summary = strict_json(handlers.finish({"run": run, "job": job}, context))
    assert summary["interruptions"] == history["interruptions"]
    assert summary["checkpoints"]["last_durable_step"] == 120
    assert summary["checkpoints"]["rejected"][0]["checkpoint"] == "checkpoint-100"
    (_, message, _, _, _) = notes()[-1]
    assert "Interruptions: 1, 6.0 min of work lost in all" in message
    assert "step 104 reached by" in message and "resumed from step 80: 24 step(s), 6.0 min of work lost" in message
    assert "Checkpoint rejected at a resume (kept for inspection): checkpoint-100" in message
