"""Synthesizes the dev and prod apps once per test session (cdk-nag runs during synth)."""

from __future__ import annotations

import pytest
from synth_helpers import Synthesized, synth


@pytest.fixture(scope="session")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synth(tmp_path_factory, "dev")


@pytest.fixture(scope="session")
def prod(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synth(tmp_path_factory, "prod")


@pytest.fixture(scope="session", params=["dev", "prod"])
def any_env(request: pytest.FixtureRequest) -> Synthesized:
    return request.getfixturevalue(request.param)

