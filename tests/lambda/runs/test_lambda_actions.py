"""The action per cause of a failed training attempt (lambda/runs/actions.py): one table, matching issue 34's, used
by CheckJob's classification and PlanFallback."""

from __future__ import annotations

import dataclasses

import pytest
from testkit.lambdas import settings_dict

from contract import failure_causes as causes
from hfsm_lambda.errors import FallbackExhaustedError, JobFailedError
from hfsm_lambda.plan import run as planned
from hfsm_lambda.runs import actions, outcomes
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.settings import Settings

SPEC = {"version": 1, "name": "tiny", "task": "text-classification", "model": "bert-base-uncased",
        "data": {"train": {"s3": "s3://hfsm-dev-data/datasets/x/"}}}
REASONS = {
    causes.STALLED: "AlgorithmError: stall watchdog: rank 1 (algo-2, local rank 0) stopped responding ...",
    causes.SIGNAL: "AlgorithmError: rank 1 (algo-2, local rank 0, pid 9) was killed by signal 9 (SIGKILL) after "
                   "step 12 (the last step its peers completed with it)\nconsequences (not the cause): algo-1: rank 1 "
                   "(algo-2, local rank 0) went silent after step 12 (...): RuntimeError: Connection reset by peer",
    causes.COLLECTIVE: "AlgorithmError: RuntimeError: [gloo/transport/tcp/pair.cc:534] Connection reset by peer",
    causes.OOM: "AlgorithmError: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
    causes.EXCEPTION: "AlgorithmError: ValueError: bad batch (after step 7; an unexpected error in the training "
                      "code; the traceback is in the job's log)",
    causes.CONFIGURATION: "AlgorithmError: the training data is missing column(s) ['x']\n(train.py on algo-1, "
                          "rank 0; a settings or data error, exit code 2)",
    causes.INSTANCE: "CapacityError: Unable to provision requested ML compute capacity.",
}


def desc(reason: str) -> dict:
    return {"TrainingJobName": "job-0", "TrainingJobStatus": "Failed", "SecondaryStatus": "Failed",
            "FailureReason": reason}


def run_with(types: list[str], max_attempts: int):
    run = prepare_run(SPEC, Settings.from_dict(settings_dict()))
    return dataclasses.replace(run, run_id="r1", max_attempts=max_attempts, attempts=tuple(
        planned.Attempt(attempt=i, job_name=f"job-{i}", instance_type=t, instance_count=2, spot=False)
        for i, t in enumerate(types)))


def test_the_table_covers_every_cause_as_the_issue_says():
    assert set(actions.ACTIONS) == {*causes.PRECEDENCE, causes.INSTANCE}
    for cause in (causes.STALLED, causes.SIGNAL, causes.COLLECTIVE):
        assert actions.ACTIONS[cause].action == actions.RECOVER_IN_PLACE and actions.ACTIONS[cause].retryable
    assert actions.ACTIONS[causes.INSTANCE].action == actions.NEW_ATTEMPT
    assert actions.ACTIONS[causes.OOM].action == actions.NEW_ATTEMPT_IF_CHANGED
    assert actions.ACTIONS[causes.EXCEPTION].action == actions.ONCE
    assert not actions.ACTIONS[causes.CONFIGURATION].retryable


@pytest.mark.parametrize("cause", sorted(REASONS))
def test_check_job_names_the_cause_and_plan_fallback_follows_the_table(cause):
    status = outcomes.classify("training", desc(REASONS[cause]))
    assert status["cause"] == cause
    assert status["state"] == ("failed" if cause == causes.CONFIGURATION else "retryable")
    run = run_with(["ml.g5.2xlarge", "ml.g5.2xlarge"], 2)
    if cause in (causes.CONFIGURATION, causes.OOM):  # nothing changes in the next attempt: the run ends
        with pytest.raises(JobFailedError):
            outcomes.next_attempt(run, 0, status)
    else:
        assert outcomes.next_attempt(run, 0, status) == 1
        with pytest.raises(FallbackExhaustedError, match="raise fallback.max_attempts"):
            outcomes.next_attempt(run, 1, status)


def test_a_sigkilled_rank_is_retried_not_taken_for_a_script_error():
    status = outcomes.classify("training", desc(REASONS[causes.SIGNAL]))
    assert status["cause"] == causes.SIGNAL and status["state"] == "retryable"


def test_out_of_memory_is_retried_only_on_another_instance_type():
    status = outcomes.classify("training", desc(REASONS[causes.OOM]))
    assert outcomes.next_attempt(run_with(["ml.g5.2xlarge", "ml.g5.12xlarge"], 2), 0, status) == 1
    with pytest.raises(JobFailedError, match="ran out of memory.*per_device_train_batch_size"):
        outcomes.next_attempt(run_with(["ml.g5.2xlarge", "ml.g5.2xlarge"], 2), 0, status)


def test_the_scripts_own_exception_is_retried_once_and_the_same_error_again_ends_the_run():
    status = outcomes.classify("training", desc(REASONS[causes.EXCEPTION]))
    run = run_with(["ml.g5.2xlarge"] * 3, 3)
    assert outcomes.next_attempt(run, 0, status) == 1
    with pytest.raises(JobFailedError, match="the same error as the attempt before"):
        outcomes.next_attempt(run, 1, status, earlier_reason=REASONS[causes.EXCEPTION])
    other = "AlgorithmError: ValueError: bad batch (after step 9; an unexpected error ...)"
    assert outcomes.next_attempt(run, 1, status, earlier_reason=other) == 2  # another step: not the same error


def test_the_advice_printed_with_a_failure_follows_its_cause(settings):
    """A stall that used up its attempts advises looking at the stacks or raising max_attempts, not adding
    fallback options (the issue: a stall was told to add fallback options)."""
    from hfsm_lambda.runs import messages

    base = {"run_id": "r", "reason": "x", "job_name": "j", "links": {"logs": "https://logs"}}
    for cause, words in ((causes.STALLED, "Read the stacks"), (causes.SIGNAL, "Find what killed the rank"),
                         (causes.OOM, "Lower per_device_train_batch_size"),
                         (causes.CONFIGURATION, "Read the training job's CloudWatch logs (link below), fix the "
                                                "settings or data"),
                         (causes.INSTANCE, "Add fallback.options")):
        _, message = messages.failure_notification(settings, {**base, "error": "FallbackExhaustedError",
                                                              "job_status": {"cause": cause}})
        assert f"What to do: {words}" in message, (cause, message)
    _, message = messages.failure_notification(settings, {**base, "error": "FallbackExhaustedError",
                                                          "job_status": {"outcome": "stall"}})
    assert "What to do: Read the stacks" in message
    _, message = messages.failure_notification(settings, {**base, "error": "FallbackExhaustedError"})
    assert "What to do: Add fallback.options" in message  # capacity, as before


def test_check_job_retries_out_of_memory_and_the_scripts_exception_only_where_an_attempt_would_differ():
    job = {"instance_type": "ml.g5.2xlarge", "next_instance_type": "ml.g5.2xlarge"}
    assert actions.state_after(causes.OOM, "retryable", job) == "failed"  # the same type: nothing changes
    assert actions.state_after(causes.OOM, "retryable", {**job, "next_instance_type": "ml.g5.12xlarge"}) == \
        "retryable"
    assert actions.state_after(causes.EXCEPTION, "retryable", job) == "retryable"
    assert actions.state_after(causes.EXCEPTION, "retryable", {**job, "next_instance_type": None}) == "failed"
    for cause in (causes.STALLED, causes.SIGNAL, causes.COLLECTIVE):  # PlanFallback says the attempts are used up
        assert actions.state_after(cause, "retryable", {**job, "next_instance_type": None}) == "retryable"
