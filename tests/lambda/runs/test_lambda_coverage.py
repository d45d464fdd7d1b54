"""The run summary's data coverage (lambda/runs/coverage.py): the final job's own per-host record from
`_history.json`, totals per channel, every skipped object named; job-written shapes only."""

from __future__ import annotations

from hfsm_lambda.runs import coverage

SKIP = {"name": "notes.txt", "reason": "an extension the reader does not take"}
DATA = {"train": {"sharded": True, "hosts": [
            {"host": "algo-1", "objects": 2, "read": 2, "rows": 600, "skipped": []},
            {"host": "algo-2", "objects": 2, "read": 1, "rows": 200, "skipped": [SKIP]}]},
        "validation": {"sharded": False, "hosts": [
            {"host": "algo-1", "objects": 1, "read": 1, "rows": 50, "skipped": []},
            {"host": "algo-2", "objects": 1, "read": 1, "rows": 50, "skipped": []}]}}


def test_the_final_job_s_last_start_counts_with_totals_per_channel():
    starts = [{"job": "j-0", "data": {"train": {"sharded": True, "hosts": []}}},
              {"job": "j-1", "data": {"train": {"sharded": False, "hosts": []}}},
              {"job": "j-1", "data": DATA}, {"job": "j-2"}]
    found = coverage.from_history(starts, "j-1", ("data.validation: 1 object(s) ... will be skipped: x",))
    train, validation = found["channels"]["train"], found["channels"]["validation"]
    assert (train["rows"], train["objects"], train["read"]) == (800, 4, 3)  # sharded: the hosts' sum
    assert (validation["rows"], validation["objects"], validation["read"]) == (50, 1, 1)  # replicated: one host's
    assert train["hosts"][1]["skipped"] == [SKIP]
    assert found["prepare_skipped"] == ["data.validation: 1 object(s) ... will be skipped: x"]
    assert coverage.from_history(starts, "j-2", ()) is None  # no record: said as unknown, not as zero
    assert coverage.from_history("not a list", "j-1", ()) is None


def test_the_lines_show_rows_and_objects_per_host_against_the_totals():
    lines = coverage.coverage_lines(coverage.from_history([{"job": "j", "data": DATA}], "j", ()))
    assert lines == [
        "Data coverage (rows and objects read per host, against the channel's totals):",
        "  train (ShardedByS3Key: each host its own objects): 800 rows from 3 of 4 object(s)",
        "    algo-1: 600 rows from 2 of 2 object(s) (75% of the rows)",
        "    algo-2: 200 rows from 1 of 2 object(s) (25% of the rows)",
        "    skipped on algo-2: notes.txt (an extension the reader does not take)",
        "  validation (every host reads all of it): 50 rows from 1 of 1 object(s)",
        "    each host: 50 rows from 1 of 1 object(s)"]
    assert coverage.coverage_lines(None) == ["Data coverage: not reported by the job"]


def test_job_written_shapes_only():
    hostile = {"train": {"sharded": True, "hosts": [{"host": "algo-1", "objects": -1, "read": 1, "rows": 2},
                                                    {"host": 7, "objects": 1, "read": True, "rows": 2},
                                                    {"host": "x" * 999, "objects": 1, "read": 1, "rows": 2,
                                                     "skipped": ["no", {"name": 3}]}]},
               "bad": "channel"}
    found = coverage.from_history([{"job": "j", "data": hostile}], "j", ())
    (host,) = found["channels"]["train"]["hosts"]
    assert len(host["host"]) == coverage.MAX_TEXT and host["skipped"] == [{"name": "?", "reason": "?"}]
    assert list(found["channels"]) == ["train"]
