"""Text classification of single texts or pairs (MNLI-style); the labels are read from the data."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from transformers import AutoModelForSequenceClassification

from .. import baselines
from ..data import DataError, pick_column, require_columns
from .base import Task

TEXT_CANDIDATES = ("text", "sentence", "sentence1", "premise", "question1")
PAIR_CANDIDATES = ("text_pair", "sentence2", "hypothesis", "question2")


def label_key(value) -> str:
    """Labels are compared as strings so that 1, '1' and 1.0 from JSON/CSV/Parquet agree."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def ordered_labels(values) -> list[str]:
    """Sorted label names: numerically when every label is an integer, else alphabetically."""
    keys = {label_key(v) for v in values if v is not None and label_key(v) != ""}
    try:
        return sorted(keys, key=int)
    except ValueError:
        return sorted(keys)


def accuracy_and_macro_f1(predictions: np.ndarray, labels: np.ndarray, num_labels: int) -> dict[str, float]:
    predictions = np.asarray(predictions).reshape(-1)
    labels = np.asarray(labels).reshape(-1)
    mask = labels >= 0
    predictions, labels = predictions[mask], labels[mask]
    if labels.size == 0:
        raise ValueError("no labelled examples to score")
    f1s = []
    for k in range(num_labels):
        tp = float(np.sum((predictions == k) & (labels == k)))
        fp = float(np.sum((predictions == k) & (labels != k)))
        fn = float(np.sum((predictions != k) & (labels == k)))
        if tp + fp + fn == 0:
            continue  # a class absent from both: not part of the macro average
        f1s.append(2 * tp / (2 * tp + fp + fn))
    return {"accuracy": float(np.mean(predictions == labels)), "macro_f1": float(np.mean(f1s)) if f1s else 0.0}


@dataclass
class TextClassificationArguments:
    """Text classification hyperparameters: the label and text-pair columns."""

    text_pair_column: str | None = field(
        default=None,
        metadata={
            "help": "Second text of a pair (classification, MNLI-style). Default: text_pair/sentence2/hypothesis "
            "when present; 'none' forces single texts."
        },
    )
    label_column: str = field(default="label", metadata={"help": "Label column (classification)."})


class TextClassification(Task):
    name = "text-classification"
    order = 20
    arguments = TextClassificationArguments
    metrics = ("accuracy", "macro_f1")
    baseline_metrics = ("accuracy", "macro_f1")
    auto_model = AutoModelForSequenceClassification
    default_max_length = 128

    def __init__(self, data_args) -> None:
        super().__init__(data_args)
        self.text_column: str | None = None
        self.pair_column: str | None = None
        self.labels: list[str] = []

    def resolve_columns(self, dataset, what: str) -> None:
        a = self.data_args
        self.text_column = pick_column(dataset, a.text_column, TEXT_CANDIDATES, "text")
        if a.text_pair_column and a.text_pair_column.lower() == "none":
            self.pair_column = None
        elif a.text_pair_column:
            self.pair_column = pick_column(dataset, a.text_pair_column, (), "text pair")
        else:
            self.pair_column = next((c for c in PAIR_CANDIDATES if c in dataset.column_names), None)
        self.check_columns(dataset, what)

    def check_columns(self, dataset, what: str) -> None:
        columns = [self.text_column, self.data_args.label_column] + ([self.pair_column] if self.pair_column else [])
        require_columns(dataset, columns, what)

    def learn_from_data(self, datasets, all_gather) -> None:
        """The label set: the union of every rank's labels (a sharded channel gives each host some)."""
        local = set()
        for ds in datasets:
            if ds is not None:
                local |= set(ordered_labels(ds.unique(self.data_args.label_column)))
        self.set_labels(ordered_labels({x for part in all_gather(sorted(local)) for x in part}))

    def set_labels(self, labels: list[str]) -> None:
        if len(labels) < 2:
            raise DataError(f"text classification needs at least 2 distinct labels, the data has {labels}")
        self.labels = labels

    def configure(self, config) -> None:
        config.num_labels = len(self.labels)
        config.id2label = dict(enumerate(self.labels))
        config.label2id = {name: i for i, name in enumerate(self.labels)}
        config.problem_type = "single_label_classification"

    def model_kwargs(self) -> dict:
        return {"ignore_mismatched_sizes": True}  # a new head when the checkpoint had other labels

    def _tokenize(self, dataset, tokenizer, config, map_kwargs, desc):
        a = self.data_args
        label2id = {name: i for i, name in enumerate(self.labels)}
        max_length = self.max_length(tokenizer, config)
        text, pair = self.text_column, self.pair_column

        def prepare(batch):
            args = (batch[text],) if pair is None else (batch[text], batch[pair])
            enc = tokenizer(*args, truncation=True, max_length=max_length,
                            padding="max_length" if a.pad_to_max_length else False)
            enc["labels"] = [label2id.get(label_key(v), -100) for v in batch[a.label_column]]
            return enc

        return dataset.map(prepare, batched=True, remove_columns=dataset.column_names, desc=desc, **map_kwargs)

    def tokenize_train(self, dataset, tokenizer, config, map_kwargs: dict):
        return self._tokenize(dataset, tokenizer, config, map_kwargs, "Tokenizing training data")

    def tokenize_eval(self, dataset, tokenizer, config, map_kwargs: dict):
        return self._tokenize(dataset, tokenizer, config, map_kwargs, "Tokenizing validation data")

    def baseline(self, raw_train, raw_eval) -> dict[str, float]:
        if raw_train is None:
            return {}
        column = self.data_args.label_column
        return baselines.classification(raw_train[column], raw_eval[column])

    def compute_metrics(self, eval_examples, eval_features, tokenizer):
        num_labels = len(self.labels)

        def compute(eval_pred):
            logits = eval_pred.predictions[0] if isinstance(eval_pred.predictions, tuple) else eval_pred.predictions
            return accuracy_and_macro_f1(np.argmax(logits, axis=-1), eval_pred.label_ids, num_labels)

        return compute
