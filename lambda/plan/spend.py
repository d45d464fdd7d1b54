"""Spend limits: a run's worst-case cost within `max_run_cost_usd`, and how many runs the environment may have at
once. Pure but for the one ListExecutions call of `concurrency_problems`.

The worst case is `cost.worst_case_cost` (the project's one figure, also printed by `runctl plan`) over the
requests Prepare built once (job_requests.build_requests) and checks in preflight.check: every training attempt of
the fallback chain and the tokenizer jobs, each at its on-demand price for its whole MaxRuntimeInSeconds.
"""

from __future__ import annotations

from typing import Any

from hfsm_lambda.plan import cost
from hfsm_lambda.plan.run import Run
from hfsm_lambda.settings import Settings


def cost_problems(run: Run, requests: list[tuple[str, dict[str, Any]]], settings: Settings) -> list[str]:
    """Refuses a run whose worst case is over `max_run_cost_usd`, naming both figures and the largest jobs."""
    limit = settings.max_run_cost_usd
    if limit is None:
        return []
    worst = cost.worst_case_cost(run, requests, settings)
    if worst["missing_prices"]:
        # an instance type the environment does not allow is that one problem (preflight's static_problems)
        allowed = set(settings.allowed_instance_types) | set(settings.tokenizer_instance_types)
        missing = [t for t in worst["missing_prices"] if t in allowed]
        return [f"compute.instance_type: no price for {', '.join(missing)} in the environment's "
                f"instance_prices, so the run's cost cannot be bounded by max_run_cost_usd=${limit:,.2f}; add the "
                "price to cdk.json"] if missing else []
    if worst["total_usd"] > limit:
        biggest = sorted(worst["items"], key=lambda i: i["worst_case_usd"], reverse=True)[:3]
        return [f"compute: the run's worst-case cost is ${worst['total_usd']:,.2f}, over environment "
                f"{settings.environment}'s max_run_cost_usd of ${limit:,.2f} (every job of the fallback chain at its "
                f"on-demand price for its whole max_runtime_seconds); largest: "
                f"{'; '.join(cost.describe(i) for i in biggest)}. Lower max_runtime_seconds, instance counts, "
                "fallback.max_attempts or tokenizer.max_runtime_seconds"]
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
