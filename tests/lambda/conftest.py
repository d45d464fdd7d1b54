"""Fixtures for the Lambda tests: settings in the environment, a moto account with the project's resources."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws
from testkit.lambdas import DATA, FSX, REGION, SETTINGS, SPEC, FakeContext, settings_dict, strict_json
from testkit.shared import HOSTILE_CASES

from hfsm_lambda import aws, handlers
from hfsm_lambda import settings as settings_module


@pytest.fixture
def settings() -> settings_module.Settings:
    return settings_module.Settings.from_dict(settings_dict())


@pytest.fixture
def fsx_settings() -> settings_module.Settings:
    return settings_module.Settings.from_dict(settings_dict(fsx=FSX))


@pytest.fixture
def context() -> FakeContext:
    return FakeContext()


@pytest.fixture
def env_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """PIPELINE_SETTINGS in the environment; returns the dict so a test can change it via `set_settings`."""
    values = settings_dict()
    monkeypatch.setenv(settings_module.ENV_VAR, json.dumps(values))
    monkeypatch.setenv("AWS_DEFAULT_REGION", REGION)
    yield values


@pytest.fixture
def set_settings(monkeypatch: pytest.MonkeyPatch) -> Any:
    def apply(**overrides: Any) -> dict[str, Any]:
        values = settings_dict(**overrides)
        monkeypatch.setenv(settings_module.ENV_VAR, json.dumps(values))
        return values
    return apply


@pytest.fixture
def aws_account(env_settings: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """moto with the project's buckets (versioned data bucket), SNS topic and model package group."""
    aws.reset_clients()
    with mock_aws():
        s3 = aws.client("s3")
        for bucket in (SETTINGS["data_bucket"], SETTINGS["artifacts_bucket"]):
            s3.create_bucket(Bucket=bucket)
        s3.put_bucket_versioning(Bucket=SETTINGS["data_bucket"], VersioningConfiguration={"Status": "Enabled"})
        aws.client("sns").create_topic(Name=SETTINGS["topic_arn"].rsplit(":", 1)[1])
        aws.client("sagemaker").create_model_package_group(ModelPackageGroupName=SETTINGS["model_package_group"])
        yield env_settings
    aws.reset_clients()


# One row with the columns every task reads by default (hftrain.tasks: Task.columns), for Prepare's data check.
ANY_TASK_ROW = (b'{"id": "1", "text": "hello world", "label": "a", "question": "which?", "context": "hello world", '
                b'"answers": {"text": ["hello"], "answer_start": [0]}, "summary": "hello"}\n')


def put_objects(prefix_uri: str, count: int, body: bytes = ANY_TASK_ROW) -> None:
    bucket, _, prefix = prefix_uri.removeprefix("s3://").partition("/")
    s3 = aws.client("s3")
    for i in range(count):
        s3.put_object(Bucket=bucket, Key=f"{prefix}part-{i:04d}.jsonl", Body=body)


@pytest.fixture
def put_data() -> Any:
    return put_objects


# --- the handler tests' data and prepared run (test_lambda_handlers.py and its siblings) -----------------
@pytest.fixture
def data(aws_account, put_data):
    put_data(DATA + "train/", 4)
    put_data(DATA + "val/", 1)
    return aws_account


@pytest.fixture
def state(data, context):
    return strict_json(handlers.prepare({"spec": SPEC}, context))


# --- hostile run specs: how many cases each class tried (tests/lambda/plan/test_lambda_hostile_runs.py, issue 24) ---
@pytest.fixture(scope="session")
def hostile_cases(request: pytest.FixtureRequest) -> Counter:
    """class name -> cases tried; printed at the end of the session (tests/conftest.py, from every xdist worker)."""
    return request.config.stash.setdefault(HOSTILE_CASES, Counter())
