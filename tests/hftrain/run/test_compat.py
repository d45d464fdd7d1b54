"""One test per library workaround (hftrain/run/compat.py, loss_scaling.py): each shows the library behaviour the
workaround exists for, then that the workaround handles it. When a library release fixes the behaviour, the first
assertion fails and its message says which workaround can go."""

from __future__ import annotations

import os
from types import SimpleNamespace

import pytest
import torch

from hftrain.run import compat

TINY_BERT = {"vocab_size": 32, "num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 2,
             "intermediate_size": 8}


def _args(tmp_path, **kw):
    from transformers import TrainingArguments

    return TrainingArguments(output_dir=str(tmp_path / "out"), use_cpu=True, report_to="none", **kw)


def test_torch_load_cannot_restore_to_cpu_0_so_the_optimizer_load_maps_it_to_cpu(tmp_path):
    path = tmp_path / "optimizer.pt"
    torch.save({"state": torch.ones(2)}, path)
    try:
        torch.load(path, map_location=torch.device("cpu", 0))
    except RuntimeError as err:
        assert "cpu:0" in str(err)
    else:
        pytest.fail("torch.load restores to cpu:0 now: compat.cpu_map_location can go")
    original = torch.load
    gloo = SimpleNamespace(device=torch.device("cpu", 0), world_size=2)
    with compat.cpu_map_location(gloo):
        assert torch.equal(torch.load(path, map_location=torch.device("cpu", 0))["state"], torch.ones(2))
    assert torch.load is original
    one_process = SimpleNamespace(device=torch.device("cpu"), world_size=1)
    with compat.cpu_map_location(one_process), pytest.raises(RuntimeError):  # untouched on one process
        torch.load(path, map_location=torch.device("cpu", 0))


def _legacy_checkpoint(tmp_path):
    """A model loaded from a checkpoint with legacy LayerNorm names, changed, then saved as the Trainer does."""
    from safetensors.torch import load_file, save_file
    from transformers import BertConfig, BertForSequenceClassification

    legacy = tmp_path / "legacy"
    BertForSequenceClassification(BertConfig(**TINY_BERT)).save_pretrained(legacy)
    weights = load_file(legacy / "model.safetensors")
    weights = {k.replace("LayerNorm.weight", "LayerNorm.gamma").replace("LayerNorm.bias", "LayerNorm.beta"): v
               for k, v in weights.items()}
    save_file(weights, legacy / "model.safetensors", metadata={"format": "pt"})
    trained = BertForSequenceClassification.from_pretrained(legacy)
    with torch.no_grad():
        trained.bert.embeddings.LayerNorm.weight.fill_(3.0)
    checkpoint = tmp_path / "checkpoint-1"
    trained.save_pretrained(checkpoint)
    return legacy, checkpoint


def test_trainer_resume_misses_legacy_layernorm_names_so_they_are_reloaded(tmp_path):
    from safetensors.torch import load_file
    from transformers import BertForSequenceClassification, Trainer

    legacy, checkpoint = _legacy_checkpoint(tmp_path)
    saved = set(load_file(checkpoint / "model.safetensors"))
    assert "bert.embeddings.LayerNorm.gamma" in saved, "save_pretrained writes the current names now"
    model = BertForSequenceClassification.from_pretrained(legacy)
    Trainer(model=model, args=_args(tmp_path))._load_from_checkpoint(str(checkpoint))
    assert not torch.all(model.bert.embeddings.LayerNorm.weight == 3.0), (
        "Trainer._load_from_checkpoint restores legacy-named LayerNorm weights now: "
        "compat.reload_legacy_named_weights can go")
    assert compat.reload_legacy_named_weights(str(checkpoint), model) == 6  # weight+bias of 3 LayerNorms
    assert torch.all(model.bert.embeddings.LayerNorm.weight == 3.0)
    assert compat.reload_legacy_named_weights(os.fspath(tmp_path / "nothing"), model) == 0


def test_evaluation_keeps_feature_order_under_group_by_length(tmp_path):
    """transformers 5.3 evaluates in a random LengthGroupedSampler order when train_sampling_strategy is
    group_by_length (our default); the runner's Trainer evaluates in feature order instead, so predictions line
    up with the features that QA post-processing reads."""
    import datasets
    from transformers import Trainer

    from hftrain.run.trainer import make_trainer_class

    ds = datasets.Dataset.from_list([{"input_ids": [1] * ((i * 7) % 23 + 1)} for i in range(40)])
    args = _args(tmp_path, train_sampling_strategy="group_by_length")
    model = torch.nn.Linear(1, 1)
    stock = Trainer(model=model, args=args)._get_eval_sampler(ds)
    assert list(stock) != list(range(40)), "the Trainer evaluates in order now: compat.ordered_eval_sampler can go"
    ours = make_trainer_class(Trainer)(model=model, args=args)._get_eval_sampler(ds)
    assert list(ours) == list(range(40))


def test_trainer_passes_num_items_to_heads_that_ignore_it(tmp_path):
    """huggingface/transformers#47688: a head that declares **kwargs counts as consuming num_items_in_batch, though
    BERT's classification loss is a plain mean (loss_scaling.consumes_num_items corrects the Trainer's guess)."""
    from transformers import BertConfig, BertForSequenceClassification, Trainer

    from hftrain.run.loss_scaling import consumes_num_items

    model = BertForSequenceClassification(BertConfig(**TINY_BERT))
    stock = Trainer(model=model, args=_args(tmp_path, gradient_accumulation_steps=4))
    assert stock.model_accepts_loss_kwargs is True, (
        "the Trainer no longer guesses from **kwargs: loss_scaling.consumes_num_items can go")
    assert not consumes_num_items(model)


def test_accelerator_divides_the_accumulated_gradient_again(tmp_path):
    """huggingface/transformers#40709: the Trainer divides the loss by the accumulation and hands the same number to
    the Accelerator, whose backward divides again (loss_scaling.settle sets it to 1)."""
    from transformers import BertConfig, BertForSequenceClassification, Trainer

    from hftrain.run.trainer import make_trainer_class

    args = _args(tmp_path, gradient_accumulation_steps=4)
    stock = Trainer(model=BertForSequenceClassification(BertConfig(**TINY_BERT)), args=args)
    import inspect

    from accelerate import Accelerator

    assert stock.accelerator.gradient_accumulation_steps == 4, (
        "the Trainer no longer passes its accumulation to the Accelerator: loss_scaling.settle's reset can go")
    assert "/ self.gradient_accumulation_steps" in inspect.getsource(Accelerator.backward), (
        "Accelerator.backward no longer divides by the accumulation: loss_scaling.settle's reset can go")
    ours = make_trainer_class(Trainer)(model=BertForSequenceClassification(BertConfig(**TINY_BERT)), args=args)
    assert ours.accelerator.gradient_accumulation_steps == 1
