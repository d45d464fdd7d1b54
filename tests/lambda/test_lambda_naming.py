"""Run ids, job names, execution names."""

from __future__ import annotations

from datetime import UTC, datetime

import naming
from hypothesis import given
from hypothesis import strategies as st
from lambda_testlib import NAMES

PROJECTS = st.builds(str.__add__, st.sampled_from("abcxyz"), st.text("abcdefghij0123456789-", max_size=15))
STAGES = st.sampled_from(sorted(naming.STAGE_CODES))


def test_run_id_format():
    run_id = naming.make_run_id("squad", datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC), "abcdef")
    assert run_id == "squad-20250102030405-abcd" and naming.RUN_ID_RE.match(run_id)


@given(PROJECTS, NAMES, st.integers(0, 9))
def test_job_names_are_legal_and_distinct(project, name, attempt):
    run_id = naming.make_run_id(name, datetime(2025, 1, 2, tzinfo=UTC), "0f0f")
    names = {naming.job_name(project, run_id, stage, a) for stage in naming.STAGE_CODES for a in (attempt, attempt + 1)}
    assert len(names) == 2 * len(naming.STAGE_CODES)
    for job in names:
        assert naming.is_job_name(job), job
        assert "20250102000000-0f0f" in job


def test_short_job_names_keep_the_contract_format():
    assert naming.job_name("hfsm", "squad-20250102030405-abcd", "train", 1) == "hfsm-squad-20250102030405-abcd-train1"
    long = naming.job_name("hfsm-production", "a" * 32 + "-20250102030405-abcd", "tokenizer_reduce", 0)
    assert len(long) == 63 and long.endswith("-20250102030405-abcd-tokred0")


@given(st.text(max_size=300), st.text(max_size=40), st.text(max_size=40))
def test_execution_names_are_legal_and_deterministic(key, bucket, version):
    name = naming.execution_name_for_object(bucket, key, version)
    assert naming.EXECUTION_NAME_RE.match(name)
    assert name == naming.execution_name_for_object(bucket, key, version)
    assert name != naming.execution_name_for_object(bucket, key, version + "x")


def test_run_id_from_the_execution():
    execution = {"Id": "arn:aws:states:us-east-1:1:execution:sm:abc", "Name": "abc", "StartTime": "2025-03-04T05:06:07Z"}
    first = naming.run_id_for("squad", execution)
    assert first == naming.run_id_for("squad", execution) and first.startswith("squad-20250304050607-")
    assert naming.run_id_for("squad", {"Name": "squad-20250101000000-beef"}) == "squad-20250101000000-beef"
    assert naming.run_id_for("other", {"Name": "squad-20250101000000-beef"}).startswith("other-")
