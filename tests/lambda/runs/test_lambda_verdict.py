"""The verdict on a finished run: its headline metric against the task's trivial baseline, by the task's margin,
both declared in the training code's task registry (Task.verdict)."""

from __future__ import annotations

import pytest

from hfsm_lambda.runs import verdict
from hftrain.tasks import REGISTRY


def test_the_rules_are_the_task_registry_s():
    assert verdict.rules() == {name: cls.verdict.export() for name, cls in REGISTRY.items()}
    assert set(verdict.rules()) == set(REGISTRY)  # every task is judged


@pytest.mark.parametrize(("task", "metrics", "expected"), [
    ("summarization", {"eval_rougeL": 0.0, "eval_baseline_rougeL": 50.2}, verdict.NOT_BEATEN),
    ("summarization", {"eval_rougeL": 51.3, "eval_baseline_rougeL": 50.2}, verdict.BEAT),
    ("summarization", {"eval_rougeL": 51.1, "eval_baseline_rougeL": 50.2}, verdict.NOT_BEATEN),  # within the margin
    ("text-classification", {"eval_accuracy": 0.5, "eval_baseline_accuracy": 0.5}, verdict.NOT_BEATEN),
    ("text-classification", {"eval_accuracy": 0.53, "eval_baseline_accuracy": 0.5}, verdict.BEAT),
    ("question-answering", {"eval_f1": 40.0}, verdict.NOT_JUDGED),  # no baseline: no validation data
    ("question-answering", {"eval_f1": "nan", "eval_baseline_f1": 3.0}, verdict.NOT_JUDGED),
])
def test_judge(task, metrics, expected):
    judged = verdict.judge(task, metrics)
    assert judged["verdict"] == expected
    if expected == verdict.NOT_JUDGED:
        assert judged["text"].startswith("not judged against the trivial baseline: no eval_")
    assert verdict.outcome({"verdict": judged}) == (verdict.NOT_BEATEN_PHRASE if expected == verdict.NOT_BEATEN
                                                    else "succeeded")


def test_the_documented_margins_are_the_registry_s():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "training.md").read_text()
    for task, rule in verdict.rules().items():
        row = next(line for line in doc.splitlines() if line.strip().startswith(f"| `{task}` | `eval_"))
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        assert cells[1].startswith(f"`eval_{rule['metric']}`") and float(cells[2]) == rule["margin"], row
