"""The Lambdas' PIPELINE_SETTINGS: lambda/settings.py's `Settings` (the one declaration), serialized at synth."""

from __future__ import annotations

from typing import Any

from aws_cdk import Stack, Token

from stacks.lambda_modules import lambda_module

_settings = lambda_module("settings")
Settings: Any = _settings.Settings
FsxSettings: Any = _settings.FsxSettings


def settings_json(stack: Stack, settings: Any) -> str:
    """The JSON every Lambda gets. Its literal values are checked against the declaration now, so a bad one
    fails synth rather than every invocation; values known only at deploy time (tokens) are type-checked only."""
    raw = settings.to_dict()
    try:
        Settings.from_dict(raw, placeholder=Token.is_unresolved)
    except lambda_module("errors").SettingsError as err:
        raise ValueError(f"PIPELINE_SETTINGS: {'; '.join(err.problems)}") from None
    return stack.to_json_string(raw)
