"""Prepare mints a random stall-board token per run and only that token reaches the run's training jobs (issue 36,
finding 4; contract/stall_board.py)."""

from __future__ import annotations

import dataclasses

from testkit.lambdas import SPEC, settings_dict

from contract import stall_board
from hfsm_lambda.plan import job_requests, request_guard
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.settings import Settings


def test_each_run_gets_its_own_token_and_its_jobs_carry_it():
    settings = Settings(**settings_dict())
    first, second = prepare_run(SPEC, settings), prepare_run(SPEC, settings)
    assert stall_board.TOKEN_RE.fullmatch(first.stall_board_token)
    assert first.stall_board_token != second.stall_board_token
    request = job_requests.training_request(first, settings)
    assert request["Environment"][stall_board.VARIABLE] == first.stall_board_token
    assert request_guard.training_request_problems(request, first, settings, 0) == []


def test_the_guard_refuses_a_token_that_is_not_the_run_s():
    settings = Settings(**settings_dict())
    run = prepare_run(SPEC, settings)
    other = dataclasses.replace(run, stall_board_token="f" * 32)
    forged = job_requests.training_request(other, settings)
    problems = request_guard.training_request_problems(forged, run, settings, 0)
    assert any(p.startswith("Environment: ") for p in problems), problems
    missing = job_requests.training_request(run, settings)
    del missing["Environment"][stall_board.VARIABLE]
    assert any(p.startswith("Environment: ") for p in request_guard.training_request_problems(missing, run, settings, 0))
