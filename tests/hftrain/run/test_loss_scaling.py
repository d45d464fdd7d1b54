"""The logged training loss (and the gradient) do not depend on gradient_accumulation_steps.

Reference: the stock transformers Trainer. In transformers 5.3 the stock Trainer itself inflates the loss of
heads that declare `**kwargs` in `forward` but compute a plain mean loss (BART, T5, the BERT-family
classification heads): it passes `num_items_in_batch` to the model, skips its own division by the number of
accumulated batches, and the model ignores it (huggingface/transformers#47688, open). So the reference for
accumulation 4 is the stock Trainer at accumulation 1 over the same rows in one batch, and the stock Trainer at
accumulation 4 with `model_accepts_loss_kwargs = False`, the setting its own `compute_loss` docstring
prescribes for a loss that does not use `num_items_in_batch`.

Our runs go through train.py's main() (the agreed-layout loader, the zero-weight collator, our Trainer
subclass); learning rate 0 and no dropout, so the only difference between the runs is how the rows of the
first optimizer step are split into micro-batches. The summaries have equal token counts, so the mean over
micro-batches of their token means is the token mean of the whole batch.
"""

from __future__ import annotations

import pytest
from testkit.training import layout_job

from local_mode import synthetic as synth

ROWS = 8  # one optimizer step: 8 rows in 1 batch, or 4 micro-batches of 2


def _summarization_data(model_dir):
    """Summaries of one token count (a few generated words take two tokens)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    rows = synth.summ_examples(4 * ROWS, 5, sentences=(2, 2), words=(5, 5))
    sizes = [len(tokenizer(text_target=r["summary"])["input_ids"]) for r in rows]
    equal = [r for r, size in zip(rows, sizes, strict=True) if size == min(sizes)][:ROWS]
    assert len(equal) == ROWS
    return equal


def _classification_data(model_dir):
    return synth.cls_examples(ROWS, 5, words=(6, 12))


CASES = {
    "summarization-bart": ("summarization", "bart", _summarization_data),
    "classification-bert": ("text-classification", "bert", _classification_data),
}


def _ours(run_inprocess, base, model_dir, task, accumulation):
    run = run_inprocess(base, {
        "task": task, "model_name_or_path": model_dir, "max_steps": 1, "logging_steps": 1,
        "per_device_train_batch_size": ROWS // accumulation, "gradient_accumulation_steps": accumulation,
        "learning_rate": 0, "warmup_steps": 0, "train_sampling_strategy": "sequential", "save_steps": 1000,
        "eval_at_end": "false", "max_target_length": 32,
    })
    assert run.returncode == 0, run.output[-3000:]
    return run


def _stock(model_dir, task, rows, tmp_path, accumulation, *, accepts_loss_kwargs=None):
    """The stock (Seq2Seq)Trainer on the same rows, tokenized here, the model loaded from `model_dir`."""
    import torch
    from transformers import (
        AutoModelForSeq2SeqLM,
        AutoModelForSequenceClassification,
        AutoTokenizer,
        DataCollatorForSeq2Seq,
        DataCollatorWithPadding,
        Seq2SeqTrainer,
        Seq2SeqTrainingArguments,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if task == "summarization":
        model = AutoModelForSeq2SeqLM.from_pretrained(model_dir)
        features = [{**tokenizer(r["document"]), "labels": tokenizer(text_target=r["summary"])["input_ids"]}
                    for r in rows]
        trainer_cls, args_cls = Seq2SeqTrainer, Seq2SeqTrainingArguments
        collator = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)
    else:
        model = AutoModelForSequenceClassification.from_pretrained(model_dir)  # our run's head (lr 0: unchanged)
        features = [{**tokenizer(r["text"]), "labels": model.config.label2id[r["label"]]} for r in rows]
        trainer_cls, args_cls = Trainer, TrainingArguments
        collator = DataCollatorWithPadding(tokenizer)

    logged = []

    class Record(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                logged.append(logs)

    args = args_cls(str(tmp_path / f"stock-{accumulation}"), per_device_train_batch_size=ROWS // accumulation,
                    gradient_accumulation_steps=accumulation, max_steps=1, logging_steps=1, learning_rate=0.0,
                    train_sampling_strategy="sequential", save_strategy="no", report_to=[], use_cpu=True,
                    disable_tqdm=True)
    torch.manual_seed(0)
    trainer = trainer_cls(model=model, args=args, train_dataset=features, data_collator=collator,
                          callbacks=[Record()])
    if accepts_loss_kwargs is not None:
        trainer.model_accepts_loss_kwargs = accepts_loss_kwargs
    trainer.train()
    return logged[0]


@pytest.mark.parametrize("case", sorted(CASES))
def test_logged_loss_and_gradient_do_not_scale_with_accumulation(case, tiny_models, tmp_path, run_inprocess):
    task, kind, make_rows = CASES[case]
    rows = make_rows(tiny_models[kind])
    ours = {}
    for accumulation in (1, 4):
        base = layout_job(tmp_path / f"ours-{accumulation}", train=rows)
        ours[accumulation] = _ours(run_inprocess, base, tiny_models[kind], task, accumulation).metric_lines
    trained = tmp_path / "ours-1" / "model"  # learning rate 0: the initial weights, with our classifier head
    whole_batch = _stock(trained, task, rows, tmp_path, 1)
    micro_batches = _stock(trained, task, rows, tmp_path, 4, accepts_loss_kwargs=False)
    figures = {"stock acc1": whole_batch["loss"], "stock acc4 (no loss kwargs)": micro_batches["loss"],
               "ours acc1": ours[1]["loss"], "ours acc4": ours[4]["loss"]}
    print(f"\nLOSS {case}: " + ", ".join(f"{k}={v:.4f}" for k, v in figures.items()))

    assert ours[1]["loss"] == pytest.approx(whole_batch["loss"], rel=1e-4)
    assert ours[4]["loss"] == pytest.approx(whole_batch["loss"], rel=1e-4)
    assert ours[4]["loss"] == pytest.approx(micro_batches["loss"], rel=1e-4)
    # the gradient too (it is what gradient clipping and the optimizer see)
    assert ours[4]["grad_norm"] == pytest.approx(whole_batch["grad_norm"], rel=1e-3)
    assert ours[1]["grad_norm"] == pytest.approx(whole_batch["grad_norm"], rel=1e-3)


def _causal_lm_step(trainer_cls, accumulation, tmp_path, *, accepts_loss_kwargs=None):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel, TrainerCallback, TrainingArguments

    torch.manual_seed(0)
    model = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=16, n_head=2, vocab_size=64, n_positions=32,
                                       resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0))
    # label counts differ per row (-100 masks), so per-token weighting over all micro-batches matters here
    features = [{"input_ids": list(range(1 + i, 9 + i)), "labels": [-100] * (i % 4) + list(range(1 + i, 9 + i))[i % 4:]}
                for i in range(ROWS)]
    logged = []

    class Record(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                logged.append(logs)

    args = TrainingArguments(str(tmp_path / f"lm-{trainer_cls.__name__}-{accumulation}"), max_steps=1,
                             per_device_train_batch_size=ROWS // accumulation, gradient_accumulation_steps=accumulation,
                             logging_steps=1, learning_rate=0.0, train_sampling_strategy="sequential",
                             save_strategy="no", report_to=[], use_cpu=True, disable_tqdm=True)
    trainer = trainer_cls(model=model, args=args, train_dataset=features, callbacks=[Record()])
    if accepts_loss_kwargs is not None:
        trainer.model_accepts_loss_kwargs = accepts_loss_kwargs
    trainer.train()
    return logged[0], trainer.model_accepts_loss_kwargs


def test_a_head_that_uses_num_items_keeps_token_weighting_and_the_gradient_scale(tmp_path):
    """GPT-2's loss divides by the token count of all micro-batches: ours keeps passing it (the loss per token
    over the whole step, as the stock Trainer at accumulation 1) and the gradient is not divided again."""
    from transformers import Trainer

    from hftrain.run.trainer import make_trainer_class

    whole_batch, _ = _causal_lm_step(Trainer, 1, tmp_path)
    ours, accepts = _causal_lm_step(make_trainer_class(Trainer), 4, tmp_path)
    assert accepts is True
    assert ours["loss"] == pytest.approx(whole_batch["loss"], rel=1e-5)
    assert ours["grad_norm"] == pytest.approx(whole_batch["grad_norm"], rel=1e-4)


def test_consumes_num_items_reads_the_forward():
    from transformers import (
        BartConfig,
        BartForConditionalGeneration,
        BertConfig,
        BertForSequenceClassification,
        GPT2Config,
        GPT2LMHeadModel,
    )

    from hftrain.run.loss_scaling import consumes_num_items

    tiny = {"num_hidden_layers": 1, "hidden_size": 8, "num_attention_heads": 2, "intermediate_size": 8}
    assert consumes_num_items(GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=16)))
    assert not consumes_num_items(BertForSequenceClassification(BertConfig(vocab_size=16, **tiny)))
    assert not consumes_num_items(BartForConditionalGeneration(BartConfig(
        vocab_size=16, d_model=8, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=8, decoder_ffn_dim=8)))

    class Declares(GPT2LMHeadModel):
        accepts_loss_kwargs = False

    assert not consumes_num_items(Declares(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=16)))
