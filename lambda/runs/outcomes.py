"""What a finished (or running) job means: classification, fallback sequencing, metrics, cost. Pure."""

from __future__ import annotations

import math
import re
from datetime import datetime
from typing import Any

from contract import failure_causes as causes
from contract import stall_records
from hfsm_lambda.errors import FallbackExhaustedError, JobFailedError
from hfsm_lambda.plan.run import Run
from hfsm_lambda.runs import actions

RUNNING, COMPLETED, RETRYABLE, FAILED = "running", "completed", "retryable", "failed"
CAPACITY_RE = re.compile(r"insufficient\s*(instance\s*)?capacity|capacity\s*error", re.IGNORECASE)
MAX_WAIT = "MaxWaitTimeExceeded"
STALL = "stall"  # the `outcome` of a job ended by a stall (in the job, or by CheckJob from outside)


def _failure_reason(job_type: str, status: str, desc: dict[str, Any]) -> str:
    """SageMaker's FailureReason (or ExitMessage); a failed processing job's own message first."""
    reason = desc.get("FailureReason") or desc.get("ExitMessage") or ""
    if job_type == "processing" and status == "Failed" and (desc.get("ExitMessage") or "").strip():
        # the script's own reason (/opt/ml/output/message) first; SageMaker's FailureReason after it
        exit_message = desc["ExitMessage"].strip()
        reason = exit_message if not desc.get("FailureReason") else f"{exit_message} ({desc['FailureReason']})"
    return reason


def _stalled(job_type: str, status: str, reason: str) -> bool:
    """A training job its stall watchdog ended (the failure file's first line says so)."""
    return bool(job_type == "training" and status == "Failed" and stall_records.says_stall(reason))


def _state(job_type: str, status: str, secondary: str | None, reason: str) -> tuple[str, str]:
    """(running|completed|retryable|failed, the reason, filled in where SageMaker gives none)."""
    if status in ("InProgress", "Stopping"):
        return RUNNING, reason
    if status == "Completed":
        return COMPLETED, reason
    if secondary == MAX_WAIT or MAX_WAIT in reason:
        return RETRYABLE, reason or f"{MAX_WAIT}: no spot capacity within spot.max_wait_seconds"
    if (status == "Failed" and CAPACITY_RE.search(reason)) or _stalled(job_type, status, reason):
        return RETRYABLE, reason
    if job_type == "training" and status == "Failed" and actions.action_for(cause_of(reason)).retryable:
        return RETRYABLE, reason  # the action table: PlanFallback decides whether a new attempt follows
    if status == "Stopped" and not reason:
        return FAILED, f"stopped ({secondary or 'by request'})"
    return FAILED, reason


def cause_of(reason: str) -> str:
    """The cause of a failed training job (contract/failure_causes.py's precedence; SageMaker's capacity errors are
    the instances', not the script's)."""
    return causes.INSTANCE if CAPACITY_RE.search(reason) else causes.cause_of(reason)


def classify(job_type: str, desc: dict[str, Any]) -> dict[str, Any]:
    """Describe* response -> status summary with `state` running|completed|retryable|failed.

    Retryable: a spot job stopped at MaxWaitTimeExceeded, a job that failed for lack of capacity
    (InsufficientCapacity / CapacityError in FailureReason), a job its stall watchdog ended (`outcome`
    "stall"; check_job makes it failed when the spec's stall.action is `fail`), or a failed training job whose
    `cause` the action table (actions.py) may retry. Anything else that ended is failed.
    """
    if job_type == "training":
        name, status = desc["TrainingJobName"], desc["TrainingJobStatus"]
        secondary = desc.get("SecondaryStatus")
    else:
        name, status, secondary = desc["ProcessingJobName"], desc["ProcessingJobStatus"], None
    classification, reason = _state(job_type, status, secondary, _failure_reason(job_type, status, desc))
    transitions = desc.get("SecondaryStatusTransitions") or []
    return {
        "job_name": name,
        "job_type": job_type,
        "status": status,
        "secondary_status": secondary,
        "failure_reason": reason or None,
        "state": classification,
        "outcome": STALL if _stalled(job_type, status, reason) else None,
        "cause": cause_of(reason) if job_type == "training" and status == "Failed" else None,
        "status_message": transitions[-1].get("StatusMessage") if transitions else None,
        "billable_seconds": desc.get("BillableTimeInSeconds"),
        "training_seconds": desc.get("TrainingTimeInSeconds"),
    }


def interruptions(desc: dict[str, Any]) -> int:
    """Spot interruptions a training job had: its SecondaryStatusTransitions entering Interrupted."""
    return sum(1 for t in desc.get("SecondaryStatusTransitions") or [] if t.get("Status") == "Interrupted")


def next_attempt(run: Run, attempt: int, status: dict[str, Any], earlier_reason: str | None = None) -> int:
    """The index of the next training attempt, or FallbackExhaustedError / JobFailedError.

    `status` is check_job's output for attempt `attempt`; only a retryable training outcome moves on, as the
    action table (actions.py) says for its cause; `earlier_reason`: the attempt before's FailureReason (the
    script's own exception twice in a row ends the run).
    """
    state = status.get("state")
    reason = status.get("failure_reason") or status.get("secondary_status") or state
    name = status.get("job_name", "?")
    cause = status.get("cause") or (causes.STALLED if status.get("outcome") == STALL else causes.INSTANCE)
    action = actions.action_for(cause)
    if status.get("job_type", "training") != "training" or state != RETRYABLE:
        advice = f"{cause}: {action.says}" if status.get("cause") else "a fallback attempt would not fix this"
        raise JobFailedError(f"job {name} ended {status.get('status', state)}: {reason}; {advice}; see the job's "
                             "CloudWatch logs")
    _refuse_pointless(run, attempt, name, reason, cause, earlier_reason)
    if attempt + 1 < run.max_attempts:
        return attempt + 1
    if cause in (causes.STALLED, causes.SIGNAL, causes.COLLECTIVE, causes.EXCEPTION, causes.OOM):
        what = {causes.STALLED: "stalled", causes.SIGNAL: "lost a rank to a signal",
                causes.COLLECTIVE: "failed in a collective", causes.EXCEPTION: "failed in the training script",
                causes.OOM: "ran out of memory"}[cause]
        raise FallbackExhaustedError(
            f"run {run.run_id}: job {name} {what} ({reason}); all {attempt + 1} attempt(s) allowed by "
            f"fallback.max_attempts={run.max_attempts} are used. Next: look at the job's log (and the stacks of a "
            "stall), fix what failed, or raise fallback.max_attempts to retry from the last durable checkpoint.")
    configs = "; ".join(
        f"#{c.attempt} {c.job_name} ({c.instance_type} x{c.instance_count}, "
        f"{'spot' if c.spot else 'on-demand'})" for c in run.attempts[: attempt + 1])
    raise FallbackExhaustedError(
        f"run {run.run_id}: all {attempt + 1} attempt(s) allowed by fallback.max_attempts={run.max_attempts} "
        f"ended without capacity (last: {name}: {reason}). Attempts: {configs}. Next: add fallback.options with "
        "other instance types or spot: false, or raise fallback.max_attempts.")


def _refuse_pointless(run: Run, attempt: int, name: str, reason: str, cause: str, earlier_reason: str | None) -> None:
    """JobFailedError where the action table says a new attempt would fail the same way."""
    action = actions.action_for(cause)
    if cause == causes.OOM:
        current = run.attempts[attempt].instance_type if attempt < len(run.attempts) else None
        following = run.attempts[attempt + 1].instance_type if attempt + 1 < min(len(run.attempts),
                                                                                 run.max_attempts) else None
        if following is None or following == current:
            raise JobFailedError(f"job {name} ran out of memory: {reason}; {action.says}")
    if cause == causes.EXCEPTION and actions.same_error(reason, earlier_reason):
        raise JobFailedError(f"job {name} failed with the same error as the attempt before it: {reason}; the run "
                             "ends (a new attempt would fail the same way); see the job's CloudWatch logs")


def _number(value: Any) -> float | str:
    value = float(value)
    return value if math.isfinite(value) else str(value)


def final_metrics(desc: dict[str, Any]) -> dict[str, float | str]:
    """FinalMetricDataList -> {name: value}; non-finite values as strings ('nan', 'inf')."""
    return {m["MetricName"]: _number(m["Value"]) for m in desc.get("FinalMetricDataList", [])}


def _seconds_between(start: Any, end: Any) -> float:
    if isinstance(start, datetime) and isinstance(end, datetime):
        return max(0.0, (end - start).total_seconds())
    return 0.0


def job_usage(job_type: str, desc: dict[str, Any]) -> dict[str, Any]:
    """Instance-seconds of one job; training from BillableTimeInSeconds, processing from its run time."""
    if job_type == "training":
        resources = desc.get("ResourceConfig", {})
        count = int(resources.get("InstanceCount", 1))
        billable = float(desc.get("BillableTimeInSeconds") or 0)
        training = float(desc.get("TrainingTimeInSeconds") or billable)
        return {"job_name": desc["TrainingJobName"], "job_type": job_type, "instance_type": resources.get("InstanceType"),
                "instance_count": count, "spot": bool(desc.get("EnableManagedSpotTraining")),
                "billable_seconds": billable, "training_seconds": training}
    cluster = desc.get("ProcessingResources", {}).get("ClusterConfig", {})
    count = int(cluster.get("InstanceCount", 1))
    seconds = _seconds_between(desc.get("ProcessingStartTime"), desc.get("ProcessingEndTime"))
    return {"job_name": desc["ProcessingJobName"], "job_type": job_type, "instance_type": cluster.get("InstanceType"),
            "instance_count": count, "spot": False, "billable_seconds": seconds, "training_seconds": seconds}


def cost_summary(usages: list[dict[str, Any]], prices: dict[str, float]) -> dict[str, Any]:
    """Cost = billable seconds x instances (x on-demand price when known); spot saving = 1 - billable/training.

    `spot_saving` is the final training job's; `run_spot_saving` covers every job of the run (earlier
    attempts and tokenizer jobs included). `cost_usd` is None unless every instance type has a price.
    """
    billable = sum(u["billable_seconds"] * u["instance_count"] for u in usages)
    training = sum(u["training_seconds"] * u["instance_count"] for u in usages)
    final = next((u for u in reversed(usages) if u["job_type"] == "training"), None)
    final_saving = 0.0
    if final and final["spot"] and final["training_seconds"] > 0:
        final_saving = 1 - final["billable_seconds"] / final["training_seconds"]
    known = all(u["instance_type"] in prices for u in usages)
    cost = (sum(u["billable_seconds"] * u["instance_count"] / 3600 * prices[u["instance_type"]] for u in usages)
            if known and usages else None)
    return {
        "billable_instance_seconds": round(billable, 3),
        "training_instance_seconds": round(training, 3),
        "spot_saving": round(max(0.0, final_saving), 4),
        "run_spot_saving": round(max(0.0, 1 - billable / training), 4) if training > 0 else 0.0,
        "cost_usd": round(cost, 4) if cost is not None else None,
        "price_source": "settings.instance_prices (on-demand)" if cost is not None else None,
        "jobs": usages,
    }
