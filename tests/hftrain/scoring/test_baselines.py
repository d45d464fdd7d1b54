"""Each task's trivial baselines come from its task class (`Task.baseline_candidates`, named as its `verdict`
declares them); the strongest one counts."""

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
    """The best single label 'pos' is right on 2 of 3; lead-3 is the first summary exactly; for the questions, the
    sentence with the most question words (F1 2/3 on both, exact on none) beats the first words (right on 1 of 2)."""
    task, raw = _task("text-classification")
    assert baselines.compute(task, raw, raw)["eval_baseline_accuracy"] == pytest.approx(2 / 3)
    task, raw = _task("question-answering")
    assert baselines.compute(task, raw, raw) == {"eval_baseline_exact_match": 0.0,
                                                 "eval_baseline_f1": pytest.approx(200 / 3)}
    task, raw = _task("summarization")
    first = raw.select([0])
    assert baselines.compute(task, first, first)["eval_baseline_rouge1"] == pytest.approx(100.0)


@pytest.mark.parametrize("name", sorted(ROWS))
def test_the_candidates_are_the_declared_ones_in_order(name: str) -> None:
    task, raw = _task(name)
    candidates = task.baseline_candidates(raw, raw)
    assert list(candidates) == list(type(task).verdict.baselines)
    assert all(len(predictions) == len(raw) for predictions in candidates.values())


def test_the_strongest_candidate_counts() -> None:
    """Of the candidates, the one with the highest mean headline score (F1), with its scores per example."""
    task, _ = _task("question-answering")
    rows = [{"id": "a", "question": "what follows key ?", "context": "zo ra key tu ma xi po",
             "answers": {"text": ["tu ma"], "answer_start": [10]}},
            {"id": "b", "question": "what follows key ?", "context": "li key no ve ka du",
             "answers": {"text": ["no ve"], "answer_start": [7]}}]
    raw = datasets.Dataset.from_list(rows)
    name, metrics, per_example = baselines.strongest(task, raw, raw)
    means = {n: sum(task.score_predictions(p, raw)[1]) / 2 for n, p in task.baseline_candidates(raw, raw).items()}
    assert means[name] == max(means.values()) and metrics["f1"] == pytest.approx(means[name])
    assert len(per_example) == 2 and metrics["f1"] == pytest.approx(sum(per_example) / 2)


def test_lead_k_and_the_best_sentence() -> None:
    assert baselines.lead("One. Two. Three.", 2) == "One. Two."
    assert baselines.best_sentence("Who wrote the engine notes?", "It ran. Ada wrote the engine notes. End.") == \
        "Ada wrote the engine notes."
    assert baselines.answer_length([{"text": ["a b"], "answer_start": [0]}, {"text": ["c d e"], "answer_start": [0]},
                                    {"text": ["f g"], "answer_start": [0]}]) == 2
    assert baselines.answer_length(None) == 3


def test_the_constant_label_candidates() -> None:
    assert baselines.classification_candidates(["a", "a", "b"], ["b", "b", "a"]) == {
        "the most frequent training label": ["a", "a", "a"], "the best single label": ["b", "b", "b"]}
    assert list(baselines.classification_candidates(None, ["b"])) == ["the best single label"]


def test_no_eval_rows_gives_no_baseline() -> None:
    task, raw = _task("text-classification")
    assert baselines.compute(task, raw, raw.select([])) == {}


def test_a_broken_baseline_is_logged_not_raised(caplog) -> None:
    task, raw = _task("question-answering")
    broken = raw.remove_columns(["context"])
    assert baselines.compute(task, broken, broken) == {}
    assert "no trivial baseline for question-answering" in caplog.text
