"""Summarization scoring: ROUGE 1/2/L/Lsum F-measures (rouge-score, stemmed), as percentages."""

from __future__ import annotations

import re

SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_sentences(text: str) -> str:
    """One sentence a line, as rougeLsum expects (a regex splitter: no NLTK data download needed)."""
    return "\n".join(s for s in SENTENCE_END.split(text.strip()) if s)


def rouge(predictions: list[str], references: list[str]) -> dict[str, float]:
    from rouge_score import rouge_scorer

    kinds = ["rouge1", "rouge2", "rougeL", "rougeLsum"]
    scorer = rouge_scorer.RougeScorer(kinds, use_stemmer=True)
    totals = {k: 0.0 for k in kinds}
    for pred, ref in zip(predictions, references, strict=True):
        scores = scorer.score(split_sentences(ref), split_sentences(pred))
        for k in kinds:
            totals[k] += scores[k].fmeasure
    n = max(len(predictions), 1)
    return {k: 100.0 * v / n for k, v in totals.items()}
