"""Question answering: SQuAD scoring and n-best post-processing (no torch, no datasets).

Scoring follows the official SQuAD v1.1/v2.0 evaluation scripts: answers are normalized (lower case,
punctuation and the articles a/an/the removed, whitespace collapsed); exact match and token F1 take the
best gold answer; in v2 a question without gold answers scores 1 only for an empty prediction.
Scores are percentages (0-100).
"""

from __future__ import annotations

import collections
import json
import re
import string
from collections.abc import Iterable, Mapping, Sequence

import numpy as np

_ARTICLES = re.compile(r"\b(a|an|the)\b", re.UNICODE)
_PUNCT = set(string.punctuation)


def answers(value) -> dict:
    """Accept SQuAD's {'text': [...], 'answer_start': [...]}, a JSON string of it, or a list of such dicts."""
    if isinstance(value, str):
        value = json.loads(value) if value.strip() else {"text": [], "answer_start": []}
    if isinstance(value, list):  # [{'text': ..., 'answer_start': ...}, ...]
        value = {"text": [a["text"] for a in value], "answer_start": [a["answer_start"] for a in value]}
    if value is None:
        value = {"text": [], "answer_start": []}
    return {"text": list(value.get("text") or []), "answer_start": [int(s) for s in value.get("answer_start") or []]}


def normalize_answer(text: str) -> str:
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCT)
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _tokens(text: str) -> list[str]:
    return normalize_answer(text).split() if text else []


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def f1(prediction: str, gold: str) -> float:
    pred, ref = _tokens(prediction), _tokens(gold)
    if not pred or not ref:  # no-answer: both empty scores 1, otherwise 0
        return float(pred == ref)
    common = collections.Counter(pred) & collections.Counter(ref)
    same = sum(common.values())
    if same == 0:
        return 0.0
    precision, recall = same / len(pred), same / len(ref)
    return 2 * precision * recall / (precision + recall)


def example_scores(predictions: Mapping[str, str],
                   references: Mapping[str, Sequence[str]]) -> tuple[dict[str, float], dict[str, float]]:
    """Per question (id -> 0..1): exact match and F1 against the best gold answer, in `references`' order."""
    em_scores: dict[str, float] = {}
    f1_scores: dict[str, float] = {}
    for qid, golds in references.items():
        golds = [g for g in golds if normalize_answer(g)] or [""]
        pred = predictions.get(qid, "")
        em_scores[qid] = max(exact_match(pred, g) for g in golds)
        f1_scores[qid] = max(f1(pred, g) for g in golds)
    return em_scores, f1_scores


def squad_scores(predictions: Mapping[str, str], references: Mapping[str, Sequence[str]]) -> dict[str, float]:
    """Exact match and F1 (0-100) over the questions in `references` (id -> gold answer texts).

    A question with no gold answers is a SQuAD v2 no-answer question. When the data has both kinds, the
    HasAns_/NoAns_ breakdown is added, as the v2 script reports it.
    """
    if not references:
        raise ValueError("no reference answers to score against")
    em_scores, f1_scores = example_scores(predictions, references)
    out = {
        "exact_match": 100.0 * float(np.mean(list(em_scores.values()))),
        "f1": 100.0 * float(np.mean(list(f1_scores.values()))),
    }
    has_ans = [qid for qid, golds in references.items() if any(normalize_answer(g) for g in golds)]
    no_ans = [qid for qid in references if qid not in set(has_ans)]
    if has_ans and no_ans:
        for name, ids in (("HasAns", has_ans), ("NoAns", no_ans)):
            out[f"{name}_exact"] = 100.0 * float(np.mean([em_scores[q] for q in ids]))
            out[f"{name}_f1"] = 100.0 * float(np.mean([f1_scores[q] for q in ids]))
            out[f"{name}_total"] = float(len(ids))
    return out


def postprocess_predictions(
    *,
    examples: Sequence[Mapping],
    features: Sequence[Mapping],
    start_logits: np.ndarray,
    end_logits: np.ndarray,
    version_2_with_negative: bool = False,
    n_best_size: int = 20,
    max_answer_length: int = 30,
    null_score_diff_threshold: float = 0.0,
    id_key: str = "id",
    context_key: str = "context",
) -> dict[str, str]:
    """Turn per-feature start/end logits into one answer text per example.

    `features[i]` has `example_id` and `offset_mapping` (None for tokens outside the context). The
    logits may be padded beyond a feature's length (with any value): only positions with an offset are
    considered. For v2 data, the empty answer wins when its score (start + end logit of position 0)
    beats the best span by more than `null_score_diff_threshold`.
    """
    if len(features) != len(start_logits) or len(features) != len(end_logits):
        raise ValueError(f"{len(features)} features but {len(start_logits)}/{len(end_logits)} logit rows")
    by_example: dict[str, list[int]] = collections.defaultdict(list)
    for index, feature in enumerate(features):
        by_example[str(feature["example_id"])].append(index)

    predictions: dict[str, str] = {}
    for example in examples:
        qid = str(example[id_key])
        context = example[context_key]
        best_text, best_score = "", -np.inf
        min_null = None
        for index in by_example.get(qid, []):
            offsets = features[index]["offset_mapping"]
            length = min(len(offsets), start_logits.shape[1])
            starts = np.asarray(start_logits[index][:length], dtype=np.float64)
            ends = np.asarray(end_logits[index][:length], dtype=np.float64)
            null = starts[0] + ends[0]
            if min_null is None or null < min_null:
                min_null = null
            start_candidates = np.argsort(starts)[::-1][:n_best_size]
            end_candidates = np.argsort(ends)[::-1][:n_best_size]
            for s in start_candidates:
                if offsets[s] is None:
                    continue
                for e in end_candidates:
                    if offsets[e] is None or e < s or e - s + 1 > max_answer_length:
                        continue
                    score = starts[s] + ends[e]
                    if score > best_score:
                        best_score = score
                        best_text = context[offsets[s][0] : offsets[e][1]]
        if version_2_with_negative and min_null is not None and (
            best_score == -np.inf or min_null - best_score > null_score_diff_threshold
        ):
            predictions[qid] = ""
        else:
            predictions[qid] = best_text
    return predictions


def references_from(examples: Iterable[Mapping], answers_key: str = "answers", id_key: str = "id") -> dict:
    return {str(ex[id_key]): list(ex[answers_key]["text"]) for ex in examples}
