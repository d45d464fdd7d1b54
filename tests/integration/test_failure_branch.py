"""Issue 23, finding 2: a crafted StartExecution input must not steer the failure branch.

Before, when Prepare failed the whole execution input (`run`, `status`, `source`) reached NotifyFailure, so a run
submitter could make it write any key under outputs/ (another run's metrics.json, which that run's model package
points to) and publish a notification in another run's name. Now `PrepareFailed` keeps only the error and the
execution's identity, and notify_failure derives the one key it writes from a validated run id.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from testkit.pipeline_harness import Pipeline, ScriptedSageMaker

pytestmark = pytest.mark.slow

VICTIM = "victim-20250101000000-0123456789abcdef"


def test_a_crafted_execution_input_reaches_neither_s3_nor_the_notification(pipeline: Pipeline) -> None:
    p = pipeline
    arts = p.dep.artifacts_bucket
    metrics_key = f"outputs/{VICTIM}/metrics.json"
    p.s3.put_object(Bucket=arts, Key=metrics_key, Body=b'{"eval_f1": 0.91}')
    crafted: dict[str, Any] = {
        "spec": {"version": 1, "name": "x"},  # invalid: Prepare fails, the failure branch runs
        "run": {"run_id": VICTIM, "spec": {"name": "victim"}, "execution_arn": "arn:aws:states:x",
                "uris": {"summary": f"s3://{arts}/{metrics_key}", "outputs": f"s3://{arts}/outputs/{VICTIM}/",
                         "model_output": f"s3://{arts}/models/{VICTIM}/"}},
        "status": {"state": "completed", "job_name": "hfsm-dev-victim-train0"},
        "source": {"bucket": p.dep.data_bucket, "key": "runs/victim.json"},
    }
    with ScriptedSageMaker().installed() as sm:
        arn = p.sfn.start_execution(stateMachineArn=p.dep.fine_tune_arn, name="crafted", input=json.dumps(crafted))[
            "executionArn"]
        desc = p.wait(arn)
    assert desc["status"] == "FAILED" and desc["error"] == "SpecError" and sm.created == []
    body = p.s3.get_object(Bucket=arts, Key=metrics_key)["Body"].read()
    assert body == b'{"eval_f1": 0.91}', "the failure branch overwrote another run's metrics.json"
    keys = [o["Key"] for o in p.s3.list_objects_v2(Bucket=arts, Prefix="outputs/").get("Contents", [])]
    assert keys == [metrics_key]
    (note,) = p.published()
    assert VICTIM not in note["subject"] + note["message"] and "run_id" not in note["attributes"]
    assert "crafted" in note["subject"]  # named after the execution, its only identity
    notify_input = next(json.loads(e["stateEnteredEventDetails"]["input"]) for e in p.history(arn)
                        if e.get("stateEnteredEventDetails", {}).get("name") == "NotifyFailure")
    assert set(notify_input) == {"error", "execution"} and notify_input["execution"]["Name"] == "crafted"
