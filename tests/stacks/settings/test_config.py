"""The environment config: every bad value fails with the key, the value and what is allowed."""

from __future__ import annotations

import copy
import dataclasses
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from hfsm_lambda import naming
from hfsm_lambda.settings import Settings
from stacks.app_builder import REPO_ROOT, cdk_json_context
from stacks.settings.environment import ConfigError, EnvironmentConfig, load_config


def ctx_with(env: str = "dev", **changes: Any) -> dict[str, Any]:
    ctx = copy.deepcopy(cdk_json_context())
    ctx["environments"][env].update(changes)
    return ctx


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_cdk_json_environments_load(env: str) -> None:
    cfg = load_config(cdk_json_context(), env)
    assert isinstance(cfg, EnvironmentConfig)
    assert cfg.name == env and cfg.prefix == f"hfsm-{env}"
    assert len(cfg.availability_zones) >= 2


def test_prod_retains_and_encrypts_traffic_dev_does_not() -> None:
    dev, prod = (load_config(cdk_json_context(), e) for e in ("dev", "prod"))
    assert prod.retain and not dev.retain
    assert prod.inter_container_encryption and prod.fsx.enabled and prod.nat_gateway


@pytest.mark.parametrize(("changes", "expected"), [
    ({"vpc_cidr": "10.0.0.0/33"}, ["vpc_cidr", "10.0.0.0/33", "not a CIDR"]),
    ({"vpc_cidr": "10.0.0.0/8"}, ["vpc_cidr", "/16 to /24"]),
    ({"training_instance_types": ["p4d.24xlarge"]}, ["training_instance_types", "p4d.24xlarge", "ml.<family>.<size>"]),
    ({"fsx": {"enabled": True, "deployment_type": "SCRATCH_2", "storage_capacity_gib": 1000}},
     ["fsx.storage_capacity_gib", "1000", "1200, 2400, then multiples of 2400"]),
    ({"fsx": {"enabled": True, "deployment_type": "SCRATCH_1", "storage_capacity_gib": 4800}},
     ["fsx.storage_capacity_gib", "4800", "multiples of 3600"]),
    ({"fsx": {"deployment_type": "PERSISTENT_2", "storage_capacity_gib": 2400, "per_unit_storage_throughput": 200}},
     ["per_unit_storage_throughput", "200", "125, 250, 500, 1000"]),
    ({"fsx": {"deployment_type": "SCRATCH_3"}}, ["fsx.deployment_type", "SCRATCH_3", "PERSISTENT_2"]),
    ({"fsx": {"enabled": True, "size": 1}}, ["fsx.size", "unknown key", "storage_capacity_gib"]),
    ({"vpc_cdir": "10.0.0.0/16"}, ["vpc_cdir", "unknown key", "vpc_cidr"]),
    ({"max_instance_count": 0}, ["max_instance_count", "1 to 100"]),
    ({"max_instance_count": True}, ["max_instance_count", "must be int"]),
    ({"nat_gateway": "yes"}, ["nat_gateway", "'yes'", "must be bool"]),
    ({"availability_zones": ["eu-west-1a", "eu-west-1b"]}, ["availability_zones", "zones of region us-east-1"]),
    ({"availability_zones": ["us-east-1a"]}, ["availability_zones", "at least 2"]),
    ({"account": "12345"}, ["account", "12-digit"]),
    ({"log_retention_days": 10}, ["log_retention_days", "10", "retention periods"]),
    ({"removal_policy": "keep"}, ["removal_policy", "'retain' or 'destroy'"]),
    ({"notification_emails": ["not-an-email"]}, ["notification_emails", "e-mail"]),
    ({"default_max_runtime_seconds": 30 * 86_400}, ["default_max_runtime_seconds", "28 days"]),
    ({"instance_prices": {"g5.xlarge": 1.0}}, ["instance_prices", "g5.xlarge", "ml.<family>.<size>"]),
    ({"instance_prices": {"ml.g5.xlarge": -1}}, ["instance_prices", "non-negative USD"]),
])
def test_bad_values_name_key_value_and_allowed(changes: dict[str, Any], expected: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(ctx_with(**changes), "dev")
    for fragment in expected:
        assert fragment in str(err.value)


def test_instance_types_are_those_the_lambdas_accept() -> None:
    # A family with '-' (botocore's TrainingInstanceType lists ml.p6-b200.48xlarge): the one pattern, lambda/naming.py.
    ctx = ctx_with(training_instance_types=["ml.p6-b200.48xlarge"],
                   instance_prices={**cdk_json_context()["environments"]["dev"].get("instance_prices", {}),
                                    "ml.p6-b200.48xlarge": 100.0})
    assert load_config(ctx, "dev").training_instance_types == ("ml.p6-b200.48xlarge",)
    with pytest.raises(ConfigError, match="ml.<family>.<size>"):
        load_config(ctx_with(training_instance_types=["ml.p6-b200.48xlarge.x"]), "dev")


def test_all_problems_reported_at_once() -> None:
    with pytest.raises(ConfigError) as err:
        load_config(ctx_with(vpc_cidr="nope", max_instance_count=1000, removal_policy="x"), "dev")
    msg = str(err.value)
    assert "vpc_cidr" in msg and "max_instance_count" in msg and "removal_policy" in msg


def test_unknown_environment_lists_choices() -> None:
    with pytest.raises(ConfigError, match=r"env='staging': unknown environment; choose one of dev, prod"):
        load_config(cdk_json_context(), "staging")


def test_unknown_image_version_fails_with_known_versions() -> None:
    from stacks.assets.image_uris import resolve_images
    cfg = load_config(ctx_with(transformers_version="9.9.9"), "dev")
    with pytest.raises(ConfigError, match="transformers_version"):
        resolve_images(cfg)


def test_bad_config_fails_synth_with_a_clear_message() -> None:
    """`cdk synth` runs app.py with the context in CDK_CONTEXT_JSON: a bad value stops it before any stack."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["CDK_CONTEXT_JSON"] = json.dumps({**ctx_with(vpc_cidr="10.0.0.0/99"), "env": "dev"})
    env["CDK_OUTDIR"] = "/tmp/hfsm-bad-config-out"
    proc = subprocess.run([sys.executable, "app.py"], cwd=REPO_ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode != 0
    assert "vpc_cidr='10.0.0.0/99'" in proc.stderr


# --- security and spend keys ------------------------------------------------------------------------------
@pytest.mark.parametrize(("changes", "expected"), [
    ({"s3_prefix_list_id": "pl-xyz"}, ["s3_prefix_list_id", "pl-xyz", "describe-managed-prefix-lists"]),
    ({"max_run_cost_usd": 0}, ["max_run_cost_usd", "> 0"]),
    ({"max_run_cost_usd": True}, ["max_run_cost_usd", "must be int or float"]),
    ({"max_concurrent_runs": 0}, ["max_concurrent_runs", "1 to 1000"]),
    ({"monthly_budget_usd": -5}, ["monthly_budget_usd", "> 0"]),
    ({"instance_prices": {"ml.g5.xlarge": 1.4}}, ["instance_prices", "ml.g5.2xlarge", "max_run_cost_usd"]),
    ({"remote_code_hub_orgs": ["acme"]}, ["remote_code_hub_orgs", "nat_gateway"]),
    ({"allowed_report_to": ["wandb"]}, ["allowed_report_to", "nat_gateway"]),
    ({"run_submitter_arns": ["alice"]}, ["run_submitter_arns", "IAM role or user ARNs"]),
    ({"manage_sagemaker_log_groups": "yes"}, ["manage_sagemaker_log_groups", "must be bool"]),
])
def test_bad_security_and_spend_values(changes: dict[str, Any], expected: list[str]) -> None:
    with pytest.raises(ConfigError) as err:
        load_config(ctx_with(**changes), "dev")
    for fragment in expected:
        assert fragment in str(err.value)


def test_remote_code_needs_nat_and_then_loads() -> None:
    cfg = load_config(ctx_with("prod", remote_code_hub_orgs=["acme"], allowed_report_to=["mlflow"],
                               run_submitter_arns=["arn:aws:iam::222222222222:role/ci"]), "prod")
    assert cfg.remote_code_hub_orgs == ("acme",) and cfg.allowed_report_to == ("mlflow",)
    for env in ("dev", "prod"):
        c = load_config(cdk_json_context(), env)
        assert c.max_run_cost_usd > 0 and c.max_concurrent_runs >= 1 and c.monthly_budget_usd > 0
        assert c.remote_code_hub_orgs == () and c.allowed_report_to == ()


# --- every setting declared once (lambda/config_fields.py) ----------------------------------------------------
def test_every_config_field_is_a_declared_setting() -> None:
    """Each field is made with `setting(...)`: its doc and checks live in the one declaration, nowhere else."""
    from dataclasses import fields

    from stacks.settings.environment import FsxConfig
    for cls in (EnvironmentConfig, FsxConfig):
        for f in fields(cls):
            assert f.metadata.get("doc"), f"{cls.__name__}.{f.name} is not declared with setting(...)"


@pytest.mark.parametrize("env", ["dev", "prod"])
def test_every_cdk_json_value_is_read_not_defaulted(env: str) -> None:
    raw = cdk_json_context()["environments"][env]
    cfg = load_config(cdk_json_context(), env)
    for key, value in raw.items():
        if key in ("fsx", "tracking"):  # nested settings
            assert {k: getattr(getattr(cfg, key), k) for k in value} == value
        else:
            assert getattr(cfg, key) == (tuple(value) if isinstance(value, list) else value), key


def test_a_changed_value_is_read() -> None:
    # The regression behind the single declaration: poll_seconds missing from a separate type table loaded as 60.
    assert load_config(ctx_with(poll_seconds=5), "dev").poll_seconds == 5


def test_a_key_not_declared_is_an_error_naming_it() -> None:
    """A cdk.json key without a declaration is refused (not dropped, not defaulted): drop `poll_seconds` from a
    declaration and the same cdk.json value fails with its name."""
    from dataclasses import dataclass

    from hfsm_lambda.config_fields import in_range, parse_fields, setting

    @dataclass(frozen=True)
    class WithPoll:
        poll_seconds: int = setting("seconds", default=60, checks=in_range(1, 3600, "1 to 3600 seconds"))

    @dataclass(frozen=True)
    class WithoutPoll:
        max_instance_count: int = setting("instances", default=2)

    errors: list[str] = []
    assert parse_fields(WithPoll, {"poll_seconds": 5}, "environments.dev", errors) == {"poll_seconds": 5}
    assert errors == []
    parse_fields(WithoutPoll, {"poll_seconds": 5}, "environments.dev", errors)
    assert errors == ["environments.dev.poll_seconds: unknown key; allowed keys are max_instance_count"]


@pytest.mark.parametrize(("project", "ok"), [("a", True), ("hfsm", True), ("p" * 16, True), ("p" * 17, False),
                                             ("9lives", False), ("Hfsm", False)])
def test_project_name_pattern(project: str, ok: bool) -> None:
    """1-16 characters, one pattern (lambda/naming.py's PROJECT_NAME) for cdk.json and for the Lambdas' settings."""
    ctx = {**cdk_json_context(), "project": project}
    [project_rule] = {f.name: f.metadata["checks"] for f in dataclasses.fields(Settings)}["project"]
    lambda_pattern = project_rule.pattern
    assert lambda_pattern.pattern == naming.PROJECT_NAME
    assert bool(lambda_pattern.fullmatch(project)) == ok  # the Lambdas' settings agree
    if ok:
        assert load_config(ctx, "dev").prefix == f"{project}-dev"
    else:
        with pytest.raises(ConfigError, match=rf"project='{project}': 1-16 chars of a-z, 0-9 and '-'"):
            load_config(ctx, "dev")


def test_missing_required_key_and_wrong_nested_type() -> None:
    ctx = copy.deepcopy(cdk_json_context())
    del ctx["environments"]["dev"]["region"]
    ctx["environments"]["dev"]["fsx"] = {"per_unit_storage_throughput": "fast"}
    with pytest.raises(ConfigError) as err:
        load_config(ctx, "dev")
    assert "environments.dev.region: missing; it is required" in str(err.value)
    assert "environments.dev.fsx.per_unit_storage_throughput='fast': must be int or null" in str(err.value)


def test_every_declared_key_is_in_the_readme_table() -> None:
    """README's "Environment configuration" table documents each declared key (fsx's as fsx.<key>)."""
    from hfsm_lambda.config_fields import read_keys
    from stacks.settings.environment import FsxConfig
    readme = (REPO_ROOT / "README.md").read_text()
    table = readme[readme.index("## Environment configuration"):readme.index("## Local mode")]
    keys = [k for k in read_keys(EnvironmentConfig) if k != "fsx"]
    keys += [f"fsx.{k}" for k in read_keys(FsxConfig)]
    assert [k for k in keys if f"`{k}`" not in table] == []
