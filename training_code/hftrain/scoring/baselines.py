"""The tasks' trivial baselines on the validation data, so a summary can say whether the model learned anything.

Each task class picks its own (`Task.baseline`, the columns it resolved) from the scorers here:

- text classification: always the most frequent training label (accuracy, macro F1);
- question answering: the first two words of the context as the answer (exact match, F1);
- summarization: lead-3, the document's first three sentences (ROUGE), the classic news-summarization baseline.

Reported as `eval_baseline_<metric>` next to the model's `eval_<metric>` (METRIC lines, metrics.json).
Computed on global rank 0 from the rows it holds (with ShardedByS3Key: its own shard of the training data for
the majority label).
"""

from __future__ import annotations

import collections
import logging

import numpy as np

from hftrain.scoring import squad
from hftrain.scoring.classification import accuracy_and_macro_f1, label_key, ordered_labels
from hftrain.scoring.rouge import SENTENCE_END, rouge

logger = logging.getLogger(__name__)
PREFIX = "eval_baseline_"


def classification(train_labels, eval_labels) -> dict[str, float]:
    train = [label_key(v) for v in train_labels if v is not None]
    gold = [label_key(v) for v in eval_labels if v is not None]
    if not train or not gold:
        return {}
    names = ordered_labels(set(train) | set(gold))
    index = {name: i for i, name in enumerate(names)}
    majority = collections.Counter(train).most_common(1)[0][0]
    scores = accuracy_and_macro_f1(np.full(len(gold), index[majority]), np.array([index[g] for g in gold]),
                                   len(names))
    return {"accuracy": scores["accuracy"], "macro_f1": scores["macro_f1"]}


def question_answering(ids, contexts, answers) -> dict[str, float]:
    predictions = {str(i): " ".join(str(c or "").split()[:2]) for i, c in zip(ids, contexts, strict=True)}
    references = {str(i): squad.answers(a)["text"] for i, a in zip(ids, answers, strict=True)}
    if not references:
        return {}
    scores = squad.squad_scores(predictions, references)
    return {"exact_match": scores["exact_match"], "f1": scores["f1"]}


def summarization(documents, summaries) -> dict[str, float]:
    leads = [" ".join(SENTENCE_END.split(str(d or "").strip())[:3]) for d in documents]
    if not leads:
        return {}
    return rouge(leads, [str(s or "") for s in summaries])


def compute(task, raw_train, raw_eval) -> dict[str, float]:
    """The task's baseline (`Task.baseline`) on raw_eval as {eval_baseline_<name>: value}; {} when it cannot be
    computed."""
    if raw_eval is None or len(raw_eval) == 0:
        return {}
    try:
        scores = task.baseline(raw_train, raw_eval)
    except Exception as err:  # noqa: BLE001 - a baseline is a courtesy: never fail a finished training for it
        logger.warning("no trivial baseline for %s: %s", task.name, err)
        return {}
    return {f"{PREFIX}{name}": float(value) for name, value in scores.items()}
