"""Helpers for the construct-level tests: each construct built alone in a bare app with the config it needs."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk import aws_kms as kms
from aws_cdk.assertions import Template

from stacks.app_builder import cdk_json_context
from stacks.settings.environment import EnvironmentConfig, load_config


def env_config(name: str, overrides: dict[str, Any] | None = None) -> EnvironmentConfig:
    context = copy.deepcopy(cdk_json_context())
    if overrides:
        context["environments"][name].update(overrides)
    return load_config({"project": context.get("project", "hfsm"), "environments": context["environments"]}, name)


def bare_app(config: EnvironmentConfig) -> tuple[cdk.App, cdk.Environment]:
    app = cdk.App()
    # as ProjectApp does: pinned zones answer CDK's availability-zone lookup (no AWS credentials)
    app.node.set_context(f"availability-zones:account={config.account}:region={config.region}",
                         list(config.availability_zones))
    return app, cdk.Environment(account=config.account, region=config.region)


def bare_key(app: cdk.App, env: cdk.Environment) -> kms.IKey:
    return kms.Key(cdk.Stack(app, "KeyStack", env=env), "Key")


@dataclass
class Built:
    config: EnvironmentConfig
    construct: Any
    template: Template

    @property
    def json(self) -> dict[str, Any]:
        return self.template.to_json()



def env_fixtures(build: Callable[[str], Built]) -> tuple:
    """`dev`, `prod` and `any_env` (both) fixtures over `build(env_name)`, each environment built once."""
    cached = functools.cache(build)

    @pytest.fixture
    def dev() -> Built:
        return cached("dev")

    @pytest.fixture
    def prod() -> Built:
        return cached("prod")

    @pytest.fixture(params=["dev", "prod"])
    def any_env(request: pytest.FixtureRequest) -> Built:
        return cached(request.param)

    return dev, prod, any_env
