"""The dev app synthesized once; each test deploys it into a fresh moto account."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto import mock_aws

from stacks.app_builder import cdk_json_context

DEV_ACCOUNT = cdk_json_context()["environments"]["dev"]["account"]


@pytest.fixture
def pipeline(dev_outdir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[object]:
    from testkit.pipeline_harness import Pipeline

    # The templates name the dev account literally (bucket names, ARNs): moto must use the same one.
    monkeypatch.setenv("MOTO_ACCOUNT_ID", DEV_ACCOUNT)
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}):
        p = Pipeline(dev_outdir)
        try:
            yield p
        finally:
            p.emulator.close()
    os.environ.pop("MOTO_ACCOUNT_ID", None)
