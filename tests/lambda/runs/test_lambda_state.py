"""The execution state is declared once (lambda/runs/state.py): the state machines' JSONPaths come from it, and what the
handlers write into the state holds only declared keys."""

from __future__ import annotations

import re
import typing
from pathlib import Path

import pytest
from testkit.lambdas import SPEC, start_watched_job, strict_json

from hfsm_lambda import handlers
from hfsm_lambda.runs import state

REPO = Path(__file__).resolve().parents[3]


def test_path_refuses_what_the_declaration_lacks():
    assert state.path("status", "state") == "$.status.state"
    assert state.path("job", "job_name") == "$.job.job_name"
    with pytest.raises(KeyError, match="'stauts' is not a key of the execution state"):
        state.path("stauts")
    with pytest.raises(KeyError, match="'jobname' is not a member of the state's 'job'"):
        state.path("job", "jobname")


def test_the_state_machines_write_no_jsonpath_of_their_own():
    source = (REPO / "stacks" / "state_machines.py").read_text()
    assert not re.findall(r"[\"']\$\.\w", source), "build JSONPaths with hfsm_lambda.runs.state.path()"
    assert "state_path(" in source


def test_every_key_says_who_writes_and_reads_it():
    keys = state.keys()
    assert list(keys) == list(typing.get_type_hints(state.ExecutionState))
    assert all(k.written_by and k.read_by and k.doc for k in keys.values())


def test_what_the_handlers_write_is_declared(aws_account, put_data, context, monkeypatch):
    """Prepare's output is the state; start_training's is `job`, check_job's is `status`."""
    spec = {**SPEC, "stall": {"minutes": 2, "startup_minutes": 10}}
    run, job, _fake, _clock, _stops = start_watched_job(spec, put_data, context, monkeypatch)
    prepared = strict_json(handlers.prepare({"spec": spec}, context))
    assert set(prepared) <= set(typing.get_type_hints(state.ExecutionState))
    assert set(job) <= set(typing.get_type_hints(state.Job)), set(job) - set(typing.get_type_hints(state.Job))
    status = strict_json(handlers.check_job({"job": job, "previous": {"state": "running"}}, context))
    assert set(status) <= set(typing.get_type_hints(state.Status)), \
        set(status) - set(typing.get_type_hints(state.Status))
    assert status["state"] in typing.get_args(state.JobState)
    assert run["run_id"] == job["run_id"]
