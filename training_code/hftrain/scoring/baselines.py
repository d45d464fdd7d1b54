"""The tasks' trivial baselines on the validation data: several per task, the strongest one counts.

A run "learned" only when it beats the strongest of them (scoring/judgement.py). Each task class lists its
candidates (`Task.baseline_candidates`: a prediction per validation row) and scores them as it scores the model
(`Task.score_predictions`); the candidates are built here:

- text classification: the most frequent training label; the best single label on the validation set itself
  (the strongest constant answer);
- question answering: the empty answer; the context's first words; the first sentence holding the most question
  words; the span next to the window of the context that overlaps the question most (the sliding-window baseline
  of the SQuAD paper, Rajpurkar et al. 2016, with words instead of constituents);
- summarization: lead-1, lead-2 and lead-3 (the document's first sentences), the classic news baselines.

Reported as `eval_baseline_<metric>` (the strongest candidate by the task's headline metric) next to the model's
`eval_<metric>` (METRIC lines, metrics.json). Computed on global rank 0 from the rows it holds (with
ShardedByS3Key: its own shard of the training data for the training-label candidates).
"""

from __future__ import annotations

import collections
import logging
import statistics
from collections.abc import Sequence
from typing import Any

from hftrain.scoring import squad
from hftrain.scoring.rouge import SENTENCE_END

logger = logging.getLogger(__name__)
PREFIX = "eval_baseline_"
# words a question shares with any text: not evidence of where its answer is
_STOP = ("a an the of in on at to for by with from and or is are was were be been what which who whom whose when "
         "where why how does do did it its this that these those as")
STOP_WORDS = frozenset(_STOP.split())
LONGEST_ANSWER_WORDS = 10


# --- classification ---------------------------------------------------------------------------------------
def classification_candidates(train_labels: Sequence[Any] | None, eval_labels: Sequence[Any]) -> dict[str, list]:
    gold = [v for v in eval_labels if v is not None]
    out: dict[str, list] = {}
    train = [v for v in train_labels or () if v is not None]
    if train:
        majority = collections.Counter(train).most_common(1)[0][0]
        out["the most frequent training label"] = [majority] * len(eval_labels)
    if gold:
        best = collections.Counter(gold).most_common(1)[0][0]
        out["the best single label"] = [best] * len(eval_labels)
    return out


# --- question answering -----------------------------------------------------------------------------------
def _question_words(question: str) -> set[str]:
    return {w for w in squad.normalize_answer(str(question or "")).split() if w not in STOP_WORDS}


def answer_length(train_answers: Sequence[Any] | None) -> int:
    """The median answer length in words of the training answers (3 without any), at most 10."""
    lengths = [len(text.split()) for value in train_answers or () for text in squad.answers(value)["text"][:1]
               if text.strip()]
    return max(1, min(LONGEST_ANSWER_WORDS, round(statistics.median(lengths)) if lengths else 3))


def best_sentence(question: str, context: str) -> str:
    """The first sentence of the context holding the most (distinct) question words."""
    wanted = _question_words(question)
    sentences = [s for s in SENTENCE_END.split(str(context or "").strip()) if s] or [""]
    counts = [len(wanted & set(squad.normalize_answer(s).split())) for s in sentences]
    return sentences[counts.index(max(counts))]


def window_span(question: str, context: str, length: int) -> str:
    """The `length` words whose neighbourhood (`length` words each side) holds the most distinct question words
    (the first such span; none shared: the context's first words)."""
    words = str(context or "").split()
    wanted = _question_words(question)
    normal = [squad.normalize_answer(w) for w in words]
    best, best_count = 0, 0
    for start in range(max(1, len(words) - length + 1)):
        near = set(normal[max(0, start - length):start + 2 * length])
        count = len(wanted & near)
        if count > best_count:
            best, best_count = start, count
    return " ".join(words[best:best + length])


def question_answering_candidates(questions: Sequence[str], contexts: Sequence[str],
                                  train_answers: Sequence[Any] | None) -> dict[str, list[str]]:
    length = answer_length(train_answers)
    return {
        "the empty answer": [""] * len(contexts),
        "the context's first words": [" ".join(str(c or "").split()[:length]) for c in contexts],
        "the sentence with the most question words": [best_sentence(q, c) for q, c in zip(questions, contexts,
                                                                                            strict=True)],
        "the span by the window that overlaps the question most": [
            window_span(q, c, length) for q, c in zip(questions, contexts, strict=True)],
    }


# --- summarization ----------------------------------------------------------------------------------------
def lead(document: str, k: int) -> str:
    return " ".join(SENTENCE_END.split(str(document or "").strip())[:k])


def summarization_candidates(documents: Sequence[str]) -> dict[str, list[str]]:
    return {f"lead-{k}": [lead(d, k) for d in documents] for k in (1, 2, 3)}


# --- the strongest ----------------------------------------------------------------------------------------
def strongest(task, raw_train, raw_eval) -> tuple[str, dict[str, float], list[float]] | None:
    """(name, metrics, per-example headline scores) of the task's strongest trivial baseline on raw_eval, by the
    mean of its headline metric (ties: the first listed); None when the task has none for this data."""
    best = None
    for name, predictions in task.baseline_candidates(raw_train, raw_eval).items():
        metrics, per_example = task.score_predictions(predictions, raw_eval)
        if best is None or sum(per_example) > sum(best[2]):
            best = (name, metrics, per_example)
    return best


def compute(task, raw_train, raw_eval) -> dict[str, float]:
    """The strongest baseline's metrics on raw_eval as {eval_baseline_<name>: value}; {} when it cannot be
    computed."""
    if raw_eval is None or len(raw_eval) == 0:
        return {}
    try:
        found = strongest(task, raw_train, raw_eval)
    except Exception as err:  # noqa: BLE001 - a baseline is a courtesy: never fail a finished training for it
        logger.warning("no trivial baseline for %s: %s", task.name, err)
        return {}
    if found is None:
        return {}
    return {f"{PREFIX}{name}": float(value) for name, value in found[1].items()}
