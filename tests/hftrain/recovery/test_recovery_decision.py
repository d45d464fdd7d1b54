"""Recovery in place, the decision every rank's supervisor reaches (hftrain/recovery/decision.py): one cause by the
contract's precedence whatever order the outcomes arrive in, the in-job half of the one action table, the budget,
and the once-per-error rule for the script's own exception."""

from __future__ import annotations

import itertools

import pytest

from contract import failure_causes as causes
from hfsm_lambda.runs import actions
from hftrain.recovery import supervisor
from hftrain.recovery.decision import DONE, END, RECOVER, Outcome, decide

OK0 = Outcome(rank=0, host="algo-1", exit_code=0)
KILLED = Outcome(rank=1, host="algo-2", exit_code=-9, step=30, at=10.0)
PEER = Outcome(rank=0, host="algo-1", exit_code=1, at=9.5,
               text="RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer [127.0.0.1]:8064")
ENDED = Outcome(rank=2, host="algo-2", exit_code=-9, at=21.0, ended_by_supervisor=True)
BUG = Outcome(rank=1, host="algo-2", exit_code=1, at=5.0,
              text="InjectedError: injected error after step 20 on rank 1 (after step 20; an unexpected error in the "
                   "training code)")
OOM = Outcome(rank=1, host="algo-2", exit_code=1, text="torch.OutOfMemoryError: CUDA out of memory (after step 3)")
CONFIG = Outcome(rank=0, host="algo-1", exit_code=2, text="ERROR: learning_rate: expected a number")
STALL = Outcome(rank=0, host="algo-1", exit_code=75, text="stall watchdog: rank 1 (algo-2, local rank 0) stopped "
                "responding (its process is frozen or SIGSTOPped: not even its watchdog thread runs)")


def test_every_rank_finished_is_done():
    assert decide([OK0, Outcome(rank=1, host="algo-2", exit_code=0)], earlier=[], budget=2).action == DONE


@pytest.mark.parametrize("order", list(itertools.permutations([KILLED, PEER, ENDED])))
def test_a_killed_rank_is_the_cause_whatever_order_the_outcomes_arrive_in(order):
    decision = decide(list(order), earlier=[], budget=2)
    assert decision.action == RECOVER
    assert decision.cause.cause == causes.SIGNAL and decision.cause.rank == 1
    assert "killed by signal 9 (SIGKILL) after step 30" in decision.cause.text
    assert "recovery 1 of 2 in place" in decision.why
    assert {c.rank for c in decision.consequences} == {0, 2}


def test_a_stall_wins_over_the_frozen_rank_killed_and_the_peers_errors():
    decision = decide([KILLED, PEER, STALL], earlier=[], budget=2)
    assert decision.action == RECOVER and decision.cause.cause == causes.STALLED
    assert (decision.cause.rank, decision.cause.host) == (1, "algo-2")  # the rank the verdict names, not its writer


def test_the_budget_ends_the_job_and_says_what_follows():
    decision = decide([KILLED, PEER], earlier=["a", "b"], budget=2)
    assert decision.action == END
    assert "budget is spent (2 of recovery.in_job_restarts=2)" in decision.why
    assert "fallback.max_attempts" in decision.why
    assert decide([KILLED], earlier=[], budget=0).action == END


def test_the_scripts_own_exception_is_recovered_once_then_the_same_error_ends_the_run():
    first = decide([BUG, PEER], earlier=[], budget=5)
    assert first.action == RECOVER and first.cause.cause == causes.EXCEPTION
    again = decide([PEER, BUG], earlier=[first.key], budget=5)
    assert again.action == END and "same error at the same step" in again.why
    other = Outcome(rank=1, host="algo-2", exit_code=1, text="KeyError: 'label' (after step 40)")
    assert decide([other], earlier=[first.key], budget=5).action == RECOVER  # another error: its own once


@pytest.mark.parametrize("outcome", [OOM, CONFIG])
def test_out_of_memory_and_a_settings_error_are_not_recovered_in_place(outcome):
    decision = decide([outcome, OK0], earlier=[], budget=2)
    assert decision.action == END and "not recovered in place" in decision.why


def test_a_worker_its_supervisor_ended_is_never_the_cause():
    decision = decide([ENDED, PEER], earlier=[], budget=2)
    assert decision.cause.rank == 0 and decision.cause.cause == causes.COLLECTIVE


def test_outcomes_travel_through_the_store_unchanged():
    for outcome in (KILLED, PEER, ENDED, BUG):
        assert Outcome.from_json(outcome.to_json()) == outcome


def test_the_in_job_half_agrees_with_the_pipelines_action_table():
    """One table (lambda/runs/actions.py): recover in place <-> in place while the budget lasts; once <-> once."""
    for cause, action in actions.ACTIONS.items():
        in_job = causes.IN_JOB_ACTION[cause]
        expected = {actions.RECOVER_IN_PLACE: causes.IN_PLACE, actions.ONCE: causes.IN_PLACE_ONCE}.get(
            action.action, causes.NOT_IN_PLACE)
        assert in_job == expected, cause


@pytest.mark.parametrize(("argv", "restarts"), [([], supervisor.DEFAULT_RESTARTS), (["--in_job_restarts", "0"], 0),
                                                (["--x", "1", "--in_job_restarts=3"], 3),
                                                (["--in_job_restarts", "many"], 0)])
def test_the_budget_is_read_from_the_toolkits_arguments(argv, restarts):
    assert supervisor.restarts_from_argv(argv) == restarts


def test_only_a_torchrun_worker_with_a_budget_is_supervised():
    torchrun = {"TORCHELASTIC_RUN_ID": "x", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}
    assert supervisor.wanted([], torchrun)
    assert not supervisor.wanted(["--in_job_restarts", "0"], torchrun)
    assert not supervisor.wanted([], {})  # `python train.py` on its own: the training runs in this process
