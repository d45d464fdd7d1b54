"""The heartbeat is the job's word (issue 36, finding 2): CheckJob's outside stall watch parses `_heartbeat.json`
strictly (a bad one is no heartbeat, never a ValueError) and holds the limit it states within the spec's bounds
(a limit of 1e12 cannot switch the watch off); the file is read up to its size bound (finding 3)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta

import pytest

from contract import heartbeat as heartbeat_file
from hfsm_lambda.watch import stalls as stall_watch

T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
JOB = "hfsm-dev-run-train0"
STALL = {"minutes": "auto", "startup_minutes": 60, "action": "retry"}


def beat(**changes):
    return {"job": JOB, "step": 57, "phase": "train", "kind": "train", "moved_at": T0.timestamp(),
            "at": T0.timestamp(), "limit_seconds": 600.0, **changes}


@pytest.mark.parametrize("bad", [
    {"at": "soon"}, {"moved_at": "0x10"}, {"limit_seconds": "1e12x"}, {"step": -1}, {"step": True},
    {"job": ["x"]}, {"phase": "p" * 1000}, {"limit_seconds": 0}, {"limit_seconds": None},
])
def test_a_malformed_heartbeat_is_no_heartbeat_never_an_error(bad):
    text = json.dumps(beat(**bad))
    assert heartbeat_file.parse_heartbeat(text) is None
    # the watch given such a dict directly counts from the Training start, as with no heartbeat
    report, stop = stall_watch.watch(None, beat(**bad), job_name=JOB, now=T0 + timedelta(minutes=30),
                                     since=T0, stall=STALL)
    assert not stop and report["threshold_minutes"] == 65.0


def test_non_finite_numbers_and_unknown_keys_are_not_taken():
    assert heartbeat_file.parse_heartbeat(json.dumps(beat()).replace("600.0", "Infinity")) is None
    # the known fields only; the optional ones (what each rank does, stragglers) as none when absent
    assert heartbeat_file.parse_heartbeat(json.dumps(beat(extra="x" * 100))) == {
        **beat(), "doing": None, "ranks": [], "stragglers": []}
    bad_entries = {**beat(), "doing": "x" * 10_000, "ranks": [{"rank": 1, "host": "algo-2", "nested": {"a": 1}},
                                                              "not an entry"], "stragglers": "not a list"}
    parsed = heartbeat_file.parse_heartbeat(json.dumps(bad_entries))
    assert parsed["doing"] is None and parsed["ranks"] == [{"rank": 1, "host": "algo-2"}]
    assert parsed["stragglers"] == []
    caught_up = {**beat(), "stragglers": [{"rank": 1, "slower": 0.5, "now": False, "nested": [1]}]}
    assert heartbeat_file.parse_heartbeat(json.dumps(caught_up))["stragglers"] == [{"rank": 1, "slower": 0.5,
                                                                                    "now": False}]


def test_a_huge_limit_is_held_to_the_spec_s_bounds():
    now = T0 + timedelta(days=8)  # more than the spec's longest limit (10080 minutes) without progress
    report, stop = stall_watch.watch(None, beat(limit_seconds=1e12, at=now.timestamp()), job_name=JOB, now=now,
                                     since=T0, stall=STALL)
    assert stop and report["threshold_minutes"] == 10080 + stall_watch.MARGIN_MINUTES
    # with a number for stall.minutes the job's limit can be no longer than the longer of the two
    report, stop = stall_watch.watch(None, beat(limit_seconds=1e12, at=(T0 + timedelta(hours=3)).timestamp()),
                                     job_name=JOB, now=T0 + timedelta(hours=3), since=T0,
                                     stall={**STALL, "minutes": 30})
    assert stop and report["threshold_minutes"] == 60 + stall_watch.MARGIN_MINUTES


def test_an_oversize_heartbeat_is_read_up_to_its_bound_and_ignored():
    asked = []

    class Body(io.BytesIO):
        def read(self, size=-1):
            asked.append(size)
            return super().read(size)

    class S3:
        def get_object(self, **kwargs):
            return {"Body": Body(b" " * 50_000_000 + json.dumps(beat()).encode()), "ContentLength": 50_000_000}

    assert stall_watch.read_heartbeat(S3(), "s3://arts/checkpoints/run/") is None
    assert asked == [heartbeat_file.MAX_CHARS + 1]
