"""Run ids, job names, execution names."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import botocore.session
import pytest
from hypothesis import given
from hypothesis import strategies as st
from testkit.lambdas import NAMES

from hfsm_lambda import naming

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


# --- one declaration of the shared patterns and builders (lambda/naming.py) ---------------------------------
# A fragment of each pattern or builder of naming.py, as a copy of it would spell it.
COPY_SIGNATURES = {
    "spec name / run id": "[a-z][a-z0-9-]{0,31}", "instance type": r"ml\.[a-z0-9", "run id hex": "[0-9a-f]{16}",
    "execution name": "[A-Za-z0-9_-]{1,80}", "execution ARN": ':stateMachine:", ":execution:',
    "console link": "console.aws.amazon.com",
}


def test_the_cli_the_config_and_the_spec_use_naming_s_objects():
    from hfsm_lambda.spec import run_spec
    from pipeline_runs.status import console_url
    from runctl import core
    from stacks.settings import environment as config

    assert core.NAME_RE is naming.NAME_RE and core.RUN_ID_RE is naming.RUN_ID_RE
    assert config.INSTANCE_TYPE is naming.INSTANCE_TYPE_RE
    assert run_spec.NAME is naming.NAME and run_spec.INSTANCE_TYPE is naming.INSTANCE_TYPE
    arn = "arn:aws:states:eu-west-1:111111111111:stateMachine:hfsm-dev-fine-tune"
    assert core.execution_arn_for(arn, "r1") == naming.execution_arn(arn, "r1")
    assert console_url(naming.execution_arn(arn, "r1")) == naming.execution_url(
        "eu-west-1", naming.execution_arn(arn, "r1"))


def test_no_copy_of_a_naming_pattern_outside_naming_py():
    repo = Path(__file__).resolve().parents[2]
    sources = [p for d in ("lambda", "runctl", "pipeline_runs", "cloud_assembly", "stacks", "local_mode", "benchmarks") for p in (repo / d).rglob("*.py")]
    sources.append(repo / "app.py")
    copies = [f"{p.relative_to(repo)}: {what}" for p in sources if p.name != "naming.py"
              for what, fragment in COPY_SIGNATURES.items() if fragment in p.read_text()]
    assert not copies, f"import these from lambda/naming.py instead: {copies}"
    assert all(fragment in (repo / "lambda" / "naming.py").read_text() or what == "run id hex"
               for what, fragment in COPY_SIGNATURES.items())  # the signatures still describe naming.py


def test_the_instance_type_pattern_takes_every_sagemaker_instance_type():
    model = botocore.session.get_session().get_service_model("sagemaker")
    for shape in ("TrainingInstanceType", "ProcessingInstanceType"):
        enum = model.shape_for(shape).enum
        assert enum and all(naming.INSTANCE_TYPE_RE.fullmatch(t) for t in enum), shape
    assert "ml.p6-b200.48xlarge" in model.shape_for("TrainingInstanceType").enum
    for bad in ("p4d.24xlarge", "ml.g5", "ml.G5.xlarge", "ml.g5.2xlarge "):
        assert not naming.INSTANCE_TYPE_RE.fullmatch(bad), bad
