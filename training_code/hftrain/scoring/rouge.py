"""Summarization scoring: ROUGE 1/2/L/Lsum F-measures (rouge-score, stemmed), as percentages."""

from __future__ import annotations

import re

KINDS = ("rouge1", "rouge2", "rougeL", "rougeLsum")
SENTENCE_END = re.compile(r"(?<=[.!?])\s+")


def split_sentences(text: str) -> str:
    """One sentence a line, as rougeLsum expects (a regex splitter: no NLTK data download needed)."""
    return "\n".join(s for s in SENTENCE_END.split(text.strip()) if s)


def rouge_examples(predictions: list[str], references: list[str]) -> dict[str, list[float]]:
    """ROUGE 1/2/L/Lsum F-measures (0-100) per example, in the order given."""
    from rouge_score import rouge_scorer

    scorer = rouge_scorer.RougeScorer(KINDS, use_stemmer=True)
    out: dict[str, list[float]] = {k: [] for k in KINDS}
    for pred, ref in zip(predictions, references, strict=True):
        scores = scorer.score(split_sentences(ref), split_sentences(pred))
        for k in KINDS:
            out[k].append(100.0 * scores[k].fmeasure)
    return out


def rouge(predictions: list[str], references: list[str]) -> dict[str, float]:
    """The mean of each F-measure over the examples (0-100)."""
    per_example = rouge_examples(predictions, references)
    n = max(len(predictions), 1)
    return {k: sum(v) / n for k, v in per_example.items()}
