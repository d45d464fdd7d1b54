"""A loss is never rounded to nothing in what a user reads (issue: goodput at fleet scale, point 8)."""

from __future__ import annotations

import pytest

from hfsm_lambda.goodput import text
from hfsm_lambda.runs import messages


@pytest.mark.parametrize(("minutes", "said"), [
    (None, "unknown time"), (0, "0 s"), (0.004, "under 1 s"), (0.05, "3 s"), (0.99, "59 s"), (1.0, "1.0 min"),
    (6.04, "6.0 min"),
])
def test_lost_time(minutes, said):
    assert text.lost_time(minutes) == said


def test_a_few_seconds_lost_are_said_in_seconds_with_the_steps():
    record = {"how": "spot", "step_reached": 12, "resumed_from_step": 10, "lost_steps": 2, "lost_minutes": 0.02}
    line = text.interruption_line(record)
    assert "2 step(s), 1 s of training lost" in line and "0.0 min" not in line
    legacy = {"job": "j", "step_reached": 12, "resumed_from_step": 10, "lost_steps": 2, "lost_minutes": 0.02}
    assert "2 step(s), 1 s of work lost" in messages.interruption_line(legacy)
    summary = {"interruptions": [legacy, legacy]}
    assert "Interruptions: 2, 2 s of work lost in all" in "\n".join(messages.checkpoint_lines(summary))
