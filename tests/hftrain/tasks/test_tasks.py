"""Each task trains a few steps, evaluates, and writes a model that from_pretrained loads; bad inputs fail
with a one-line reason."""

from __future__ import annotations

import json
import tarfile

import pytest
from testkit.training import layout_job
from transformers import (
    AutoModelForQuestionAnswering,
    AutoModelForSeq2SeqLM,
    AutoModelForSequenceClassification,
)

from local_mode import synthetic as synth

FAST = {"save_steps": 1000, "logging_steps": 1, "per_device_train_batch_size": 4, "learning_rate": 1e-3}


def _check_outputs(run, model_class):
    assert run.returncode == 0, run.output[-3000:]
    model_dir = run.base / "model"
    model = model_class.from_pretrained(model_dir)
    assert model is not None
    assert (model_dir / "tokenizer.json").exists()
    lines = run.metric_lines
    assert "train_loss" in lines and "train_samples_per_second" in lines
    assert "PROGRESS global_step=1 max_steps=" in run.output
    metrics = run.metrics
    assert all(isinstance(v, int | float) for v in metrics.values())
    return metrics, model


@pytest.mark.slow
def test_classification_pairs_from_model_and_tokenizer_channels(tiny_models, tmp_path, run_inprocess):
    archive = tmp_path / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in tiny_models["bert"].iterdir():
            tar.add(path, arcname=path.name)
    base = layout_job(tmp_path / "job", train=synth.cls_examples(40, 1, pairs=True),
                      validation=synth.cls_examples(12, 2, pairs=True),
                      extra_channels={"model": [archive], "tokenizer": [tiny_models["bert"] / "tokenizer.json",
                                                                      tiny_models["bert"] / "tokenizer_config.json"]})
    run = run_inprocess(base, {"task": "text-classification", "max_steps": 4, **FAST})
    metrics, model = _check_outputs(run, AutoModelForSequenceClassification)
    assert {"eval_accuracy", "eval_macro_f1", "eval_loss"} <= set(metrics)
    assert set(model.config.id2label.values()) == {"same", "different"}
    assert json.loads((base / "checkpoints" / "checkpoint-4" / "_complete.algo-1.json").read_text())["step"] == 4


@pytest.mark.slow
def test_question_answering_squad_v2(tiny_models, tmp_path, run_inprocess):
    base = layout_job(tmp_path, train=synth.qa_examples(24, 1, v2=True), validation=synth.qa_examples(10, 2, v2=True))
    run = run_inprocess(base, {"task": "question-answering", "model_name_or_path": tiny_models["roberta"],
                               "max_steps": 3, "max_seq_length": 48, "doc_stride": 16,
                               "version_2_with_negative": True, **FAST})
    metrics, _ = _check_outputs(run, AutoModelForQuestionAnswering)
    assert {"eval_exact_match", "eval_f1"} <= set(metrics)
    assert 0 <= metrics["eval_f1"] <= 100


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["bart", "t5"])
def test_summarization(kind, tiny_models, tmp_path, run_inprocess):
    base = layout_job(tmp_path, train=synth.summ_examples(16, 1), validation=synth.summ_examples(4, 2))
    run = run_inprocess(base, {"task": "summarization", "model_name_or_path": tiny_models[kind], "max_steps": 2,
                               "val_max_target_length": 8, **FAST})
    metrics, _ = _check_outputs(run, AutoModelForSeq2SeqLM)
    assert {"eval_rouge1", "eval_rouge2", "eval_rougeL", "eval_rougeLsum", "eval_gen_len"} <= set(metrics)


def test_t5_gets_the_task_prefix():
    from transformers import BartConfig, T5Config

    from hftrain.args import DataArguments
    from hftrain.tasks import get_task

    task = get_task("summarization", DataArguments(task="summarization"))
    task.check_model(T5Config())
    assert task.prefix == "summarize: "
    task.check_model(BartConfig())
    assert task.prefix == ""
    custom = get_task("summarization", DataArguments(task="summarization", source_prefix="tl;dr: "))
    custom.check_model(T5Config())
    assert custom.prefix == "tl;dr: "


@pytest.mark.slow
def test_clear_errors(tiny_models, tmp_path, run_inprocess, capsys):
    cases = [
        ("no-train", None, {"task": "text-classification", "model_name_or_path": tiny_models["bert"]},
         "no training data"),
        ("columns", [{"sentence_a": "x", "y": 1}], {"task": "question-answering",
                                                    "model_name_or_path": tiny_models["bert"]}, "missing column"),
        ("mismatch", synth.summ_examples(4, 1), {"task": "summarization", "model_name_or_path": tiny_models["bert"]},
         "needs an encoder-decoder"),
        ("no-model", synth.cls_examples(4, 1), {"task": "text-classification"}, "no model"),
        ("one-label", [{"text": "a", "label": "x"}] * 3, {"task": "text-classification",
                                                         "model_name_or_path": tiny_models["bert"]},
         "at least 2 distinct labels"),
    ]
    for name, rows, hps, message in cases:
        base = layout_job(tmp_path / name, train=rows)
        run = run_inprocess(base, {**hps, "max_steps": 1})
        err = capsys.readouterr().err
        assert run.returncode == 2, name
        assert message in err, (name, err[-500:])
    empty = tmp_path / "empty"
    (empty / "input" / "data" / "train").mkdir(parents=True)
    run = run_inprocess(empty, {"task": "text-classification", "model_name_or_path": tiny_models["bert"]})
    assert run.returncode == 2 and "no data files" in capsys.readouterr().err
