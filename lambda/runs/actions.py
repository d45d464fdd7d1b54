"""What the pipeline does after each cause of a failed training attempt: ONE table (issue 34 point 2), read by
CheckJob's classification (outcomes.classify: retryable or failed) and PlanFallback (outcomes.next_attempt).

The cause comes from the job's FailureReason by contract/failure_causes.py's precedence (stalled > killed by a
signal > out of memory > a peer's collective error > a settings/data error > the script's own exception), or
from SageMaker itself (capacity, spot reclaim: `instance`). Recovery in place happens inside the job
(training_code/hftrain/recovery/: the training processes restarted on the same instances, up to
`recovery.in_job_restarts` times, the in-job half of this table in contract/failure_causes.py IN_JOB_ACTION); a job
that still fails with one of those causes has spent that budget (or has none), and what follows is this table's.

| cause | action |
|---|---|
| stalled, signal, collective (instances healthy) | recover in place; when that budget is spent, a new attempt if `fallback.max_attempts` allows |
| instance (lost, unhealthy, spot reclaim, no capacity) | a new attempt (state machine retry or fallback) from the last durable checkpoint |
| straggler (`stall.stragglers: end`: a rank 20% slower than the fleet) | a new attempt on other instances |
| out-of-memory | a new attempt only if the next attempt's instance type differs (more memory); otherwise the run ends |
| exception (the script's own) | recover in place once; the same error at the same step again ends the run at once |
| configuration (settings or data refused, exit code 2) | the run ends at once: a new attempt fails the same way |
"""

from __future__ import annotations

from dataclasses import dataclass

from contract import failure_causes as causes

RECOVER_IN_PLACE = "recover-in-place"  # in the job first; after the in-job budget, a new attempt
NEW_ATTEMPT = "new-attempt"
NEW_ATTEMPT_IF_CHANGED = "new-attempt-if-something-changes"
ONCE = "recover-in-place-once"
END = "end"


@dataclass(frozen=True)
class Action:
    action: str
    retryable: bool  # may a new attempt follow (CheckJob's `retryable`); PlanFallback decides the conditions
    says: str  # what the pipeline does, in the words the failure and the README use
    next: str = ""  # what the user does when the run ended with this cause (the failure notification's hint)


_RETRY = "a new attempt resumes from the last durable checkpoint if fallback.max_attempts allows"
_IN_PLACE = ("recovered in place in the job (up to recovery.in_job_restarts times); after that, " + _RETRY)
_RAISE = "or raise fallback.max_attempts so that it is retried from the last durable checkpoint"
ACTIONS: dict[str, Action] = {
    causes.STALLED: Action(RECOVER_IN_PLACE, True, _IN_PLACE,
                           "Read the stacks (_stalls/<job>/ under the checkpoint prefix) and the job's log (link "
                           f"below), fix what hung, {_RAISE}."),
    causes.SIGNAL: Action(RECOVER_IN_PLACE, True, _IN_PLACE,
                          "Find what killed the rank the reason names (the host's kernel log: the OOM killer; an "
                          f"operator; a crash), {_RAISE}."),
    causes.COLLECTIVE: Action(RECOVER_IN_PLACE, True, _IN_PLACE,
                              "Read the job's log (link below) for the rank that failed first (the reason names the "
                              f"peer whose heartbeat stopped), {_RAISE}."),
    causes.STRAGGLER: Action(NEW_ATTEMPT, True, "a new attempt on other instances (stall.stragglers: end) from the "
                                                "last durable checkpoint if fallback.max_attempts allows",
                             "A rank ran at least 20% slower than the fleet (the reason names it and its host): "
                             "raise fallback.max_attempts so that a new attempt runs on other instances, or set "
                             "stall.stragglers to warn to keep training at its pace."),
    causes.INSTANCE: Action(NEW_ATTEMPT, True, _RETRY,
                            "Add fallback.options (other instance types, or spot: false for on-demand) or raise "
                            "fallback.max_attempts, then submit again."),
    causes.OOM: Action(NEW_ATTEMPT_IF_CHANGED, True,
                       "a new attempt only on another instance type (fallback.options); otherwise the run ends: "
                       "lower per_device_train_batch_size (raise gradient_accumulation_steps to keep the batch), "
                       "shorten max_seq_length, or add a larger instance type to fallback.options",
                       "Lower per_device_train_batch_size (raise gradient_accumulation_steps to keep the batch), "
                       "shorten max_seq_length, or add a larger instance type to fallback.options; submit again."),
    causes.EXCEPTION: Action(ONCE, True, "recovered in place once (recovery.in_job_restarts > 0; else a new "
                                         "attempt once, from the last durable checkpoint); the same error again "
                                         "ends the run",
                             "Read the training job's CloudWatch logs (link below) for the traceback, fix it, submit "
                             "again."),
    causes.CONFIGURATION: Action(END, False, "the run ends: a new attempt would fail the same way; fix the setting "
                                             "or the data the message names",
                                 "Read the training job's CloudWatch logs (link below), fix the settings or data, "
                                 "submit again."),
}


def action_for(cause: str) -> Action:
    return ACTIONS.get(cause, ACTIONS[causes.EXCEPTION])


def same_error(reason: str, earlier: str | None) -> bool:
    """The script's own exception again: the same first line (the error and the step it names) as the attempt
    before."""
    def first(text: str) -> str:
        return text.removeprefix("AlgorithmError: ").strip().splitlines()[0] if text.strip() else ""

    return bool(earlier) and first(reason) == first(earlier or "")


def state_after(cause: str, state: str, job: dict) -> str:
    """CheckJob's state for a failed training job of this cause: `retryable` only where the table's condition can
    hold (out of memory: the next attempt runs on another instance type; the script's own exception: an attempt
    is left and the job did not already recover from it in place), else `failed` (the run ends at TrainingFailed, saying the cause)."""
    if state != "retryable":
        return state
    following = job.get("next_instance_type")
    if cause == causes.OOM and (not following or following == job.get("instance_type")):
        return "failed"
    if cause == causes.EXCEPTION and (not following or job.get("in_job_restarts")):
        return "failed"  # no attempt left, or the job already recovered from it once in place
    return state
