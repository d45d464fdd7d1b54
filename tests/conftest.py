"""Shared test set-up: import paths for the Lambda asset and the training code, and no AWS credentials."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# Property tests: a quick profile for the edit-test loop, a thorough one for CI (`make test` sets "ci").
settings.register_profile("dev", max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("ci", max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))

REPO = Path(__file__).resolve().parents[1]

# Nothing in the tests may reach AWS: drop real credentials, set fake ones for moto.
for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_SECURITY_TOKEN"):
    os.environ.pop(var, None)
os.environ["AWS_ACCESS_KEY_ID"] = "testing"
os.environ["AWS_SECRET_ACCESS_KEY"] = "testing"
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
os.environ["HF_HUB_OFFLINE"] = "1"
os.environ["JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION"] = "1"
# Node 20 is past its end of life for jsii: the banner would flood test output.
os.environ["JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION"] = "20"
os.environ["HF_DATASETS_OFFLINE"] = "1"
os.environ["TRANSFORMERS_OFFLINE"] = "1"


@pytest.fixture(scope="session")
def dev_outdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dev app synthesized once per session (what `make synth ENV=dev` writes to cdk.out)."""
    import copy

    from stacks.app_builder import build_app, cdk_json_context

    outdir = tmp_path_factory.mktemp("cdk-out-dev")
    build_app(context=copy.deepcopy(cdk_json_context()), env_name="dev", outdir=str(outdir)).app.synth()
    return outdir


@pytest.fixture(scope="session")
def prod_outdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The prod app synthesized once per session (what `make synth ENV=prod` writes to cdk.out)."""
    import copy

    from stacks.app_builder import build_app, cdk_json_context

    outdir = tmp_path_factory.mktemp("cdk-out-prod")
    build_app(context=copy.deepcopy(cdk_json_context()), env_name="prod", outdir=str(outdir)).app.synth()
    return outdir
