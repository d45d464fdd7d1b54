"""Padding-free QA batches (hftrain/data/packing.py): equal loss and gradients to the same examples without padding,
on CPU, for BERT- and RoBERTa-like models; where it applies; and a run through the entry point."""

from __future__ import annotations

import pytest
import torch
from testkit.training import layout_job
from transformers import AutoModelForQuestionAnswering, AutoTokenizer, DataCollatorWithPadding

from hftrain.data import packing
from local_mode import synthetic as synth


def _features(tokenizer, n: int = 7) -> list[dict]:
    """QA features of different lengths with span targets inside each (the shapes the task produces)."""
    out = []
    for row in synth.qa_examples(n, 5, context_words=(5, 40)):
        enc = tokenizer(row["question"], row["context"], truncation="only_second", max_length=64)
        feature = {k: list(v) for k, v in enc.items()}
        length = len(feature["input_ids"])
        feature["start_positions"], feature["end_positions"] = length // 3, length // 3 + 1
        out.append(feature)
    assert len({len(f["input_ids"]) for f in out}) > 3  # really different lengths
    return out


def _model(path, attn="sdpa"):
    torch.manual_seed(0)
    model = AutoModelForQuestionAnswering.from_pretrained(path, attn_implementation=attn)
    model.train()  # the tiny configs have no dropout: train mode is deterministic
    return model


def _grads(model) -> dict[str, torch.Tensor]:
    return {name: p.grad.detach().clone() for name, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("kind", ["bert", "roberta"])
def test_packed_loss_and_gradients_equal_unpadded_examples(tiny_models, kind):
    tokenizer = AutoTokenizer.from_pretrained(tiny_models[kind])
    features = _features(tokenizer)

    reference = _model(tiny_models[kind])
    losses = []
    for f in features:  # each example alone: no padding at all
        batch = {k: torch.tensor([v]) for k, v in f.items() if k not in ("start_positions", "end_positions")}
        losses.append(reference(**batch, start_positions=torch.tensor([f["start_positions"]]),
                                end_positions=torch.tensor([f["end_positions"]])).loss)
    expected = torch.stack(losses).mean()
    expected.backward()

    model = _model(tiny_models[kind])
    packing.enable(model, "sdpa")
    assert model.config._attn_implementation == packing.PACKED_ATTENTION
    batch = packing.PackedQACollator(packing.position_start(model.config))(features)
    assert batch["input_ids"].shape == (1, sum(len(f["input_ids"]) for f in features))
    loss = packing.segment_span_loss(model, batch)
    loss.backward()

    assert loss.item() == pytest.approx(expected.item(), abs=1e-5)
    got, want = _grads(model), _grads(reference)
    assert got.keys() == want.keys()
    for name in want:
        torch.testing.assert_close(got[name], want[name], atol=1e-5, rtol=1e-4, msg=name)


def test_packed_loss_equals_padded_batch_with_padding_masked(tiny_models):
    """Against a padded batch: equal once the padding positions are kept out of the span softmax. The stock QA
    head's padded loss also puts softmax mass on padding, so it is larger (by design of that head)."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["bert"])
    features = _features(tokenizer)
    model = _model(tiny_models["bert"])
    padded = DataCollatorWithPadding(tokenizer)([dict(f) for f in features])
    with torch.no_grad():
        out = model(**padded)
        keep = padded["attention_mask"].bool()
        masked = [torch.nn.functional.cross_entropy(logits.masked_fill(~keep, float("-inf")), padded[name])
                  for logits, name in ((out.start_logits, "start_positions"), (out.end_logits, "end_positions"))]
        padded_masked = (masked[0] + masked[1]) / 2
        packing.enable(model, "sdpa")
        packed = packing.segment_span_loss(model, packing.PackedQACollator(0)(features))
    assert packed.item() == pytest.approx(padded_masked.item(), abs=1e-5)
    assert out.loss.item() > packed.item() + 1e-3  # the stock padded loss differs: softmax over padding too
    print(f"\nPACKING packed {packed.item():.6f} = padded-with-padding-masked {padded_masked.item():.6f}; "
          f"stock padded loss {out.loss.item():.6f}")


def test_collator_positions_restart_per_example_and_targets_move_with_the_row():
    features = [{"input_ids": [5, 6, 7], "token_type_ids": [0, 0, 1], "start_positions": 1, "end_positions": 2},
                {"input_ids": [8, 9], "token_type_ids": [0, 1], "start_positions": 0, "end_positions": 1}]
    batch = packing.PackedQACollator(position_start=2, bucket=1)(features)  # RoBERTa: padding_idx 1 + 1
    assert batch["input_ids"].tolist() == [[5, 6, 7, 8, 9]]
    assert batch["token_type_ids"].tolist() == [[0, 0, 1, 0, 1]]
    assert batch["position_ids"].tolist() == [[2, 3, 4, 2, 3]]
    assert batch["cu_seq_lens_q"].tolist() == [0, 3, 5] and batch["max_length_q"] == 3
    assert batch["start_positions"].tolist() == [1, 3] and batch["end_positions"].tolist() == [2, 4]
    assert "attention_mask" not in batch
    assert packing.PackedQACollator(bucket=64)(features)["max_length_q"] == 64  # an upper bound, few values


def test_segment_cross_entropy_is_a_softmax_per_example():
    logits = torch.tensor([0.0, 1.0, 2.0, 5.0, -1.0])
    cu = torch.tensor([0, 3, 5])
    got = packing.segment_cross_entropy(logits, cu, torch.tensor([2, 3]), max_length=3)
    first = -torch.log_softmax(logits[:3], 0)[2]
    second = -torch.log_softmax(logits[3:], 0)[0]
    assert got.item() == pytest.approx(((first + second) / 2).item())


def test_where_padding_free_applies(tiny_models):
    bert = _model(tiny_models["bert"])
    on_gpu = dict(attn_implementation="sdpa", on_gpu=True)
    assert packing.decide("auto", "question-answering", bert, **on_gpu) == (True, "on")
    assert packing.decide("true", "question-answering", bert, attn_implementation="sdpa", on_gpu=False)[0]
    assert not packing.decide("auto", "question-answering", bert, attn_implementation="sdpa", on_gpu=False)[0]
    assert not packing.decide("false", "question-answering", bert, **on_gpu)[0]
    off, why = packing.decide("true", "text-classification", bert, **on_gpu)
    assert not off and "one example per row" in why
    off, why = packing.decide("true", "question-answering", bert, attn_implementation="eager", on_gpu=True)
    assert not off and "eager" in why
    from transformers import AutoModelForSeq2SeqLM

    bart = AutoModelForSeq2SeqLM.from_pretrained(tiny_models["bart"])
    off, why = packing.decide("true", "summarization", bart, **on_gpu)
    assert not off


def test_eval_of_a_packed_model_is_plain_sdpa(tiny_models):
    """After enable(), padded batches (evaluation) give exactly the sdpa model's outputs."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_models["bert"])
    padded = DataCollatorWithPadding(tokenizer)([dict(f) for f in _features(tokenizer)])
    model = _model(tiny_models["bert"]).eval()
    with torch.no_grad():
        before = model(**padded).start_logits
        packing.enable(model, "sdpa")
        after = model(**padded).start_logits
    torch.testing.assert_close(before, after)


@pytest.mark.slow
def test_padding_free_run_through_the_entry_point(tiny_models, tmp_path, run_inprocess, caplog):
    base = layout_job(tmp_path, train=synth.qa_examples(48, 1), validation=synth.qa_examples(12, 2))
    with caplog.at_level("INFO", logger="hftrain"):
        run = run_inprocess(base, {"task": "question-answering", "model_name_or_path": tiny_models["bert"],
                                   "max_steps": 3, "per_device_train_batch_size": 8, "max_seq_length": 64,
                                   "doc_stride": 16, "save_steps": 1000, "padding_free": "true"})
    assert run.returncode == 0, run.output[-2000:]
    assert "padding-free training batches: on" in caplog.text
    assert run.metrics["train_loss"] > 0 and "eval_f1" in run.metrics
    saved = AutoModelForQuestionAnswering.from_pretrained(base / "model")
    assert saved.config._attn_implementation != packing.PACKED_ATTENTION  # nothing of ours in what ships
