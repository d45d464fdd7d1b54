"""A budget no run can exceed: worst-case cost of the whole fallback chain, and concurrent runs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from moto import mock_aws
from testkit.lambdas import settings_dict

from hfsm_lambda import aws
from hfsm_lambda import settings as settings_module
from hfsm_lambda.errors import PreflightError
from hfsm_lambda.plan import cost, job_requests, spend
from hfsm_lambda.runs.prepare import prepare_run

PRICES = {"ml.g5.2xlarge": 1.515, "ml.g5.12xlarge": 7.09, "ml.g6.2xlarge": 1.222, "ml.p4d.24xlarge": 37.688,
          "ml.p5.48xlarge": 113.07, "ml.c5.2xlarge": 0.408, "ml.m5.xlarge": 0.23}
SPEC: dict[str, Any] = {
    "version": 1, "name": "qa", "task": "question-answering", "model": "s3://hfsm-dev-data/base-models/bert/",
    "data": {"train": {"s3": "datasets/squad/train/"}},
    "compute": {"instance_type": "ml.g5.2xlarge", "instance_count": 2}, "max_runtime_seconds": 7200,
    "spot": {"enabled": True, "max_wait_seconds": 14400},
    "fallback": {"max_attempts": 3, "options": [{"instance_type": "ml.g6.2xlarge"},
                                                {"instance_type": "ml.g5.12xlarge", "spot": False}]},
}


def env(**overrides: Any) -> settings_module.Settings:
    return settings_module.Settings.from_dict(settings_dict(**{"instance_prices": PRICES, **overrides}))


def test_prepare_refuses_with_the_one_worst_case_figure_that_runctl_plan_prints() -> None:
    settings = env()
    run = prepare_run(SPEC, settings)
    requests = job_requests.build_requests(run, settings)
    worst = cost.worst_case_cost(run, requests, settings)
    # 2 instances x 2 hours x each attempt's on-demand price, plus each instance's 100 GB volume for those 2 hours
    # ($0.14/GB-month: 2 x 100 x 0.14 x 2/730 = $0.08 an attempt); SageMaker's RetryStrategy is sent but not
    # multiplied: MaxRuntimeInSeconds is "the maximum time for all of the attempts in total" (StoppingCondition).
    assert all(r["RetryStrategy"]["MaximumRetryAttempts"] >= 1 for op, r in requests if op == "CreateTrainingJob")
    assert worst["total_usd"] == pytest.approx((1.515 + 1.222 + 7.09) * 2 * 2 + 3 * 0.08, abs=0.011) == 39.55
    with pytest.raises(PreflightError) as info:
        prepare_run(SPEC, env(max_run_cost_usd=25))
    (problem,) = [p for p in info.value.problems if "worst-case" in p]
    assert f"${worst['total_usd']:,.2f}" in problem and "$25.00" in problem and "ml.g5.12xlarge" in problem
    assert prepare_run(SPEC, env(max_run_cost_usd=40))


def test_tokenizer_jobs_count_too() -> None:
    tok = {**SPEC, "fallback": {}, "tokenizer": {"type": "bpe", "instance_type": "ml.c5.2xlarge", "instance_count": 3,
                                                 "max_runtime_seconds": 3600}}
    run = prepare_run(tok, env())
    built = job_requests.build_requests(run, env())
    # (6.06 + 0.08) + (1.22 + 3 x 30 GB for 1 h: 0.02) + (0.41 + 0.01) = $7.80
    assert spend.cost_problems(run, built, env(max_run_cost_usd=7.80)) == []
    (problem,) = spend.cost_problems(run, built, env(max_run_cost_usd=7))
    assert "$7.80" in problem and "$7.00" in problem
    assert run.job_names.tokenizer_map in problem and run.job_names.tokenizer_reduce in problem


def test_the_prod_scenario_of_the_finding_is_refused() -> None:
    """8 x p5.48xlarge for 28 days with 10 attempts: $607,864.32 of compute and $103.10 of storage an attempt."""
    settings = env(max_run_cost_usd=5000, max_instance_count=8)
    big = {**SPEC, "compute": {"instance_type": "ml.p5.48xlarge", "instance_count": 8},
           "max_runtime_seconds": 28 * 86400, "spot": {"enabled": False}, "fallback": {"max_attempts": 10}}
    with pytest.raises(PreflightError) as info:
        prepare_run(big, settings)
    assert any("$6,079,674.20" in p and "$5,000.00" in p for p in info.value.problems), info.value.problems


def test_a_type_without_a_price_cannot_be_bounded() -> None:
    settings = env(max_run_cost_usd=10_000, instance_prices={"ml.g5.2xlarge": 1.5})
    with pytest.raises(PreflightError) as info:
        prepare_run(SPEC, settings)
    assert any("no price for ml.g5.12xlarge, ml.g6.2xlarge" in p for p in info.value.problems)


def test_an_unknown_instance_type_is_one_problem() -> None:
    """Not allowed in the environment: that is the problem to fix, not a missing price in cdk.json."""
    with pytest.raises(PreflightError) as info:
        prepare_run({**SPEC, "compute": {"instance_type": "ml.g9.2xlarge"}, "fallback": {}}, env(max_run_cost_usd=100))
    (problem,) = info.value.problems
    assert problem.startswith("compute.instance_type: ml.g9.2xlarge is not allowed in environment dev; allowed: ")


def test_no_limit_no_check() -> None:
    run = prepare_run(SPEC, env())
    assert spend.cost_problems(run, job_requests.build_requests(run, env()), env()) == []


MACHINE = "arn:aws:states:us-east-1:123456789012:stateMachine:hfsm-dev-fine-tune"


def _machine(sfn: Any, name: str) -> str:
    definition = {"StartAt": "W", "States": {"W": {"Type": "Wait", "Seconds": 3600, "End": True}}}
    return sfn.create_state_machine(name=name, definition=json.dumps(definition),
                                    roleArn="arn:aws:iam::123456789012:role/sfn")["stateMachineArn"]


def test_concurrency_limit_counts_running_executions_of_every_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    aws.reset_clients()
    with mock_aws():
        sfn = aws.client("stepfunctions", "us-east-1")
        machines = [_machine(sfn, "hfsm-dev-fine-tune"), _machine(sfn, "hfsm-dev-tokenizer")]
        settings = env(max_concurrent_runs=2, state_machine_arns=machines)
        own = sfn.start_execution(stateMachineArn=machines[0], name="own")["executionArn"]
        assert spend.concurrency_problems(settings, sfn, own) == []
        sfn.start_execution(stateMachineArn=machines[1], name="other-1")
        assert spend.concurrency_problems(settings, sfn, own) == []  # one other run: room for this one
        sfn.start_execution(stateMachineArn=machines[0], name="other-2")
        (problem,) = spend.concurrency_problems(settings, sfn, own)
        assert "already has 2 run(s)" in problem and "max_concurrent_runs is 2" in problem
        # Own execution unknown: one running execution is taken to be this one.
        assert spend.concurrency_problems(settings, sfn, None) == [problem]
        assert spend.concurrency_problems(env(state_machine_arns=machines), sfn, own) == []  # no limit
    aws.reset_clients()
