"""runctl's log reader (pipeline_runs/listing.py, issue 36 finding 1): one read of a million-line stream costs a
bounded number of GetLogEvents pages, says that more lines follow, and the next read goes on from there."""

from __future__ import annotations

from pipeline_runs import listing

STREAM = "j0/algo-1-1"


class MillionLines:
    """GetLogEvents over a stream of a million events, 10,000 a page, counting calls."""

    lines = 1_000_000

    def __init__(self) -> None:
        self.calls = 0

    def get_paginator(self, name: str):
        class Pages:
            def paginate(self, **kwargs):
                return [{"logStreams": [{"logStreamName": STREAM}]}]
        return Pages()

    def get_log_events(self, **kwargs) -> dict:
        self.calls += 1
        start = int(kwargs.get("nextToken") or 0)
        stop = min(self.lines, start + 10_000)
        return {"events": [{"timestamp": i, "message": f"line {i}"} for i in range(start, stop)],
                "nextForwardToken": str(stop) if stop < self.lines else str(start)}


def test_one_read_of_a_million_line_stream_is_bounded_and_the_next_goes_on():
    logs = MillionLines()
    reader = listing.LogReader(logs, [("training", "j0", "train")])
    first = reader.read_new()
    assert logs.calls == listing.MAX_PAGES_PER_READ
    assert len(first) == listing.MAX_PAGES_PER_READ * 10_000 + 1
    assert first[-1][2].startswith(f"(more lines in {STREAM}: this read stops at")
    second = reader.read_new()
    assert second[0][2] == f"line {listing.MAX_PAGES_PER_READ * 10_000}"
    assert logs.calls == 2 * listing.MAX_PAGES_PER_READ
