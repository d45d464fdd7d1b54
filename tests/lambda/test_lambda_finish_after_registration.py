"""Finish's order (issue 36, finding 1): what the job and its logs say is read before the model is registered,
and nothing after the registration can fail the run (NotifyFailure would then record a failed run whose model
package exists)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from testkit.lambdas import SETTINGS, sm_backend, strict_json

from hfsm_lambda import aws, handlers
from hfsm_lambda.watch import durability


def _completed_job(run: dict[str, Any], context: Any) -> dict[str, Any]:
    job = handlers.start_training({"run": run, "attempt": 0}, context)
    fake = sm_backend().training_jobs[job["job_name"]]
    fake.final_metric_data_list = [{"MetricName": "eval_f1", "Value": 71.25}]
    model_uri = sm_backend().describe_training_job(job["job_name"])["ModelArtifacts"]["S3ModelArtifacts"]
    aws.client("s3").put_object(Bucket=model_uri.split("/")[2], Key=model_uri.split("/", 3)[3], Body=b"w")
    fake.training_end_time = datetime.now(UTC)
    return job


def _record_calls(calls: list[str]) -> None:
    for service, operation in (("logs", "DescribeLogStreams"), ("logs", "GetLogEvents"), ("s3", "GetObject"),
                               ("s3", "ListObjectsV2"), ("sagemaker", "CreateModelPackage")):
        aws.client(service).meta.events.register(f"provide-client-params.{service}.{operation}",
                                                 lambda operation=operation, **_: calls.append(operation))


def test_the_evidence_is_read_before_the_model_is_registered(state, context):
    run = state["run"]
    job = _completed_job(run, context)
    calls: list[str] = []
    _record_calls(calls)
    handlers.finish({"run": run, "job": job}, context)
    registered = calls.index("CreateModelPackage")
    assert "DescribeLogStreams" in calls[:registered] and "ListObjectsV2" in calls[:registered]
    assert not {"DescribeLogStreams", "GetLogEvents", "ListObjectsV2", "GetObject"} & set(calls[registered + 1:])


def test_a_failure_after_registration_leaves_a_succeeded_record(state, context, monkeypatch):
    run = state["run"]
    job = _completed_job(run, context)

    def no_sns(*args: Any, **kwargs: Any) -> str:
        raise RuntimeError("SNS is down")

    monkeypatch.setattr(handlers, "_publish", no_sns)
    summary = strict_json(handlers.finish({"run": run, "job": job}, context))
    assert summary["status"] == "Succeeded" and summary["model_package_arn"]
    assert summary["record_errors"] == ["notification not sent: RuntimeError: SNS is down"]
    key = run["uris"]["summary"].split("/", 3)[3]
    written = json.loads(aws.client("s3").get_object(Bucket=SETTINGS["artifacts_bucket"], Key=key)["Body"].read())
    assert written["status"] == "Succeeded" and written["model_package_arn"] == summary["model_package_arn"]


def test_unreadable_checkpoint_evidence_does_not_fail_the_run(state, context, monkeypatch):
    run = state["run"]
    job = _completed_job(run, context)

    def hostile_marker(*args: Any, **kwargs: Any) -> None:
        raise TypeError("'int' object is not iterable")  # a marker whose hosts is a number

    monkeypatch.setattr(durability, "last_durable", hostile_marker)
    summary = strict_json(handlers.finish({"run": run, "job": job}, context))
    assert summary["status"] == "Succeeded"
    assert summary["checkpoints"]["error"] == "TypeError: 'int' object is not iterable"


def test_a_ledger_strict_json_refuses_does_not_fail_a_registered_run(state, context, monkeypatch):
    """A GOODPUT value near the float limit can sum to infinity; summary.json is strict JSON (no Infinity), so the
    value is written as its text, as non-finite metrics are, instead of the run failing after registration."""
    run = state["run"]
    job = _completed_job(run, context)
    monkeypatch.setattr(handlers.goodput_sources, "run_ledger",
                        lambda *a, **k: {"format": 1, "ratio": float("inf"), "attempts": [], "interruptions": []})
    summary = strict_json(handlers.finish({"run": run, "job": job}, context))
    assert summary["status"] == "Succeeded" and summary["goodput"]["ratio"] == "inf"
    key = run["uris"]["summary"].split("/", 3)[3]
    written = json.loads(aws.client("s3").get_object(Bucket=SETTINGS["artifacts_bucket"], Key=key)["Body"].read())
    assert written["status"] == "Succeeded"
