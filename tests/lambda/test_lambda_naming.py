"""Run ids, job names, execution names."""

from __future__ import annotations

from datetime import UTC, datetime

import naming
import pytest
from hypothesis import given
from hypothesis import strategies as st
from lambda_testlib import NAMES

# <project>-<env>: each [a-z][a-z0-9-]{0,15} (settings.py), so up to 33 characters.
PROJECTS = st.builds("{}-{}".format, *[st.builds(str.__add__, st.sampled_from("abcxyz"),
                                                 st.text("abcdefghij0123456789-", max_size=15))] * 2)
STAGES = st.sampled_from(sorted(naming.STAGE_CODES))


def test_run_id_format():
    run_id = naming.make_run_id("squad", datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC), "abcdef0123456789ff")
    assert run_id == "squad-20250102030405-abcdef0123456789" and naming.RUN_ID_RE.fullmatch(run_id)
    with pytest.raises(ValueError):
        naming.make_run_id("squad", datetime(2025, 1, 2, tzinfo=UTC), "abcd")  # 16 bits: collides


@given(PROJECTS, NAMES, st.integers(0, 9))
def test_job_names_are_legal_and_distinct(project, name, attempt):
    run_id = naming.make_run_id(name, datetime(2025, 1, 2, tzinfo=UTC), "0f0f" * 4)
    names = {naming.job_name(project, run_id, stage, a) for stage in naming.STAGE_CODES for a in (attempt, attempt + 1)}
    assert len(names) == 2 * len(naming.STAGE_CODES)
    for job in names:
        assert naming.is_job_name(job), job
        assert "0f0f0f0f0f0f0f0f" in job and job.startswith(f"{project}-")  # IAM scopes job names by prefix


def test_short_job_names_keep_the_contract_format():
    run_id = "squad-20250102030405-abcd0123456789ef"
    assert naming.job_name("hfsm-dev", run_id, "train", 1) == f"hfsm-dev-{run_id}-train1"
    long = naming.job_name("hfsm-production", "a" * 32 + "-20250102030405-abcd0123456789ef", "tokenizer_reduce", 0)
    assert len(long) == 63 and long.startswith("hfsm-production-aaa") and long.endswith("-abcd0123456789ef-tokred0")


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
    named = "squad-20250101000000-beef0123456789ab"
    assert naming.run_id_for("squad", {"Name": named}) == named
    assert naming.run_id_for("other", {"Name": named}).startswith("other-")
    assert naming.RUN_ID_RE.fullmatch(first)
    other = {**execution, "Id": execution["Id"] + "x"}  # another execution started in the same second
    assert naming.run_id_for("squad", other) != first


def test_random_run_ids_do_not_collide():
    """The issue's case: many uploads of one spec name in the same second (64 random bits each)."""
    now = datetime(2025, 1, 2, tzinfo=UTC)
    ids = {naming.run_id_for("squad", None, now) for _ in range(20000)}
    assert len(ids) == 20000
