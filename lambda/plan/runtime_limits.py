"""Runtime limits that can work: the floor below which `max_runtime_seconds` / `spot.max_wait_seconds` are refused,
and the one sentence a job stopped at its limit gets. Pure.

`MaxRuntimeInSeconds` counts the job's whole billed time: instance start-up, the image pull (the Hugging Face
training image is about 10 GB), the data download and training (SageMaker API reference, StoppingCondition).
A limit shorter than that start-up plus one checkpoint interval stops the job before it saved anything, so all
it bought is lost: `runtime_fits` (a run spec rule) refuses it with the floor and why.
"""

from __future__ import annotations

from typing import Any

from hfsm_lambda.plan import checkpoint_interval
from hfsm_lambda.spec.schema import Context, valid

STARTUP_SECONDS = 600  # instance start, image pull and data download before the first step (a budget, not a bound)


def _first_interval(every_minutes: int | str | None) -> int:
    """Minutes to the first checkpoint: the fixed interval, or auto's lower bound (an auto interval starts there
    until the run's first save is measured: training_code/hftrain/checkpoint/interval.py)."""
    if every_minutes == checkpoint_interval.AUTO:
        return checkpoint_interval.MIN_MINUTES
    return int(every_minutes or 0)


def floor(every_minutes: int | str | None) -> int:
    """The shortest limit that covers start-up and the first checkpoint interval (start-up alone without one)."""
    return STARTUP_SECONDS + 60 * _first_interval(every_minutes)


def _why(every_minutes: int | str) -> str:
    minutes = _first_interval(every_minutes)
    auto = " (auto starts at its lower bound until the first save is measured)" if every_minutes == "auto" else ""
    interval = (f" plus one checkpoint interval (checkpoint.every_minutes={every_minutes}{auto}: {60 * minutes} s)"
                if minutes else "")
    return (f"{STARTUP_SECONDS} s for the job's start-up (instances, a ~10 GB image pull, the data download: "
            f"SageMaker counts them in the limit){interval}, so that the job can save a checkpoint before it is "
            "stopped")


def runtime_fits(spec: dict[str, Any], ctx: Context) -> None:
    """`max_runtime_seconds` (and `spot.max_wait_seconds` when an attempt uses spot) cover the job's start-up
    (600 s) plus the first checkpoint interval (`checkpoint.every_minutes`; 5 min for auto)."""
    checkpoint, spot, fallback = spec.get("checkpoint"), spec.get("spot"), spec.get("fallback")
    every = checkpoint.get("every_minutes") if isinstance(checkpoint, dict) else None
    if not valid(every):
        return
    least = floor(every)
    fix = f"; raise it to at least {least}" + (
        " or lower checkpoint.every_minutes" if every and every != checkpoint_interval.AUTO else "")
    runtime = spec.get("max_runtime_seconds")
    if valid(runtime) and isinstance(runtime, int) and runtime < least:
        ctx.problems.add("max_runtime_seconds", f"{runtime} is below {least} s: {_why(every)}{fix}")
    options = fallback.get("options") if isinstance(fallback, dict) else None
    uses_spot = isinstance(spot, dict) and (spot.get("enabled") is True or (
        isinstance(options, list) and any(isinstance(o, dict) and o.get("spot") is True for o in options)))
    wait = spot.get("max_wait_seconds") if isinstance(spot, dict) else None
    if uses_spot and valid(wait) and isinstance(wait, int) and wait < least:
        ctx.problems.add("spot.max_wait_seconds", f"{wait} is below {least} s: {_why(every)}{fix}")


def stopped_at_limit(desc: dict[str, Any], progress: dict[str, Any] | None,
                     durable: dict[str, Any] | None) -> str | None:
    """The failure reason of a training job SageMaker stopped at MaxRuntimeInSeconds, in one sentence naming the
    spec field, the step reached (the training code's `_progress.json`) and the last durable checkpoint; None for
    any other ending."""
    if desc.get("SecondaryStatus") != "MaxRuntimeExceeded":
        return None
    limit = (desc.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")
    step = (progress or {}).get("step")
    reached = f"at step {step}" if isinstance(step, int) else "before its first recorded step"
    last = (f"the last durable checkpoint is step {durable['last_durable_step']} (saved {durable.get('last_durable_at')})"
            if durable and durable.get("last_durable_step") is not None else "no checkpoint reached S3")
    return (f"MaxRuntimeExceeded: SageMaker stopped the job at max_runtime_seconds={limit} {reached}; {last}. "
            "Raise max_runtime_seconds (it counts start-up, data download and training) and submit again.")
