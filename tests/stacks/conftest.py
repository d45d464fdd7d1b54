"""Synthesizes the dev and prod apps once per test session (cdk-nag runs during synth)."""

from __future__ import annotations

import copy

import pytest
from testkit.synth import Synthesized, nag_findings, synth

from stacks.app_builder import build_app, cdk_json_context


@pytest.fixture(scope="session")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synth(tmp_path_factory, "dev")


@pytest.fixture(scope="session")
def prod(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    return synth(tmp_path_factory, "prod")


@pytest.fixture(scope="session")
def dev_scratch_fsx(tmp_path_factory: pytest.TempPathFactory) -> Synthesized:
    """dev with an FSx SCRATCH_2 file system (import path + auto-import instead of a DRA)."""
    return synth(tmp_path_factory, "dev", {"fsx": {"enabled": True, "deployment_type": "SCRATCH_2",
                                                    "storage_capacity_gib": 1200}})


@pytest.fixture(scope="session", params=["dev", "prod"])
def any_env(request: pytest.FixtureRequest) -> Synthesized:
    return request.getfixturevalue(request.param)



@pytest.fixture(scope="session")
def unacknowledged(tmp_path_factory: pytest.TempPathFactory) -> dict[str, set[tuple[str, str]]]:
    """Every cdk-nag finding of dev and prod, synthesized without the acknowledgements (synth fails on them)."""
    out = {}
    for env in ("dev", "prod"):
        outdir = tmp_path_factory.mktemp(f"cdk-{env}-unacknowledged")
        try:
            build_app(context=copy.deepcopy(cdk_json_context()), env_name=env, outdir=str(outdir),
                      acknowledge=False).app.synth()
        except Exception as err:  # noqa: BLE001 - cdk-nag findings fail synth; the report holds them
            assert "ValidationFailed" in str(err), err
        out[env] = nag_findings(outdir)
    return out
