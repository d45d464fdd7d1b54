"""The trigger against moto: one run per spec content, the execution name from ETag, version or sequencer."""

from __future__ import annotations

import json
from typing import Any

import pytest
from testkit.lambdas import ACCOUNT, REGION, SETTINGS, stand_in_state_machine

from hfsm_lambda import aws, handlers, naming


# --- trigger ---------------------------------------------------------------------------------------------
def s3_event(key: str, version: str | None = "v1", sequencer: str = "0064D3901D00059242",
             etag: str | None = "abc") -> dict[str, Any]:
    obj = {"key": key, "size": 10, "sequencer": sequencer}
    if etag:
        obj["etag"] = etag
    if version:
        obj["version-id"] = version
    return {"version": "0", "id": "e-1", "detail-type": "Object Created", "source": "aws.s3", "account": ACCOUNT,
            "region": REGION, "time": "2025-01-01T00:00:00Z", "resources": [],
            "detail": {"version": "0", "bucket": {"name": SETTINGS["data_bucket"]}, "object": obj,
                       "reason": "PutObject"}}


@pytest.fixture
def state_machine(aws_account, monkeypatch):
    return stand_in_state_machine(monkeypatch)


def test_trigger_starts_one_run_per_spec_content(state_machine, context):
    sfn = aws.client("stepfunctions")
    first = handlers.trigger(s3_event("runs/squad.json"), context)
    assert first["started"] is True
    assert naming.EXECUTION_NAME_RE.match(first["execution_name"])
    execution = sfn.describe_execution(executionArn=first["execution_arn"])
    assert json.loads(execution["input"]) == {"source": {"bucket": SETTINGS["data_bucket"], "key": "runs/squad.json",
                                                         "version_id": "v1"}}
    again = handlers.trigger(s3_event("runs/squad.json"), context)  # EventBridge delivered the event twice
    assert again["execution_arn"] == first["execution_arn"]
    sfn.stop_execution(executionArn=first["execution_arn"])
    after_end = handlers.trigger(s3_event("runs/squad.json"), context)  # ... or after the run ended
    assert after_end == {"started": False, "already_started": True, "execution_arn": first["execution_arn"],
                         "execution_name": first["execution_name"]}
    # The same content uploaded again (a new version, same ETag) is the same run ...
    same = handlers.trigger(s3_event("runs/squad.json", version="v2"), context)
    assert same["execution_arn"] == first["execution_arn"] and same["started"] is False
    # ... a changed spec is a new run.
    handlers.trigger(s3_event("runs/squad.json", version="v3", etag="def"), context)
    assert len(sfn.list_executions(stateMachineArn=state_machine)["executions"]) == 2


def test_trigger_without_etag_uses_version_then_sequencer_and_ignores_other_keys(state_machine, context):
    a = handlers.trigger(s3_event("runs/x.json", version=None, sequencer="01", etag=None), context)
    b = handlers.trigger(s3_event("runs/x.json", version=None, sequencer="02", etag=None), context)
    assert a["execution_name"] != b["execution_name"]
    assert handlers.trigger(s3_event("datasets/x.json"), context)["started"] is False
    assert handlers.trigger(s3_event("runs/x.txt"), context)["started"] is False
    long_key = "runs/" + "deep/" * 40 + "spec with spaces.json"
    name = handlers.trigger(s3_event(long_key), context)["execution_name"]
    assert len(name) <= 80 and naming.EXECUTION_NAME_RE.match(name)
