"""The Lambdas' PIPELINE_SETTINGS: lambda/settings.py's `Settings` (the one declaration), serialized at synth."""

from __future__ import annotations

from aws_cdk import Stack, Token

from hfsm_lambda.errors import SettingsError
from hfsm_lambda.settings import FsxSettings, Settings

__all__ = ["FsxSettings", "Settings", "settings_json"]


def settings_json(stack: Stack, settings: Settings) -> str:
    """The JSON every Lambda gets. Its literal values are checked against the declaration now, so a bad one
    fails synth rather than every invocation; values known only at deploy time (tokens) are type-checked only."""
    raw = settings.to_dict()
    try:
        Settings.from_dict(raw, placeholder=Token.is_unresolved)
    except SettingsError as err:
        raise ValueError(f"PIPELINE_SETTINGS: {'; '.join(err.problems)}") from None
    return stack.to_json_string(raw)
