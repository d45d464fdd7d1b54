"""Bounded reads of job-written data (lambda/bounded_reads.py, issue 36 findings 1 and 3): a job that prints a
million lines or writes a huge file costs a Lambda or runctl a fixed number of calls and bytes, counted here (not
wall time)."""

from __future__ import annotations

import io
import time

import pytest
from botocore.exceptions import ClientError
from moto import mock_aws

from hfsm_lambda import aws
from hfsm_lambda.bounded_reads import LogBudget, ObjectTooLarge, read_object, read_stream
from hfsm_lambda.goodput import sources as goodput_sources

GROUP = goodput_sources.LOG_GROUP
JOB = "hfsm-dev-run-20260101000000-0123456789abcdef-train0"
LINE = "x" * 200  # ~220 MB for a million lines, as the finding's job printed


class MillionLineLogs:
    """GetLogEvents over one stream of a million events, served as the API does (at most 10,000 events or 1 MB a
    page, forward and backward tokens, the same token back at either end), counting calls and bytes served."""

    def __init__(self, stream: str, lines: int = 1_000_000) -> None:
        self.stream, self.lines, self.calls, self.bytes = stream, lines, 0, 0

    def _message(self, i: int) -> str:
        if i == 0:
            return 'GOODPUT {"event": "startup"}'
        if i == self.lines - 1:
            return 'GOODPUT {"event": "end", "step": 999}'
        return f"PROGRESS global_step={i} max_steps=999999" if i % 1000 == 0 else LINE

    def _events(self, start: int, stop: int) -> list[dict]:
        return [{"timestamp": 1_700_000_000_000 + i, "message": self._message(i)} for i in range(start, stop)]

    def get_paginator(self, name: str):
        outer = self

        class Pages:
            def paginate(self, **kwargs):
                return [{"logStreams": [{"logStreamName": outer.stream, "creationTime": 1_700_000_000_000},
                                        {"logStreamName": "another-job/algo-1-1", "creationTime": 1}]}]
        return Pages()

    def get_log_events(self, **kwargs) -> dict:
        assert kwargs["logStreamName"] == self.stream
        per_page = 1024 * 1024 // (len(LINE) + 26)
        token = kwargs.get("nextToken")
        if kwargs.get("startFromHead"):
            start = int(token.split("/")[1]) if token else 0
            stop = min(self.lines, start + per_page)
        else:
            stop = int(token.split("/")[1]) if token else self.lines
            start = max(0, stop - per_page)
        events = self._events(start, stop)
        self.calls += 1
        self.bytes += sum(len(e["message"]) + 26 for e in events)
        return {"events": events, "nextForwardToken": f"f/{stop}", "nextBackwardToken": f"b/{start}"}


def test_a_million_line_stream_costs_a_bounded_number_of_calls_and_bytes():
    logs = MillionLineLogs(f"{JOB}/algo-1-1")
    budget = LogBudget()
    (stream,) = goodput_sources.leader_streams(logs, JOB, budget)  # the other job's stream is no evidence
    assert logs.calls <= budget.head_calls + budget.tail_calls
    assert logs.bytes <= (budget.head_calls + budget.tail_calls) * 1024 * 1024
    assert budget.calls == logs.calls and budget.bytes_read == logs.bytes
    messages = [m for _, m in stream["events"]]
    # the head and the newest events: the start-up report, the first steps and the end report
    assert messages[0] == 'GOODPUT {"event": "startup"}' and messages[-1].startswith('GOODPUT {"event": "end"')
    assert "PROGRESS global_step=1000 max_steps=999999" in messages
    assert "what lies between is not counted" in stream["incomplete"]
    assert [e[0] for e in stream["events"]] == sorted(e[0] for e in stream["events"])


def test_the_run_s_streams_share_one_budget():
    budget = LogBudget(total_calls=5)
    for n in range(4):
        goodput_sources.leader_streams(MillionLineLogs(f"{JOB}/algo-1-{n}"), JOB, budget)
    assert budget.calls == 5


def test_the_ledger_says_it_is_incomplete_when_a_bound_left_events_unread():
    logs = MillionLineLogs(f"{JOB}/algo-1-1")
    desc = {"TrainingJobName": JOB, "TrainingJobStatus": "Completed", "ResourceConfig": {"InstanceCount": 1},
            "SecondaryStatusTransitions": []}

    class Sm:
        def describe_training_job(self, TrainingJobName):  # noqa: N803 - the API's name
            return desc

    class S3:
        def get_object(self, **kwargs):
            raise ClientError({"Error": {"Code": "NoSuchKey", "Message": "none"}}, "GetObject")

    run = {"job_names": {"train": [JOB]}, "uris": {"checkpoint": "s3://arts/checkpoints/run/"}}
    ledger = goodput_sources.run_ledger(Sm(), logs, S3(), run, now=1_700_001_000.0)
    assert ledger["complete"] is False and ledger["incomplete"] and ledger["incomplete"][0] in ledger["notes"]
    assert logs.calls <= LogBudget().head_calls + LogBudget().tail_calls


def test_head_and_tail_against_moto_s_get_log_events(monkeypatch):
    """The same reader against moto's GetLogEvents (its tokens and page size): 25,000 events, one page from each
    end, nothing read twice, the gap said."""
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    aws.reset_clients()
    with mock_aws():
        logs = aws.client("logs")
        logs.create_log_group(logGroupName=GROUP)
        stream = f"{JOB}/algo-1-1"
        logs.create_log_stream(logGroupName=GROUP, logStreamName=stream)
        t = int(time.time() * 1000) - 600_000
        for chunk in range(0, 25_000, 10_000):
            logs.put_log_events(logGroupName=GROUP, logStreamName=stream, logEvents=[
                {"timestamp": t + i, "message": f"PROGRESS global_step={i + 1} max_steps=25000"}
                for i in range(chunk, min(chunk + 10_000, 25_000))])
        read = read_stream(logs, GROUP, stream, LogBudget(head_calls=1, tail_calls=1), lambda m: True)
        steps = [int(m.split("=")[1].split()[0]) for _, m in read.events]
        assert not read.complete and steps[0] == 1 and steps[-1] == 25_000
        assert len(steps) == len(set(steps)) < 25_000 and steps == sorted(steps)
        whole = read_stream(logs, GROUP, stream, LogBudget(head_calls=5), lambda m: True)
        assert whole.complete and len(whole.events) == 25_000 and not whole.note


class Body(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.asked: list[int] = []

    def read(self, size: int | None = -1) -> bytes:
        self.asked.append(-1 if size is None else size)
        return super().read(size)


def test_an_object_is_read_up_to_its_bound_whatever_its_size():
    body = Body(b"x" * 5_000_000)

    class S3:
        def get_object(self, **kwargs):
            return {"Body": body, "ContentLength": 5_000_000}

    with pytest.raises(ObjectTooLarge, match=r"s3://b/k holds 5000000 bytes or more; at most 1000 are read"):
        read_object(S3(), "b", "k", max_bytes=1000)
    assert body.asked == [1001] and body.closed
    small = Body(b'{"a": 1}')

    class Small:
        def get_object(self, **kwargs):
            return {"Body": small, "ContentLength": 8}

    assert read_object(Small(), "b", "k", max_bytes=1000) == b'{"a": 1}'


class Counting:
    """A boto3 CloudWatch Logs client (moto here) whose GetLogEvents calls and returned bytes are counted."""

    def __init__(self, client) -> None:
        self.client, self.calls, self.bytes = client, 0, 0

    def get_paginator(self, name: str):
        return self.client.get_paginator(name)

    def get_log_events(self, **kwargs) -> dict:
        page = self.client.get_log_events(**kwargs)
        self.calls += 1
        self.bytes += sum(len(e["message"]) + 26 for e in page["events"])
        return page


@pytest.mark.slow
@mock_aws
def test_a_million_line_stream_in_moto_costs_a_bounded_number_of_calls_and_bytes():
    """The same bound on moto's own CloudWatch Logs: a stream of a million events really written."""
    logs = aws.client("logs")
    stream = f"{JOB}/algo-1-1"
    logs.create_log_group(logGroupName=GROUP)
    logs.create_log_stream(logGroupName=GROUP, logStreamName=stream)
    total = 1_000_000
    start = int(time.time() * 1000) - total  # CloudWatch (and moto) drops events older than 14 days
    for first in range(0, total, 10_000):  # PutLogEvents takes at most 10,000 events a call
        events = []
        for i in range(first, first + 10_000):
            message = ('GOODPUT {"event": "startup"}' if i == 0 else 'GOODPUT {"event": "end", "step": 999}'
                       if i == total - 1 else f"PROGRESS global_step={i} max_steps=999999" if i % 1000 == 0
                       else "y" * 60)
            events.append({"timestamp": start + i, "message": message})
        logs.put_log_events(logGroupName=GROUP, logStreamName=stream, logEvents=events)
    counted = Counting(logs)
    budget = LogBudget()
    (read,) = goodput_sources.leader_streams(counted, JOB, budget)
    assert counted.calls <= budget.head_calls + budget.tail_calls, counted.calls
    assert counted.bytes <= (budget.head_calls + budget.tail_calls) * 1024 * 1024, counted.bytes
    assert counted.bytes < 0.5 * total * 60  # far from the whole stream's bytes
    messages = [m for _, m in read["events"]]
    assert messages[0] == 'GOODPUT {"event": "startup"}' and messages[-1].startswith('GOODPUT {"event": "end"')
    assert read["incomplete"]
