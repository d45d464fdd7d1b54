"""The run spec's `tracking` section: defaults (the experiment is the task), the typed spec, bad values named."""

from __future__ import annotations

import pytest
from testkit.lambdas import MINIMAL, problems_of

from hfsm_lambda.spec import run_spec, typed


def test_tracking_defaults_to_on_in_the_task_s_experiment_without_tensorboard(settings):
    spec = run_spec.parse_spec(MINIMAL, settings)
    assert spec["tracking"] == {"enabled": True, "experiment": MINIMAL["task"], "tensorboard": False}
    assert typed.from_json(spec).tracking == typed.Tracking(enabled=True, experiment=MINIMAL["task"],
                                                            tensorboard=False)
    assert run_spec.parse_spec(spec, settings) == spec


def test_tracking_values_are_kept(settings):
    spec = run_spec.parse_spec({**MINIMAL, "tracking": {"experiment": "team-a/lr-sweep", "tensorboard": True,
                                                        "enabled": False}}, settings)
    assert spec["tracking"] == {"enabled": False, "experiment": "team-a/lr-sweep", "tensorboard": True}


@pytest.mark.parametrize("value", ["", "-starts-with-dash", "has space", "x" * 129, 7])
def test_a_bad_experiment_name_is_named(settings, value):
    problems = problems_of({**MINIMAL, "tracking": {"experiment": value}}, settings)
    assert any(p.startswith("tracking.experiment: expected an MLflow experiment name") for p in problems), problems


def test_an_unknown_tracking_field_is_refused(settings):
    problems = problems_of({**MINIMAL, "tracking": {"server": "x"}}, settings)
    assert any(p.startswith("tracking.server") for p in problems), problems
