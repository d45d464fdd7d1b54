"""Text classification of single texts or pairs (MNLI-style); the labels are read from the data."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from transformers import AutoModelForSequenceClassification

from hftrain.data.files import DataError
from hftrain.scoring import baselines
from hftrain.scoring.classification import accuracy_and_macro_f1, label_key, ordered_labels

from .base import Column, LocalMode, Task, Verdict

TEXT_CANDIDATES = ("text", "sentence", "sentence1", "premise", "question1")
PAIR_CANDIDATES = ("text_pair", "sentence2", "hypothesis", "question2")


def labels_for_count(labels: list[str], num_labels: int) -> list[str]:
    """The label names for `num_labels` classes given the labels found (the Lambda's data pre-flight applies the
    same rule to a sample: lambda/data/preflight.py)."""
    try:
        numbers = [int(v) for v in labels]
    except ValueError:
        numbers = None
    if numbers is not None:
        outside = [v for v in numbers if not 0 <= v < num_labels]
        if outside:
            raise DataError(f"label value(s) {outside[:5]} are outside 0..{num_labels - 1} (num_labels={num_labels}); "
                            "fix num_labels or the labels")
        return [str(i) for i in range(num_labels)]
    if len(labels) != num_labels:
        raise DataError(f"the data has {len(labels)} distinct named labels {labels[:10]} but num_labels={num_labels}; "
                        "named labels must be exactly num_labels names (or use integer labels 0..num_labels-1)")
    return labels


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
    num_labels: int | None = field(
        default=None,
        metadata={
            "help": "Number of classes (classification). Default: the distinct labels in the data. When set, "
            "integer labels must be 0..num_labels-1 (the model gets num_labels outputs even when the data lacks a "
            "class); named labels must be exactly num_labels distinct names."
        },
    )


class TextClassification(Task):
    name = "text-classification"
    order = 20
    arguments = TextClassificationArguments
    metrics = ("accuracy", "macro_f1")
    baseline_metrics = ("accuracy", "macro_f1")
    columns = (
        Column("text_column", "text", candidates=TEXT_CANDIDATES),
        Column("text_pair_column", "text pair", candidates=PAIR_CANDIDATES, required=False, off="none"),
        Column("label_column", "label", kind="label"),
    )
    verdict = Verdict("accuracy", 0.02, "accuracy is a share (0-1): 2 points over the strongest constant answer",
                      baselines=("the most frequent training label", "the best single label"))
    local = LocalMode("text-classification.json", "roberta", rows="text_classification_rows")
    auto_model = AutoModelForSequenceClassification
    default_max_length = 128

    def __init__(self, data_args) -> None:
        super().__init__(data_args)
        self.labels: list[str] = []

    def learn_from_data(self, datasets, all_gather) -> None:
        """The label set: the union of every rank's labels (a sharded channel gives each host some)."""
        local = set()
        for ds in datasets:
            if ds is not None:
                local |= set(ordered_labels(ds.unique(self.column("label_column"))))
        self.set_labels(ordered_labels({x for part in all_gather(sorted(local)) for x in part}))

    def set_labels(self, labels: list[str]) -> None:
        if self.data_args.num_labels is not None:
            labels = labels_for_count(labels, self.data_args.num_labels)
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
        text, pair, label = self.column("text_column"), self.column("text_pair_column"), self.column("label_column")

        def prepare(batch):
            args = (batch[text],) if pair is None else (batch[text], batch[pair])
            enc = tokenizer(*args, truncation=True, max_length=max_length,
                            padding="max_length" if a.pad_to_max_length else False)
            enc["labels"] = [label2id.get(label_key(v), -100) for v in batch[label]]
            return enc

        return dataset.map(prepare, batched=True, remove_columns=dataset.column_names, desc=desc, **map_kwargs)

    def tokenize_train(self, dataset, tokenizer, config, map_kwargs: dict):
        return self._tokenize(dataset, tokenizer, config, map_kwargs, "Tokenizing training data")

    def tokenize_eval(self, dataset, tokenizer, config, map_kwargs: dict):
        return self._tokenize(dataset, tokenizer, config, map_kwargs, "Tokenizing validation data")

    def baseline_candidates(self, raw_train, raw_eval) -> dict[str, list]:
        column = self.column("label_column")
        return baselines.classification_candidates(None if raw_train is None else raw_train[column],
                                                   raw_eval[column])

    def score_predictions(self, predictions: list, raw_eval) -> tuple[dict[str, float], list[float]]:
        gold = [label_key(v) for v in raw_eval[self.column("label_column")]]
        guessed = [label_key(v) for v in predictions]
        names = sorted(set(gold) | set(guessed))
        index = {name: i for i, name in enumerate(names)}
        scores = accuracy_and_macro_f1(np.array([index[g] for g in guessed]), np.array([index[g] for g in gold]),
                                       len(names))
        return ({"accuracy": scores["accuracy"], "macro_f1": scores["macro_f1"]},
                [float(p == g) for p, g in zip(guessed, gold, strict=True)])

    def compute_metrics(self, eval_examples, eval_features, tokenizer):
        num_labels = len(self.labels)

        def compute(eval_pred):
            logits = eval_pred.predictions[0] if isinstance(eval_pred.predictions, tuple) else eval_pred.predictions
            predicted = np.argmax(logits, axis=-1)
            self.example_scores = [float(p == g) for p, g in zip(predicted.tolist(), eval_pred.label_ids.tolist(),
                                                                 strict=True)]
            return accuracy_and_macro_f1(predicted, eval_pred.label_ids, num_labels)

        return compute
