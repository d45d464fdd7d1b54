"""The benchmark workloads: one per task, generated data with realistic length distributions, tiny models.

Training sets hold at least 200 batches, so that length grouping works on mega-batches of 50 batches as it does
on real datasets (both the Trainer's LengthGroupedSampler and this code shrink them on small datasets).

The rules that make the data learnable are local_mode.synthetic's (the answer follows the word "key"; the label
is the colour word in the text; the summary is the first sentence); only the lengths are drawn here, from
log-normal distributions shaped like public datasets, because the padding waste that the benchmark measures
depends on nothing but the spread of lengths:

* question answering: SQuAD v1.1-like contexts (median ~120 words, long right tail, some contexts longer than
  max_seq_length and split by doc_stride) -- synthetic.qa_examples(squad_lengths=True);
* classification: review-like single texts (median ~40 words, 5% above 150 words: truncated at 128 tokens),
  the style of IMDB/Yelp/SST-2 fine-tuning through run_glue.py with its default max_seq_length 128;
* summarization: news-like documents (median ~150 words, up to ~400 words, the 512-position limit of the tiny
  BART) with a one-sentence summary, XSum-style.
"""

from __future__ import annotations

import json
import math
import random
from dataclasses import dataclass, field
from pathlib import Path

from local_mode import synthetic as synth


@dataclass(frozen=True)
class Workload:
    """One task as the benchmark runs it: model kind, lengths, batch and optimizer settings shared by all arms."""

    task: str
    model_kind: str
    max_seq_length: int
    batch_size: int
    learning_rate: float
    train_examples: int
    eval_examples: int
    timing_steps: int
    learn_steps: int
    model_size: str = "small"  # synthetic.build_config: tiny (64 wide) or small (128 wide), 2 layers
    extra: dict = field(default_factory=dict)  # task-specific hyperparameters, same meaning in every arm


WORKLOADS = {
    "question-answering": Workload(
        task="question-answering", model_kind="bert", max_seq_length=384, batch_size=32, learning_rate=3e-3,
        train_examples=6400, eval_examples=200, timing_steps=30, learn_steps=800, model_size="tiny",
        extra={"doc_stride": 128},
    ),
    "text-classification": Workload(
        task="text-classification", model_kind="roberta", max_seq_length=128, batch_size=32, learning_rate=2e-3,
        train_examples=6400, eval_examples=300, timing_steps=30, learn_steps=200,
    ),
    "summarization": Workload(
        task="summarization", model_kind="bart", max_seq_length=512, batch_size=8, learning_rate=1e-3,
        train_examples=1600, eval_examples=60, timing_steps=20, learn_steps=400,
        extra={"max_target_length": 48},
    ),
}


def review_examples(n: int, seed: int) -> list[dict]:
    """Single texts with the label rule of synthetic.cls_examples and review-like lengths.

    The colour word sits in the first 20 words so that truncation at 128 tokens never removes it.
    Columns are `sentence`, `label` only: run_glue.py takes the first two non-label columns as a pair.
    """
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        length = int(min(400, max(5, rng.lognormvariate(math.log(40), 0.75))))
        words = [rng.choice(synth.WORDS) for _ in range(length)]
        label = rng.randrange(len(synth.COLOURS))
        words[rng.randrange(min(20, length))] = synth.COLOURS[label]
        rows.append({"sentence": " ".join(words), "label": synth.COLOURS[label]})
    return rows


def news_examples(n: int, seed: int) -> list[dict]:
    """Documents of several sentences whose summary is the first one (synthetic.summ_examples' rule).

    Columns are `document`, `summary` in that order (run_summarization.py's defaults read the first two).
    """
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        total = int(min(400, max(30, rng.lognormvariate(math.log(150), 0.5))))
        sentences, used = [], 0
        while used < total:
            size = rng.randint(6, 14)
            sentences.append(" ".join(rng.choice(synth.WORDS) for _ in range(size)) + " .")
            used += size
        rows.append({"document": " ".join(sentences), "summary": sentences[0]})
    return rows


def examples(task: str, n: int, seed: int) -> list[dict]:
    if task == "question-answering":
        return synth.qa_examples(n, seed, squad_lengths=True)
    if task == "text-classification":
        return review_examples(n, seed)
    if task == "summarization":
        return news_examples(n, seed)
    raise ValueError(task)


def write_data(task: str, directory: Path, *, train: int, evaluation: int) -> dict[str, Path]:
    """Train/validation files, the same rows in two layouts: JSON lines (this code's channels, run_glue.py and
    run_summarization.py read them) and {"data": [...]} JSON (run_qa.py loads local files with field="data")."""
    directory.mkdir(parents=True, exist_ok=True)
    out: dict[str, Path] = {}
    for split, n, seed in (("train", train, 1), ("validation", evaluation, 2)):
        rows = examples(task, n, seed)
        out[split] = synth.write_jsonl(directory / split / f"{split}.jsonl", rows)
        nested = directory / f"{split}-data-field.json"
        nested.write_text(json.dumps({"data": rows}))
        out[f"{split}_data_field"] = nested
    return out
