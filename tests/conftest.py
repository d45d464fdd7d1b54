"""Shared test set-up: no AWS credentials, the hypothesis profiles, the synthesized apps, and the grouping that
keeps `pytest -n 2` (pytest-xdist, `make test`) from building an expensive fixture once per worker."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from testkit.shared import HOSTILE_CASES, shared_dir

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
# Local mode's CLI starts an MLflow server over .local-runs/mlflow/ by default: not in the tests, unless a test
# asks for tracking itself (--tracking-uri to a server of its own, tests/e2e/test_tracking_local.py).
os.environ["LOCAL_MODE_TRACKING"] = "off"


def _synth_into(env_name: str) -> Callable[[Path], object]:
    def build(outdir: Path) -> None:
        import copy

        from stacks.app_builder import build_app, cdk_json_context

        build_app(context=copy.deepcopy(cdk_json_context()), env_name=env_name, outdir=str(outdir)).app.synth()

    return build


@pytest.fixture(scope="session")
def dev_outdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dev app synthesized once per session (what `make synth ENV=dev` writes to cdk.out)."""
    return shared_dir(tmp_path_factory, "cdk-out-dev", _synth_into("dev"))


@pytest.fixture(scope="session")
def prod_outdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The prod app synthesized once per session (what `make synth ENV=prod` writes to cdk.out)."""
    return shared_dir(tmp_path_factory, "cdk-out-prod", _synth_into("prod"))


def pytest_sessionstart(session: pytest.Session) -> None:
    """The xdist controller fills the jobs' wheel cache (`.whl/`, stacks/assets/job_wheels.py) once, before the
    workers start: every synth needs it, and two workers filling an empty cache at once would race."""
    config = session.config
    if config.getoption("numprocesses", None) and not hasattr(config, "workerinput"):
        from stacks.assets import job_wheels

        job_wheels.wheel_dir()


# --- pytest-xdist: a fixture that lives in one process goes with the tests that use it ---------------------------
# `make test` runs `pytest -n auto --dist loadgroup` (pyproject's addopts): tests are handed out one by one, except
# the users of one fixture instance, which run together on one worker. Every test that uses a module- or
# class-scoped fixture, or one of the session fixtures below (objects in memory that cannot be shared through a
# folder), is grouped with the other users of the same fixture instance, so that each is still built once per
# session. (xdist's own loadgroup renames the test ids to carry the group, which pytest 9 no longer allows: the
# workers write the groups to a file, and the scheduler below reads them.)
PER_PROCESS_SESSION_FIXTURES = {"dev", "prod", "dev_scratch_fsx", "any_env", "unacknowledged"}
# functions-scoped fixtures that cache per process (the construct tests in tests/stacks: functools.cache over a build)
PER_PROCESS_CACHED_FIXTURES = {"dev", "prod", "any_env", "dev_scratch_fsx"}
GROUPS_ENV = "HFSM_TEST_XDIST_GROUPS"  # the file: set by the controller, inherited by the workers


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("numprocesses", None) and not hasattr(config, "workerinput"):
        folder = Path(tempfile.mkdtemp(prefix="pytest-xdist-groups-"))
        os.environ[GROUPS_ENV] = str(folder / "groups.json")
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    if config.getoption("dist", "no") != "loadgroup" or GROUPS_ENV not in os.environ:
        return None
    from xdist.scheduler import LoadScopeScheduling

    class FixtureGroupScheduling(LoadScopeScheduling):
        """LoadScopeScheduling whose scopes are the fixture groups (one test each otherwise), handed out in the
        workers' collection order (slow tests first)."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # every worker has written the file before it reports its collection
                path = Path(os.environ[GROUPS_ENV])
                self.groups = json.loads(path.read_text()) if path.exists() else {}
            return self.groups.get(nodeid, nodeid)

    config.option.loadscopereorder = False
    return FixtureGroupScheduling(config, log)


def _fixture_keys(item: pytest.Item) -> list[str]:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    keys = []
    for name in info.names_closure:
        defs = info.name2fixturedefs.get(name)
        if not defs:
            continue
        fixturedef = defs[-1]
        scope = fixturedef.scope
        if scope in ("module", "class", "package") or (
                scope == "session" and name in PER_PROCESS_SESSION_FIXTURES) or (
                scope == "function" and name in PER_PROCESS_CACHED_FIXTURES):
            # any_env asks for dev or prod by name (request.getfixturevalue): it goes with both
            for used in (("dev", "prod") if name == "any_env" else (name,)):
                keys.append(f"{used}:{fixturedef.baseid or '.'}")
    return keys


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Groups the users of one fixture instance (union of the fixture keys each test uses); puts the slow tests
    first, so that the long ones start early and the short ones fill the gaps at the end."""
    if not hasattr(config, "workerinput") or GROUPS_ENV not in os.environ:  # not an xdist worker: as they were
        return
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            key = parent[key]
        return key

    per_item = [_fixture_keys(item) for item in items]
    for keys in per_item:
        for key in keys[1:]:
            parent[find(key)] = find(keys[0])
    groups = {item.nodeid: "fixture " + find(keys[0]) for item, keys in zip(items, per_item, strict=True) if keys}
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
    target = Path(os.environ[GROUPS_ENV])
    partial = target.with_name(f"{config.workerinput['workerid']}.json")
    partial.write_text(json.dumps(groups))
    partial.replace(target)  # the workers write the same groups: whichever lands last is complete


# --- hostile run specs: cases per class, summed over the xdist workers (tests/lambda/plan/test_lambda_hostile_runs.py) ---
def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)  # set on an xdist worker only
    counts = session.config.stash.get(HOSTILE_CASES, None)
    if workeroutput is not None and counts:
        workeroutput["hostile_cases"] = dict(counts)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    counts = getattr(node, "workeroutput", {}).get("hostile_cases")
    if counts:
        node.config.stash.setdefault(HOSTILE_CASES, Counter()).update(counts)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    counts = config.stash.get(HOSTILE_CASES, None)
    if counts:
        terminalreporter.write_sep("-", "hostile run specs: cases per class (issue 24)")
        for name, count in sorted(counts.items()):
            terminalreporter.write_line(f"{name}: {count}")
