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


def test_the_printed_ledger_lists_every_part_productive_first_and_its_shares_add_up_to_100():
    parts = {"downloading": 40.0, "startup": 333.3, "productive": 1200.0, "replayed": 111.1, "evaluation": 3.3,
             "checkpointing": 10.0, "uploading": 0.0, "stalled": 0.0, "unaccounted": 2.3}
    billed = sum(parts.values())
    lines = text.summary_lines({"billed_seconds": billed, "parts": parts, "ratio": 1200 / billed, "attempts": [{}]})
    rows = [line.split() for line in lines[1:]]
    assert rows[0][0] == "productive"
    assert sum(float(r[1].rstrip("%")) for r in rows) == pytest.approx(100.0, abs=1e-9)
    named = " ".join(lines[1:])
    for name in parts:
        assert name in named, name  # every part, small ones inside `other`
    assert any(r[0] == "other" for r in rows) and "stalled 0 s" in named


def test_shares_round_to_exactly_100():
    assert sum(text.shares({"a": 1.0, "b": 1.0, "c": 1.0}, 3.0).values()) == pytest.approx(100.0)


def test_unaccounted_is_never_negative_the_excess_is_said():
    from hfsm_lambda.goodput import ledger

    parts = {"startup": 30.0, "productive": 80.0, "checkpointing": 2.0, "unaccounted": -2.0}  # billed: 110 s
    details: dict = {}
    assert ledger._never_negative(parts, details) == pytest.approx(2.0)
    assert parts["unaccounted"] == 0 and sum(parts.values()) == pytest.approx(110.0, abs=1e-9)
    assert details["unaccounted"]["measured_over_billed"] == 2.0
    assert ledger._never_negative({"productive": 5.0, "unaccounted": 1.0}, {}) == 0.0
