"""A verdict that means something, from real runs of train.py (its own process, tiny models, generated data): a run
with learning rate 0 is "not learned" for every task, however short, and a run that learns is "learned", each with
the intervals the verdict reports (the pipeline's own rule: lambda/runs/verdict.py)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from testkit.training import TRAIN_PY, layout_job, subprocess_env, to_argv

from contract import verdict_metrics as names
from hfsm_lambda.runs import verdict
from local_mode import synthetic as synth

pytestmark = pytest.mark.slow

TASKS = {
    "text-classification": ("roberta", lambda n, seed: synth.cls_examples(n, seed), {}),
    "question-answering": ("bert", lambda n, seed: synth.qa_examples(n, seed, context_words=(10, 25)),
                           {"max_seq_length": 64, "doc_stride": 16}),
    "summarization": ("bart", lambda n, seed: synth.summ_examples(n, seed, sentences=(2, 3), words=(3, 4)),
                      {"val_max_target_length": 16, "generation_num_beams": 1}),
}


def _train(tmp_path, tiny_models, task: str, *, steps: int, learning_rate: float, train_rows: int = 160,
           eval_rows: int = 40, extra: dict | None = None) -> dict:
    kind, rows, hps = TASKS[task]
    base = layout_job(tmp_path, train=rows(train_rows, 1), validation=rows(eval_rows, 2))
    argv = to_argv({"task": task, "model_name_or_path": tiny_models[kind], "max_steps": steps,
                    "per_device_train_batch_size": 16, "learning_rate": learning_rate, "save_steps": 1000,
                    "logging_steps": 50, **hps, **(extra or {})})
    done = subprocess.run([sys.executable, str(TRAIN_PY), *argv], env=subprocess_env(base), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, (done.stdout + done.stderr)[-3000:]
    metrics = json.loads((base / "output" / "data" / "metrics.json").read_text())
    assert "METRIC verdict_gain_pretrained_low=" in done.stdout  # as SageMaker's metric definitions read them
    return metrics


@pytest.mark.parametrize("task", sorted(TASKS))
def test_learning_rate_0_is_not_learned(tmp_path, tiny_models, task):
    metrics = _train(tmp_path, tiny_models, task, steps=4, learning_rate=0.0)
    judged = verdict.judge(task, metrics)
    print(f"\n{task}: {judged['text']}")
    assert judged["verdict"] == verdict.NOT_LEARNED, judged["text"]
    assert "training changed nothing" in judged["text"]
    assert metrics[names.MODEL] == metrics[names.PRETRAINED] and metrics[names.LOSS_CHANGE] == 0.0
    assert metrics[names.EXAMPLES] == 40 and metrics[names.STEPS] == 4


def test_a_run_that_learns_is_learned_with_its_intervals(tmp_path, tiny_models):
    metrics = _train(tmp_path, tiny_models, "text-classification", steps=120, learning_rate=2e-3, train_rows=800,
                     eval_rows=200, extra={"warmup_steps": 0.1, "per_device_train_batch_size": 32})
    judged = verdict.judge("text-classification", metrics)
    print(f"\ntext-classification: {judged['text']}")
    assert judged["verdict"] == verdict.LEARNED, judged["text"]
    assert judged["gain_baseline"][0] > 0 and judged["gain_pretrained"][0] > 0
    assert "95% interval" in judged["text"] and judged["examples"] == 200


def test_a_short_run_that_did_not_learn_yet_is_not_judged(tmp_path, tiny_models):
    metrics = _train(tmp_path, tiny_models, "summarization", steps=3, learning_rate=1e-3)
    judged = verdict.judge("summarization", metrics)
    print(f"\nsummarization: {judged['text']}")
    assert judged["verdict"] == verdict.NOT_JUDGED, judged["text"]
    assert judged["text"].startswith("not judged: 3 steps, too short to tell")
