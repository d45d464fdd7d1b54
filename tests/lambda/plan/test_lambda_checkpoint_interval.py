"""`checkpoint.every_minutes: "auto"` (the default): the spec field, the hyperparameters per attempt, the watchdog."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from hfsm_lambda.errors import SpecError
from hfsm_lambda.plan import checkpoint_interval, job_requests
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.spec import run_spec
from hfsm_lambda.watch import durability

BASE = {"version": 1, "name": "auto", "task": "text-classification", "model": "bert-base-uncased",
        "data": {"train": {"s3": "datasets/x/"}}, "compute": {"instance_type": "ml.p4d.24xlarge"},
        "spot": {"enabled": True}, "fallback": {"options": [{"instance_type": "ml.g5.2xlarge"}, {"spot": False}]}}


def test_auto_is_the_default_and_a_number_is_still_a_fixed_interval(settings):
    assert run_spec.parse_spec(BASE, settings)["checkpoint"]["every_minutes"] == "auto"
    fixed = run_spec.parse_spec({**BASE, "checkpoint": {"every_minutes": 30}}, settings)
    assert fixed["checkpoint"]["every_minutes"] == 30
    for bad in ("Auto", "fast", -1, 10081, 2.5, True):
        with pytest.raises(SpecError) as info:
            run_spec.parse_spec({**BASE, "checkpoint": {"every_minutes": bad}}, settings)
        assert info.value.problems[0].startswith('checkpoint.every_minutes: expected "auto" or an integer from 0 to '
                                                 "10080"), info.value.problems


def test_auto_sends_save_interval_and_a_prior_per_attempt(settings):
    run = prepare_run(BASE, settings, now=datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC))
    sent = [job_requests.training_request(run, settings, i)["HyperParameters"] for i in range(3)]
    assert [json.loads(hp["save_interval"]) for hp in sent] == ["auto"] * 3
    assert [json.loads(hp["interruption_prior_hours"]) for hp in sent] == [
        6.0, 12.0, checkpoint_interval.ON_DEMAND_PRIOR_HOURS]  # p4d spot, g5 spot, g5 on demand
    assert all("save_every_minutes" not in hp for hp in sent)
    fixed = prepare_run({**BASE, "checkpoint": {"every_minutes": 30}}, settings)
    hp = job_requests.training_request(fixed, settings, 0)["HyperParameters"]
    assert hp["save_every_minutes"] == "30" and "save_interval" not in hp and "interruption_prior_hours" not in hp


def test_the_watchdog_measures_auto_against_its_upper_bound():
    assert checkpoint_interval.watchdog_minutes("auto") == 60 and checkpoint_interval.watchdog_minutes(15) == 15
    now = datetime(2025, 1, 1, 12, tzinfo=UTC)
    report, actions = durability.watch(None, None, now=now, since=now - timedelta(minutes=181),
                                       watchdog={"every_minutes": 60, "auto": True, "intervals": 3, "action": "stop"})
    assert actions == ["warn", "stop"] and "checkpoint.every_minutes=auto, at most 60" in report["stop_reason"]
