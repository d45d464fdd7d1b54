"""What the goodput ledger reads from AWS (lambda/goodput/sources.py), against moto's CloudWatch Logs and S3."""

from __future__ import annotations

import json
import time

from botocore.exceptions import ClientError
from moto import mock_aws

from hfsm_lambda import aws
from hfsm_lambda.goodput import sources as goodput_sources

GROUP = goodput_sources.LOG_GROUP
JOB = "hfsm-dev-run-20260101000000-0123456789abcdef-train0"


def put(logs, stream: str, lines: list[tuple[int, str]]) -> None:
    logs.create_log_stream(logGroupName=GROUP, logStreamName=stream)
    logs.put_log_events(logGroupName=GROUP, logStreamName=stream,
                        logEvents=[{"timestamp": t, "message": m} for t, m in lines])


def test_leader_streams_keep_the_goodput_and_progress_lines_of_each_start(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    aws.reset_clients()
    with mock_aws():
        logs = aws.client("logs")
        assert goodput_sources.leader_streams(logs, JOB) == []  # no log group yet: no stream, no error
        logs.create_log_group(logGroupName=GROUP)
        t = int(time.time() * 1000) - 600_000  # CloudWatch takes events of the last 14 days only
        put(logs, f"{JOB}/algo-1-1000", [(t, "noise"), (t + 500, 'GOODPUT {"event": "startup"}'),
                                        (t + 1000, "PROGRESS global_step=1 max_steps=9")])
        put(logs, f"{JOB}/algo-1-2000", [(t + 2000 + i, f"PROGRESS global_step={i} max_steps=20000")
                                        for i in range(1, 12001)])  # more than one page
        put(logs, f"{JOB}/algo-2-1000", [(t, "PROGRESS global_step=1 max_steps=9")])  # not the leader
        put(logs, f"{JOB}/algo-10-1000", [(t, "PROGRESS global_step=1 max_steps=9")])
        first, second = goodput_sources.leader_streams(logs, JOB)
        assert first["name"] == f"{JOB}/algo-1-1000" and first["first_at"] == (t + 500) / 1000
        assert [m for _, m in first["events"]] == ['GOODPUT {"event": "startup"}', "PROGRESS global_step=1 max_steps=9"]
        assert len(second["events"]) == 12000 and second["events"][-1][1].startswith("PROGRESS global_step=12000")


def test_leader_streams_say_why_a_stream_could_not_be_read():
    class Denied:
        def get_paginator(self, name):
            class Pages:
                def paginate(self, **kwargs):
                    return [{"logStreams": [{"logStreamName": f"{JOB}/algo-1-1", "creationTime": 5000}]}]
            return Pages()

        def get_log_events(self, **kwargs):
            raise ClientError({"Error": {"Code": "AccessDeniedException", "Message": "no"}}, "GetLogEvents")

    (stream,) = goodput_sources.leader_streams(Denied(), JOB)
    assert stream["first_at"] == 5.0 and "AccessDeniedException" in stream["error"] and stream["events"] == []


def test_stall_records_are_read_from_the_checkpoint_prefix(monkeypatch):
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    aws.reset_clients()
    with mock_aws():
        s3 = aws.client("s3")
        s3.create_bucket(Bucket="arts")
        uri = "s3://arts/checkpoints/run-1/"
        assert goodput_sources.read_stalls(s3, uri) == []
        record = {"job": JOB, "last_progress_at": 10.0, "detected_at": 70.0, "host": "algo-2", "rank": 3}
        s3.put_object(Bucket="arts", Key="checkpoints/run-1/_stalls.json",
                      Body=json.dumps({"stalls": [record, "junk"]}).encode())
        assert goodput_sources.read_stalls(s3, uri.rstrip("/")) == [record]
        s3.put_object(Bucket="arts", Key="checkpoints/run-1/_stalls.json", Body=b"not json")
        assert goodput_sources.read_stalls(s3, uri) == []


def test_run_ledger_never_raises():
    ledger = goodput_sources.run_ledger(None, None, None, {"job_names": {}, "uris": {}})
    assert ledger["format"] == 1 and "KeyError" in ledger["error"]
