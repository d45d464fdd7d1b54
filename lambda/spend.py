"""Spend limits: the worst-case cost of a run, and how many runs the environment may have at once. Pure but for
the one ListExecutions call of `concurrency_problems`.

Worst case of one job = on-demand price x instance count x MaxRuntimeInSeconds x (1 + SageMaker's own retries):
managed spot never bills more than the on-demand price for at most MaxRuntimeInSeconds of running (waiting for
capacity is not billed), and `RetryStrategy.MaximumRetryAttempts` may start the job again after an internal error.
A run's worst case sums every job it can start: every training attempt of the fallback chain and the tokenizer
jobs. The requests are the ones Prepare built once (job_requests.build_requests) and checks in preflight.check, so
the figure is exactly what the run can ask SageMaker for.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from settings import Settings


@dataclass(frozen=True)
class JobBound:
    job_name: str
    instance_type: str
    instance_count: int
    max_runtime_seconds: int
    runs: int  # 1 + SageMaker-side retries
    price_per_hour: float | None

    @property
    def usd(self) -> float | None:
        if self.price_per_hour is None:
            return None
        return self.price_per_hour * self.instance_count * self.max_runtime_seconds / 3600 * self.runs

    def describe(self) -> str:
        price = "no price" if self.price_per_hour is None else f"${self.price_per_hour:g}/h"
        retries = f" x {self.runs} (SageMaker retries)" if self.runs > 1 else ""
        cost = "" if self.usd is None else f" = ${self.usd:,.2f}"
        return (f"{self.job_name}: {self.instance_count} x {self.instance_type} at {price} x "
                f"{self.max_runtime_seconds / 3600:g} h{retries}{cost}")


def job_bound(request: dict[str, Any], prices: dict[str, float]) -> JobBound:
    """The worst case of one CreateTrainingJob or CreateProcessingJob request."""
    if "TrainingJobName" in request:
        name, resources = request["TrainingJobName"], request["ResourceConfig"]
        runs = 1 + int((request.get("RetryStrategy") or {}).get("MaximumRetryAttempts", 0))
    else:
        name, resources = request["ProcessingJobName"], request["ProcessingResources"]["ClusterConfig"]
        runs = 1
    instance_type = resources["InstanceType"]
    return JobBound(name, instance_type, int(resources["InstanceCount"]),
                    int(request["StoppingCondition"]["MaxRuntimeInSeconds"]), runs, prices.get(instance_type))


def worst_case(requests: list[dict[str, Any]], prices: dict[str, float]) -> tuple[float | None, list[JobBound]]:
    """(total USD or None when a type has no price, the bound of every job)."""
    bounds = [job_bound(r, prices) for r in requests]
    costs = [b.usd for b in bounds]
    return (None if any(c is None for c in costs) else sum(c for c in costs if c is not None)), bounds


def cost_problems(requests: list[dict[str, Any]], settings: Settings) -> list[str]:
    """Refuses a run whose worst case is over `max_run_cost_usd`, naming both figures and the largest jobs."""
    limit = settings.max_run_cost_usd
    if limit is None:
        return []
    total, bounds = worst_case(requests, settings.instance_prices)
    unpriced = sorted({b.instance_type for b in bounds if b.price_per_hour is None})
    if unpriced:
        return [f"compute.instance_type: no price for {', '.join(unpriced)} in the environment's instance_prices, so "
                f"the run's cost cannot be bounded by max_run_cost_usd=${limit:,.2f}; add the price to cdk.json"]
    if total is not None and total > limit:
        biggest = sorted(bounds, key=lambda b: b.usd or 0, reverse=True)[:3]
        return [f"compute: the run's worst-case cost is ${total:,.2f}, over environment {settings.environment}'s "
                f"max_run_cost_usd of ${limit:,.2f} (every job of the fallback chain at its on-demand price for "
                f"its whole max_runtime_seconds); largest: {'; '.join(b.describe() for b in biggest)}. Lower "
                "max_runtime_seconds, instance counts, fallback.max_attempts or tokenizer.max_runtime_seconds"]
    return []


def running_executions(stepfunctions: Any, state_machine_arns: tuple[str, ...], enough: int) -> list[str]:
    """ARNs of RUNNING executions of the environment's state machines, counting no further than `enough`."""
    found: list[str] = []
    for arn in state_machine_arns:
        paginator = stepfunctions.get_paginator("list_executions")
        for page in paginator.paginate(stateMachineArn=arn, statusFilter="RUNNING",
                                       PaginationConfig={"PageSize": 100}):
            found += [e["executionArn"] for e in page.get("executions", [])]
            if len(found) >= enough:
                return found
    return found


def concurrency_problems(settings: Settings, stepfunctions: Any, own_execution: str | None) -> list[str]:
    """Refuses a run when the environment already has `max_concurrent_runs` running executions besides it.

    Prepare runs inside the execution it plans: that execution is RUNNING and does not count against the limit.
    Its ARN is known when the state machine passes `$$.Execution`; otherwise one running execution is assumed
    to be this one (Prepare only runs inside an execution).
    """
    limit = settings.max_concurrent_runs
    if limit is None or not settings.state_machine_arns:
        return []
    running = running_executions(stepfunctions, settings.state_machine_arns, limit + 2)
    others = [a for a in running if a != own_execution] if own_execution else running[1:]
    if len(others) >= limit:
        return [f"(environment): environment {settings.environment} already has {len(others)} run(s) in progress, "
                f"its max_concurrent_runs is {limit}; wait for one to finish (runctl status) or stop one "
                "(runctl stop), then start this run again"]
    return []
