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
