"""Each task's trivial baseline comes from its task class (`Task.baseline`), with the names it declares."""

from __future__ import annotations

import datasets
import pytest

from hftrain.args import DataArguments
from hftrain.scoring import baselines
from hftrain.tasks import REGISTRY, get_task

ROWS = {
    "text-classification": [
        {"sentence": "good film", "label": "pos"},
        {"sentence": "bad film", "label": "neg"},
        {"sentence": "fine film", "label": "pos"},
    ],
    "question-answering": [
        {"id": "q1", "question": "Who?", "context": "Ada Lovelace wrote it.",
         "answers": {"text": ["Ada Lovelace"], "answer_start": [0]}},
        {"id": "q2", "question": "What?", "context": "The engine ran.",
         "answers": {"text": ["ran"], "answer_start": [11]}},
    ],
    "summarization": [
        {"document": "One. Two. Three. Four.", "summary": "One. Two. Three."},
        {"document": "A cat sat. It slept.", "summary": "A cat slept."},
    ],
}


def _task(name: str):
    task = get_task(name, DataArguments(task=name))
    raw = datasets.Dataset.from_list(ROWS[name])
    task.resolve_columns(raw, "train")
    return task, raw


def test_every_task_with_baseline_metrics_has_rows_here() -> None:
    assert {name for name, cls in REGISTRY.items() if cls.baseline_metrics} == set(ROWS)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_the_baseline_has_the_declared_names(name: str) -> None:
    task, raw = _task(name)
    scores = baselines.compute(task, raw, raw)
    assert set(scores) == {f"eval_baseline_{m}" for m in type(task).baseline_metrics}
    assert all(0.0 <= v <= 100.0 for v in scores.values()), scores


def test_known_values() -> None:
    """Majority label 'pos' is right on 2 of 3; lead-3 is the first summary exactly; the first two words are right for 1 of 2 questions."""
    task, raw = _task("text-classification")
    assert baselines.compute(task, raw, raw)["eval_baseline_accuracy"] == pytest.approx(2 / 3)
    task, raw = _task("question-answering")
    assert baselines.compute(task, raw, raw)["eval_baseline_exact_match"] == pytest.approx(50.0)
    task, raw = _task("summarization")
    first = raw.select([0])
    assert baselines.compute(task, first, first)["eval_baseline_rouge1"] == pytest.approx(100.0)


def test_no_training_rows_or_no_eval_rows_gives_no_baseline() -> None:
    task, raw = _task("text-classification")
    assert baselines.compute(task, None, raw) == {}
    assert baselines.compute(task, raw, raw.select([])) == {}


def test_a_broken_baseline_is_logged_not_raised(caplog) -> None:
    task, raw = _task("question-answering")
    broken = raw.remove_columns(["context"])
    assert baselines.compute(task, broken, broken) == {}
    assert "no trivial baseline for question-answering" in caplog.text
