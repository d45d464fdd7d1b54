"""Abstractive summarization with encoder-decoder models (BART-like, T5-like); ROUGE via rouge-score."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from transformers import AutoModelForSeq2SeqLM, DataCollatorForSeq2Seq, Seq2SeqTrainer

from hftrain.scoring import baselines
from hftrain.scoring.rouge import rouge_examples

from .base import Column, LocalMode, ModelTaskMismatch, Task, Verdict

TEXT_CANDIDATES = ("document", "article", "text", "dialogue", "source")
SUMMARY_CANDIDATES = ("summary", "highlights", "target", "abstract")
@dataclass
class SummarizationArguments:
    """Summarization hyperparameters: the summary column, target lengths, the input prefix."""

    summary_column: str | None = field(
        default=None, metadata={"help": "Target summary column. Default: summary/highlights/target."}
    )
    max_target_length: int = field(default=128, metadata={"help": "Summarization: maximum summary length."})
    val_max_target_length: int | None = field(
        default=None,
        metadata={"help": "Summarization: maximum generated length at evaluation. Default: max_target_length."},
    )
    source_prefix: str | None = field(
        default=None,
        metadata={"help": "Summarization: prefix added to every input. Default: 'summarize: ' for T5 models."},
    )


class Summarization(Task):
    name = "summarization"
    order = 30
    arguments = SummarizationArguments
    metrics = ("rouge1", "rouge2", "rougeL", "rougeLsum", "gen_len")
    baseline_metrics = ("rouge1", "rouge2", "rougeL", "rougeLsum")
    columns = (
        Column("text_column", "document", candidates=TEXT_CANDIDATES),
        Column("summary_column", "summary", candidates=SUMMARY_CANDIDATES),
    )
    verdict = Verdict("rougeL", 1.0, "ROUGE-L in points (0-100): 1 point over the best of lead-1, lead-2 and lead-3 "
                                     "(the document's first sentences)", baselines=("lead-1", "lead-2", "lead-3"))
    local = LocalMode("summarization.json", "bart", rows="summarization_rows")
    auto_model = AutoModelForSeq2SeqLM
    trainer_class = Seq2SeqTrainer
    default_max_length = 1024

    def __init__(self, data_args) -> None:
        super().__init__(data_args)
        self.prefix = ""

    @classmethod
    def default_arguments(cls, data_args) -> None:
        if data_args.val_max_target_length is None:
            data_args.val_max_target_length = data_args.max_target_length

    def adjust_training_args(self, training_args) -> None:
        if training_args.generation_max_length is None:  # also for evaluations mid-training
            training_args.generation_max_length = self.data_args.val_max_target_length

    def final_eval_kwargs(self, training_args) -> dict:
        return {"max_length": self.data_args.val_max_target_length, "num_beams": training_args.generation_num_beams}

    def check_model(self, config) -> None:
        if not getattr(config, "is_encoder_decoder", False):
            raise ModelTaskMismatch(
                f"a {config.model_type!r} model cannot do summarization here: it needs an encoder-decoder "
                "(sequence-to-sequence) model such as BART or T5"
            )
        super().check_model(config)
        if self.data_args.source_prefix is not None:
            self.prefix = self.data_args.source_prefix
        elif config.model_type in ("t5", "mt5", "umt5", "longt5"):
            self.prefix = "summarize: "
        else:
            self.prefix = ""

    def _tokenize(self, dataset, tokenizer, config, map_kwargs, desc, target_length):
        a = self.data_args
        max_length = self.max_length(tokenizer, config)
        text, summary, prefix = self.column("text_column"), self.column("summary_column"), self.prefix
        padding = "max_length" if a.pad_to_max_length else False

        def prepare(batch):
            inputs = [prefix + (t or "") for t in batch[text]]
            enc = tokenizer(inputs, max_length=max_length, truncation=True, padding=padding)
            labels = tokenizer(text_target=[s or "" for s in batch[summary]], max_length=target_length,
                               truncation=True, padding=padding)["input_ids"]
            if padding:
                pad = tokenizer.pad_token_id
                labels = [[(t if t != pad else -100) for t in seq] for seq in labels]
            enc["labels"] = labels
            return enc

        return dataset.map(prepare, batched=True, remove_columns=dataset.column_names, desc=desc, **map_kwargs)

    def tokenize_train(self, dataset, tokenizer, config, map_kwargs: dict):
        return self._tokenize(dataset, tokenizer, config, map_kwargs, "Tokenizing training data",
                              self.data_args.max_target_length)

    def tokenize_eval(self, dataset, tokenizer, config, map_kwargs: dict):
        return self._tokenize(dataset, tokenizer, config, map_kwargs, "Tokenizing validation data",
                              self.data_args.val_max_target_length)

    def collator(self, tokenizer, model, training_args):
        multiple = 8 if (training_args.fp16 or training_args.bf16) and not self.data_args.pad_to_max_length else None
        return DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100, pad_to_multiple_of=multiple)

    def baseline_candidates(self, raw_train, raw_eval) -> dict[str, list]:
        return baselines.summarization_candidates(raw_eval[self.column("text_column")])

    def score_predictions(self, predictions: list, raw_eval) -> tuple[dict[str, float], list[float]]:
        per_example = rouge_examples([str(p or "") for p in predictions],
                                     [str(s or "") for s in raw_eval[self.column("summary_column")]])
        n = max(len(predictions), 1)
        return {k: sum(v) / n for k, v in per_example.items()}, per_example["rougeL"]

    def compute_metrics(self, eval_examples, eval_features, tokenizer):
        pad = tokenizer.pad_token_id

        def compute(eval_pred):
            preds = eval_pred.predictions[0] if isinstance(eval_pred.predictions, tuple) else eval_pred.predictions
            preds = np.asarray(preds)
            if preds.ndim == 3:  # logits (predict_with_generate off): greedy tokens
                preds = preds.argmax(-1)
            preds = np.where(preds < 0, pad, preds)
            labels = np.where(np.asarray(eval_pred.label_ids) < 0, pad, eval_pred.label_ids)
            decoded_preds = [t.strip() for t in tokenizer.batch_decode(preds, skip_special_tokens=True)]
            decoded_labels = [t.strip() for t in tokenizer.batch_decode(labels, skip_special_tokens=True)]
            per_example = rouge_examples(decoded_preds, decoded_labels)
            self.example_scores = per_example["rougeL"]
            out = {k: sum(v) / max(len(decoded_preds), 1) for k, v in per_example.items()}
            out["gen_len"] = float(np.mean([np.count_nonzero(p != pad) for p in preds]))
            return out

        return compute
