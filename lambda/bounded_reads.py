"""Bounded reads of what a job can write: S3 objects and CloudWatch Logs streams.

A training job runs code that prints what it likes and writes files the pipeline reads back (the heartbeat, the
stall records, the checkpoint markers, the history file). Every such read by a Lambda (256 MB, 60 s) or by runctl
goes through here, so that a job printing a million lines or writing a gigabyte file costs the reader a fixed,
small amount: at most `max_bytes` of an object, at most a budget of GetLogEvents calls (each returns at most 1 MB
or 10,000 events, the API's own bound) per stream and per caller. What was left unread is said, never guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


class ObjectTooLarge(ValueError):
    """An object over the reader's bound: nothing of it is used."""


def read_object(s3: Any, bucket: str, key: str, *, max_bytes: int) -> bytes:
    """The object's bytes; ObjectTooLarge when it holds more than `max_bytes` (never more than max_bytes + 1 bytes
    are read from the response, whatever ContentLength says); the client's errors as they are."""
    response = s3.get_object(Bucket=bucket, Key=key)
    body = response["Body"]
    try:
        data = body.read(max_bytes + 1)
    finally:
        body.close()
    size = max(int(response.get("ContentLength") or 0), len(data))
    if size > max_bytes:
        raise ObjectTooLarge(f"s3://{bucket}/{key} holds {size} bytes or more; at most {max_bytes} are read")
    return data


@dataclass
class LogBudget:
    """What a caller may spend on GetLogEvents: per stream from its head and from its tail, and in all."""
    head_calls: int = 6
    tail_calls: int = 6
    total_calls: int = 40
    total_bytes: int = 40 * 1024 * 1024
    calls: int = 0
    bytes_read: int = 0

    def spent(self) -> bool:
        return self.calls >= self.total_calls or self.bytes_read >= self.total_bytes

    def charge(self, page: dict[str, Any]) -> list[dict[str, Any]]:
        events = page.get("events") or []
        self.calls += 1
        self.bytes_read += sum(len(str(e.get("message", ""))) + 26 for e in events)  # 26: the API's per-event size
        return events


@dataclass
class StreamRead:
    """The kept events of one stream, oldest first, and whether anything between its head and tail was left."""
    events: list[list[Any]] = field(default_factory=list)  # [epoch seconds, message]
    complete: bool = True
    note: str = ""


def _page(logs: Any, budget: LogBudget, **kwargs: Any) -> tuple[list[dict[str, Any]], str | None]:
    page = logs.get_log_events(**kwargs)
    tokens = ("nextForwardToken" if kwargs.get("startFromHead") else "nextBackwardToken")
    return budget.charge(page), page.get(tokens)


def _from_head(logs: Any, group: str, stream: str, budget: LogBudget) -> tuple[list[dict[str, Any]], bool]:
    """Events from the head until the stream's end (True) or the head's budget (False)."""
    kwargs: dict[str, Any] = {"logGroupName": group, "logStreamName": stream, "startFromHead": True}
    read: list[dict[str, Any]] = []
    for _ in range(budget.head_calls):
        if budget.spent():
            return read, False
        events, token = _page(logs, budget, **kwargs)
        read += events
        if not events or not token or token == kwargs.get("nextToken"):
            return read, True
        kwargs["nextToken"] = token
    return read, False


def _from_tail(logs: Any, group: str, stream: str, budget: LogBudget, after: float) -> list[dict[str, Any]]:
    """Events from the tail backwards, newest first, down to timestamp `after` (ms) or the tail's budget."""
    kwargs: dict[str, Any] = {"logGroupName": group, "logStreamName": stream, "startFromHead": False}
    read: list[dict[str, Any]] = []
    for _ in range(budget.tail_calls):
        if budget.spent():
            break
        events, token = _page(logs, budget, **kwargs)
        read += reversed(events)  # each page is oldest first
        if not events or not token or token == kwargs.get("nextToken") or events[0]["timestamp"] <= after:
            break
        kwargs["nextToken"] = token
    return read


def read_stream(logs: Any, group: str, stream: str, budget: LogBudget, keep: Callable[[str], bool]) -> StreamRead:
    """The events of `stream` whose message `keep` accepts, oldest first: all of them when the stream fits the
    head's budget, else its head and its tail (the newest events) with a note of the gap."""
    head, whole = _from_head(logs, group, stream, budget)
    events = head
    out = StreamRead()
    if not whole:
        last = head[-1]["timestamp"] if head else float("-inf")
        seen = {(e["timestamp"], e.get("message")) for e in head if e["timestamp"] == last}
        tail = [e for e in _from_tail(logs, group, stream, budget, last)
                if e["timestamp"] > last or (e["timestamp"] == last and (e["timestamp"], e.get("message")) not in seen)]
        events = head + sorted(tail, key=lambda e: e["timestamp"])
        out.complete = False
        out.note = (f"{group}/{stream}: read its first {len(head)} and last {len(tail)} events only (the bound of "
                    f"{budget.head_calls}+{budget.tail_calls} GetLogEvents calls per stream, {budget.total_calls} "
                    f"and {budget.total_bytes // (1024 * 1024)} MB per reader); what lies between is not counted")
    out.events = [[e["timestamp"] / 1000, str(e.get("message", ""))] for e in events
                  if keep(str(e.get("message", "")))]
    out.events.sort(key=lambda e: e[0])
    return out
