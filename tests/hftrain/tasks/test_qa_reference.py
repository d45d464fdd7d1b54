"""Question answering trains exactly as the Hugging Face example does, given the same batches.

The benchmark (benchmarks/bench_training.py) compares this code's QA training with run_qa.py's path rebuilt from
library pieces (benchmarks/hf_baselines.py). These tests pin the two to each other where they must agree, so that
a difference in learning between the arms can only come from the batch order (the samplers differ on purpose):

* the training features (tokens, token types, mask, span labels; long contexts split by doc_stride, answers
  outside a chunk and unanswerable questions labelled with the CLS index) equal run_qa.py's
  prepare_train_features;
* the entry point (hftrain.run.runner.main at its defaults) and the stock `transformers.Trainer` fed the batches it
  trained on give the same loss at every step and the same trained weights (optimizer, schedule, weight decay
  groups, clipping, loss weighting, model initialisation).
"""

from __future__ import annotations

import json

import pytest
import torch
from testkit.training import layout_job

from benchmarks import hf_baselines  # run_qa.py's prepare_train_features and training arguments
from local_mode import synthetic as synth

MAX_LEN, STRIDE = 192, 64  # shorter than the benchmark (384, 128) so that 60 examples overflow often


def _rows(v2: bool) -> list[dict]:
    """SQuAD-like lengths: many contexts are longer than MAX_LEN and split into several features."""
    return synth.qa_examples(60, seed=3, v2=v2, squad_lengths=True)


@pytest.mark.parametrize("v2", [False, True])
def test_training_features_equal_run_qa(tiny_models, v2):
    import datasets
    from transformers import AutoConfig, AutoTokenizer

    from hftrain.args import DataArguments
    from hftrain.tasks import get_task

    rows = _rows(v2)
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["bert"])
    reference = hf_baselines._qa_train_features(datasets.Dataset.from_list(rows), tokenizer, MAX_LEN, STRIDE,
                                                pad=False)
    task = get_task("question-answering", DataArguments(task="question-answering", max_seq_length=MAX_LEN,
                                                        doc_stride=STRIDE, version_2_with_negative=v2))
    ours = task.tokenize_train(datasets.Dataset.from_list(rows), tokenizer,
                               AutoConfig.from_pretrained(tiny_models["bert"]), {})
    assert len(ours) > len(rows)  # long contexts were split: the doc_stride path is exercised
    assert sum(s == 0 for s in ours["start_positions"]) > 0  # and some chunks are labelled with CLS
    for column in reference.column_names:
        assert ours[column] == reference[column], column


def test_training_steps_equal_the_stock_trainer_on_the_same_batches(tiny_models, run_inprocess, tmp_path,
                                                                     monkeypatch):
    from transformers import AutoModelForQuestionAnswering, Trainer

    rows, steps, seed = _rows(False), 5, 11
    data = tmp_path / "data"
    layout_job(tmp_path / "job", train=rows)
    data.mkdir()
    (data / "train.json").write_text(json.dumps({"data": rows}))  # run_qa.py reads local JSON with field="data"
    losses: list[float] = []
    original = Trainer.training_step

    def training_step(self, model, inputs, *args, **kwargs):
        loss = original(self, model, inputs, *args, **kwargs)
        losses.append(float(loss))
        return loss

    monkeypatch.setattr(Trainer, "training_step", training_step)
    monkeypatch.setenv("HFTRAIN_TRACE_DIR", str(tmp_path / "trace"))
    hps = {"task": "question-answering", "model_name_or_path": tiny_models["bert"], "max_steps": steps,
           "per_device_train_batch_size": 8, "learning_rate": 3e-3, "warmup_steps": 1, "weight_decay": 0.01,
           "seed": seed, "save_steps": steps + 1, "max_seq_length": MAX_LEN, "doc_stride": STRIDE}
    run = run_inprocess(tmp_path / "job", hps)
    assert run.returncode == 0, run.output[-3000:]
    ours = losses[:]
    batches = [[int(i) for i in json.loads(line)["ids"]]
               for path in sorted((tmp_path / "trace").iterdir()) for line in path.open()][:steps]
    assert len(batches) == steps

    losses.clear()
    monkeypatch.delenv("HFTRAIN_TRACE_DIR")
    trainer, _ = hf_baselines.build_trainer(
        "question-answering", tiny_models["bert"], {"train_data_field": data / "train.json"},
        hf_baselines.example_best("question-answering"), output_dir=tmp_path / "stock", max_steps=steps,
        batch_size=8, learning_rate=3e-3, seed=seed, max_seq_length=MAX_LEN, warmup_steps=1, weight_decay=0.01,
        task_extra={"doc_stride": STRIDE})
    monkeypatch.setattr(trainer, "get_train_dataloader", lambda: torch.utils.data.DataLoader(
        trainer.train_dataset, batch_sampler=batches, collate_fn=trainer.data_collator))
    trainer.train()

    assert losses == pytest.approx(ours, rel=1e-5, abs=1e-6)
    trained = AutoModelForQuestionAnswering.from_pretrained(tmp_path / "job" / "model").state_dict()
    for name, tensor in trainer.model.state_dict().items():
        torch.testing.assert_close(trained[name], tensor, rtol=1e-4, atol=1e-6, msg=name)
