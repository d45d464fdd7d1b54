"""Batch shapes: row lengths for length-grouped training batches, and evaluation batches longest first.

Lengths come from the Arrow column (no Python list of every token id: a large dataset's input_ids never leave
Arrow memory). Evaluation features are put in order of decreasing length once, before the metrics are set up
(the metrics read the same reordered features, so predictions and features stay aligned), so evaluation batches
carry almost no padding and the largest batch runs first.
"""

from __future__ import annotations


def row_lengths(dataset, column: str = "input_ids") -> list[int]:
    """Length of `column` in every row of a `datasets.Dataset`."""
    import pyarrow.compute as pc

    lengths = pc.list_value_length(dataset.with_format("arrow")[column])
    return [int(x) for x in lengths.to_numpy(zero_copy_only=False)]


def longest_first(dataset, column: str = "input_ids"):
    """The dataset reordered by decreasing length (stable: equal lengths keep their order)."""
    lengths = row_lengths(dataset, column)
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    if order == list(range(len(lengths))):
        return dataset
    return dataset.select(order)


# Length grouping costs randomness: a batch holds examples of one length. Under `auto` it is used only where random
# batches would spend at least this share of their tokens on padding (measured on the tiny models: a summarization
# set whose random batches pad 22% learned far slower grouped; SQuAD-like QA, review-like classification and
# news-like summarization pad 40-60% in random batches and learned as well or better grouped).
AUTO_GROUP_MIN_PADDING = 0.30


def random_batch_padding(lengths: list[int], batch_size: int, seed: int = 0) -> float:
    """Share of padded tokens when `lengths` are cut into random batches (one shuffled epoch)."""
    import random

    if not lengths:
        return 0.0
    order = list(range(len(lengths)))
    random.Random(seed).shuffle(order)
    real = padded = 0
    for start in range(0, len(order), max(1, batch_size)):
        batch = [lengths[i] for i in order[start:start + batch_size]]
        real += sum(batch)
        padded += max(batch) * len(batch)
    return 1.0 - real / padded if padded else 0.0


def training_lengths(features, strategy: str, batch_size: int, seed: int, gather) -> tuple[list[int] | None, str]:
    """(row lengths for the batch sampler, or None for plain shuffled batches; why), for train_sampling_strategy.

    Every rank calls this with the same `strategy`; under `auto` the ranks agree (`gather` is an all-gather of
    Python objects) on one decision from the padding their rows would carry in random batches.
    """
    if strategy not in ("group_by_length", "auto"):
        return None, strategy
    lengths = row_lengths(features) if features is not None and len(features) else None
    if strategy == "group_by_length":
        return lengths, "group_by_length"
    mine = (random_batch_padding(lengths, batch_size, seed), len(lengths)) if lengths else (0.0, 0)
    everyone = gather(mine)
    rows = sum(n for _, n in everyone)
    waste = sum(share * n for share, n in everyone) / rows if rows else 0.0
    if waste >= AUTO_GROUP_MIN_PADDING:
        return lengths, f"auto: grouped by length (random batches would pad {waste:.0%} of their tokens)"
    return None, (f"auto: random batches (they pad {waste:.0%} of their tokens, under "
                  f"{AUTO_GROUP_MIN_PADDING:.0%}: grouping would cost randomness for little)")
