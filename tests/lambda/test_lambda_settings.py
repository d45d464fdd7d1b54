"""PIPELINE_SETTINGS parsing."""

from __future__ import annotations

import json

import pytest
from testkit.lambdas import FSX, settings_dict

from hfsm_lambda import settings as settings_module
from hfsm_lambda.errors import SettingsError


def test_valid_settings_parse(settings, fsx_settings):
    assert settings.project_buckets == ("hfsm-dev-data", "hfsm-dev-artifacts")
    assert settings.fsx is None and fsx_settings.fsx.mount_name == FSX["mount_name"]
    assert settings.internet_access is True and settings.instance_prices == {}


def test_extra_keys_are_ignored():
    assert settings_module.Settings.from_dict(settings_dict(something_new=1)).project == "hfsm"


def test_every_problem_is_listed():
    raw = settings_dict(project="Bad Project", max_instance_count=0, spot_default="yes", subnet_ids="subnet-1",
                        code_s3_prefix="s3://bucket/code", security_group_ids=[f"sg-{i}" for i in range(6)],
                        fsx={"file_system_id": "fs-1"}, instance_prices={"ml.g5.2xlarge": -1})
    del raw["topic_arn"]
    with pytest.raises(SettingsError) as info:
        settings_module.Settings.from_dict(raw)
    text = str(info.value)
    for needle in ("topic_arn: missing", "project: expected", "max_instance_count: must be >= 1",
                   "spot_default: expected bool", "subnet_ids: expected list", "code_s3_prefix: expected",
                   "security_group_ids: SageMaker allows at most 5", "fsx: missing or non-string mount_name",
                   "instance_prices.ml.g5.2xlarge: expected a non-negative number"):
        assert needle in text, needle


def test_load_from_the_environment(monkeypatch):
    monkeypatch.delenv(settings_module.ENV_VAR, raising=False)
    with pytest.raises(SettingsError, match="environment variable is not set"):
        settings_module.load_settings()
    monkeypatch.setenv(settings_module.ENV_VAR, "{not json")
    with pytest.raises(SettingsError, match="not valid JSON"):
        settings_module.load_settings()
    monkeypatch.setenv(settings_module.ENV_VAR, json.dumps(settings_dict(poll_seconds=30)))
    assert settings_module.load_settings().poll_seconds == 30
    assert settings_module.load_settings() is settings_module.load_settings()  # parsed once


def test_security_and_spend_settings_are_optional_and_checked():
    plain = settings_module.Settings.from_dict(settings_dict())
    assert plain.max_run_cost_usd is None and plain.max_concurrent_runs is None
    assert plain.remote_code_hub_orgs == () and plain.state_machine_arns == ()
    full = settings_module.Settings.from_dict(settings_dict(
        max_run_cost_usd=250, max_concurrent_runs=4, remote_code_hub_orgs=["acme"], allowed_report_to=["mlflow"],
        state_machine_arns=["arn:aws:states:us-east-1:123456789012:stateMachine:hfsm-dev-fine-tune"]))
    assert full.max_run_cost_usd == 250.0 and full.max_concurrent_runs == 4 and full.remote_code_hub_orgs == ("acme",)
    with pytest.raises(SettingsError) as info:
        settings_module.Settings.from_dict(settings_dict(max_run_cost_usd=-1, max_concurrent_runs=True,
                                                         remote_code_hub_orgs="acme"))
    text = str(info.value)
    assert "max_run_cost_usd" in text and "max_concurrent_runs" in text and "remote_code_hub_orgs" in text
