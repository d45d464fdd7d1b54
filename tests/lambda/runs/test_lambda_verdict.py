"""The verdict on a finished run: the trained model against the strongest trivial baseline and against itself before
training, by more than the evaluation set's noise; the rule declared in the training code's task registry
(Task.verdict)."""

from __future__ import annotations

import pytest

from contract import verdict_metrics as names
from hfsm_lambda.runs import verdict
from hftrain.tasks import REGISTRY


def _metrics(*, model=80.0, baseline=40.0, pretrained=5.0, gain_baseline=(35.0, 45.0), gain_pretrained=(70.0, 80.0),
             steps=300, examples=200, index=3, loss_change=-1.5) -> dict:
    return {names.MODEL: model, names.BASELINE: baseline, names.PRETRAINED: pretrained,
            names.GAIN_BASELINE_LOW: gain_baseline[0], names.GAIN_BASELINE_HIGH: gain_baseline[1],
            names.GAIN_PRETRAINED_LOW: gain_pretrained[0], names.GAIN_PRETRAINED_HIGH: gain_pretrained[1],
            names.STEPS: steps, names.EXAMPLES: examples, names.BASELINE_INDEX: index, names.LOSS_CHANGE: loss_change}


def test_the_rules_are_the_task_registry_s():
    assert verdict.rules() == {name: cls.verdict.export() for name, cls in REGISTRY.items()}
    assert set(verdict.rules()) == set(REGISTRY)  # every task is judged
    for name, cls in REGISTRY.items():
        assert len(cls.verdict.baselines) >= 2, name  # several trivial baselines, the strongest counts


def test_learned_names_the_strongest_baseline_and_both_intervals():
    judged = verdict.judge("question-answering", _metrics())
    assert judged["verdict"] == verdict.LEARNED
    assert judged["baseline_name"] == "the span by the window that overlaps the question most"
    assert judged["text"] == (
        "learned: f1 80 on 200 judged examples; the strongest trivial baseline (the span by the window that overlaps "
        "the question most) 40, gain +40 (95% interval +35 to +45); the model before training 5, gain +75 (95% "
        "interval +70 to +80); 300 steps")
    assert verdict.outcome({"verdict": judged}) == "succeeded" and verdict.short(judged) == "learned"


@pytest.mark.parametrize(("changes", "why"), [
    ({"gain_baseline": (-0.5, 3.0)}, "does not beat the strongest trivial baseline by more than the noise"),
    ({"model": 41.0, "gain_baseline": (0.2, 1.8)}, "and by the task's margin of 2"),  # above the noise, not the margin
    ({"gain_pretrained": (-1.0, 2.0)}, "does not beat the model before training by more than the noise"),
    ({"gain_pretrained": (0.0, 0.0), "loss_change": 0.0, "steps": 4}, "training changed nothing"),
])
def test_not_learned_says_why(changes, why):
    judged = verdict.judge("question-answering", _metrics(**changes))
    assert judged["verdict"] == verdict.NOT_LEARNED and why in judged["text"], judged["text"]
    assert verdict.outcome({"verdict": judged}) == verdict.NOT_LEARNED_PHRASE
    assert verdict.short(judged) == "not learned"


def test_a_short_run_that_has_not_learned_yet_is_not_judged_but_one_that_learned_is_learned():
    judged = verdict.judge("summarization", _metrics(steps=20, gain_baseline=(-5.0, 1.0)))
    assert judged["verdict"] == verdict.NOT_JUDGED
    # the same scores as before training but another loss: it trained, too briefly to tell
    assert verdict.judge("summarization", _metrics(steps=20, gain_pretrained=(0.0, 0.0)))["verdict"] == \
        verdict.NOT_JUDGED
    # the loss unknown (SageMaker drops a value that is not finite): never said to be unchanged
    unknown = {**_metrics(steps=20, gain_pretrained=(0.0, 0.0)), names.LOSS_CHANGE: "nan"}
    assert verdict.judge("summarization", unknown)["verdict"] == verdict.NOT_JUDGED
    assert judged["text"].startswith("not judged: 20 steps, too short to tell (a run is judged from 100 steps")
    assert verdict.short(judged) == "not judged: 20 steps" and verdict.outcome({"verdict": judged}) == "succeeded"
    assert verdict.judge("summarization", _metrics(steps=20))["verdict"] == verdict.LEARNED


@pytest.mark.parametrize("metrics", [{}, {"eval_f1": 40.0, "eval_baseline_f1": 3.0},
                                     {**_metrics(), names.MODEL: "nan"}])
def test_without_the_verdict_metrics_the_run_is_not_judged(metrics):
    judged = verdict.judge("question-answering", metrics)
    assert judged["verdict"] == verdict.NOT_JUDGED
    assert judged["text"].startswith("not judged: no verdict_") and "verdict_eval_samples" in judged["text"]


def test_the_verdict_words_are_model_package_metadata_values():
    import re

    for word in (verdict.LEARNED, verdict.NOT_LEARNED, verdict.NOT_JUDGED):
        assert re.fullmatch(r"[A-Za-z0-9_.:/=+\-@]+", word)


def test_the_documented_rules_are_the_registry_s():
    from pathlib import Path

    doc = (Path(__file__).resolve().parents[3] / "docs" / "training.md").read_text()
    for task, rule in verdict.rules().items():
        row = next(line for line in doc.splitlines() if line.strip().startswith(f"| `{task}` | `eval_"))
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        assert cells[1].startswith(f"`eval_{rule['metric']}`") and float(cells[2]) == rule["margin"], row
        assert [b.strip() for b in cells[3].replace(", lead", "; lead").split(";")] == rule["baselines"], row
