"""Batch shapes (hftrain/data/batching.py) and evaluation order under the length-grouped default."""

from __future__ import annotations

import datasets

from hftrain.data import batching


def _dataset(lengths):
    return datasets.Dataset.from_dict({"input_ids": [[1] * n for n in lengths], "row": list(range(len(lengths)))})


def test_row_lengths_read_arrow_and_follow_a_selection():
    ds = _dataset([3, 1, 5, 2, 5])
    assert batching.row_lengths(ds) == [3, 1, 5, 2, 5]
    assert batching.row_lengths(ds.select([4, 1, 0])) == [5, 1, 3]


def test_longest_first_is_a_stable_descending_order():
    ds = _dataset([3, 1, 5, 2, 5])
    assert batching.longest_first(ds)["row"][:] == [2, 4, 0, 3, 1]
    already = _dataset([4, 4, 2])
    assert batching.longest_first(already) is already


def test_random_batch_padding():
    assert batching.random_batch_padding([5, 5, 5, 5], 2) == 0.0
    assert abs(batching.random_batch_padding([1, 3], 2) - 1 / 3) < 1e-9  # one batch: 4 real tokens of 6
    assert batching.random_batch_padding([], 4) == 0.0


def _gather_as_if(others):
    return lambda mine: [mine, *others]


def test_auto_groups_only_where_random_batches_waste_padding():
    wide = _dataset([1 + (i * 37) % 300 for i in range(256)])  # SQuAD-like spread: random batches pad ~50%
    narrow = _dataset([10 + i % 3 for i in range(256)])  # one length class: random batches pad ~10%
    lengths, why = batching.training_lengths(wide, "auto", 16, 0, _gather_as_if([]))
    assert lengths == batching.row_lengths(wide) and "grouped by length" in why
    lengths, why = batching.training_lengths(narrow, "auto", 16, 0, _gather_as_if([]))
    assert lengths is None and "random batches" in why
    assert batching.training_lengths(narrow, "group_by_length", 16, 0, None)[0] == batching.row_lengths(narrow)
    assert batching.training_lengths(wide, "random", 16, 0, None) == (None, "random")
    # ranks agree: a rank without rows follows the others' padding, weighted by rows
    lengths, _ = batching.training_lengths(None, "auto", 16, 0, _gather_as_if([(0.6, 100)]))
    assert lengths is None  # nothing to group here, but the decision is the shared one
    _, why = batching.training_lengths(narrow, "auto", 16, 0, _gather_as_if([(0.9, 10_000)]))
    assert "grouped by length" in why
