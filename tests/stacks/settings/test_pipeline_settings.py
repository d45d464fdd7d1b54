"""PIPELINE_SETTINGS is lambda/settings.py's declaration, built and serialized by the pipeline stack."""

from __future__ import annotations

import copy
import dataclasses
import json

import pytest
from testkit.synth import Synthesized, resources

from hfsm_lambda import HANDLER_MODULE, config_fields
from hfsm_lambda import settings as settings_module
from stacks import pipeline_stack
from stacks.app_builder import build_app, cdk_json_context

DEPLOY_TIME = "<deploy-time>"  # a reference CloudFormation resolves (ARNs of other stacks' resources)
DECLARED = {f.name for f in dataclasses.fields(settings_module.Settings)}
NULLABLE = {f.name for f in dataclasses.fields(settings_module.Settings) if f.default is None}


def _serialized(s: Synthesized) -> dict:
    fn = next(f for f in resources(s.template_json("pipeline"), "AWS::Lambda::Function").values()
              if f["Properties"]["Handler"] == f"{HANDLER_MODULE}.prepare")
    body = fn["Properties"]["Environment"]["Variables"]["PIPELINE_SETTINGS"]
    parts = body["Fn::Join"][1] if isinstance(body, dict) else [body]
    return json.loads("".join(p if isinstance(p, str) else DEPLOY_TIME for p in parts))


def test_the_stack_sets_every_declared_setting_and_nothing_else(any_env: Synthesized) -> None:
    raw = _serialized(any_env)
    # CDK's toJsonString leaves out nulls: only a setting whose default is null may be absent (fsx off).
    assert set(raw) <= DECLARED and DECLARED - set(raw) <= NULLABLE, DECLARED ^ set(raw)
    # What the stack wrote is what the Lambdas parse (deploy-time values are strings here).
    parsed = settings_module.Settings.from_dict(raw, placeholder=lambda v: DEPLOY_TIME in v)
    assert parsed.max_instance_count == any_env.config.max_instance_count
    assert parsed.allowed_instance_types == any_env.config.training_instance_types


def _build(env: str = "dev", context: dict | None = None) -> None:
    build_app(context=context or copy.deepcopy(cdk_json_context()), env_name=env)


def test_a_declared_setting_the_stack_does_not_set_fails_synth(monkeypatch: pytest.MonkeyPatch) -> None:
    @dataclasses.dataclass(frozen=True, kw_only=True)
    class WithNewSetting(settings_module.Settings):
        new_limit: int = config_fields.setting("a setting added to the declaration", default=3,
                                               checks=config_fields.at_least(1))

    monkeypatch.setattr(pipeline_stack, "Settings", WithNewSetting)
    with pytest.raises(TypeError, match="not set: new_limit"):
        _build()


def test_a_literal_setting_the_lambdas_would_reject_fails_synth() -> None:
    context = copy.deepcopy(cdk_json_context())
    context["environments"]["seventeen-chars-x"] = context["environments"]["dev"]
    with pytest.raises(ValueError, match=r"PIPELINE_SETTINGS: environment: expected \[a-z\]"):
        _build("seventeen-chars-x", context)
