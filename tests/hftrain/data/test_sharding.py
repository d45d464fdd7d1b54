"""Who trains on which rows: exactly once per epoch, equal steps on every rank, no hang on empty shards."""

from __future__ import annotations

import collections

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from hftrain.data import sharding


def test_batch_sizes_are_even_and_complete():
    assert sharding.batch_sizes(10, 4) == [3, 3, 2, 2]
    assert sharding.batch_sizes(8, 2) == [4, 4]
    assert sharding.batch_sizes(2, 4) == [1, 1]  # the caller adds two zero-weight batches
    assert sharding.batch_sizes(5, 0) == []


def test_plan_uses_the_largest_rank():
    plan = sharding.plan([29, 28, 7, 6], batch_size=4, rank=3)
    assert plan.num_batches == 8 and plan.rows == 6 and plan.zero_weight_batches == 2
    assert sharding.plan([29, 28, 7, 6], 4, 0).zero_weight_batches == 0


def _simulate(hosts_rows: list[int], local_world: int, batch_size: int, epochs: int = 2, **kw):
    """Every rank of a sharded layout, without torch.distributed: row ids are (host, index)."""
    counts = [sharding.owned_rows(n, r, local_world) for n in hosts_rows for r in range(local_world)]
    num_batches = sharding.plan(counts, batch_size, 0).num_batches
    seen = {e: collections.Counter() for e in range(epochs)}
    lengths_per_rank = []
    for host, n in enumerate(hosts_rows):
        for local in range(local_world):
            filler = 0 if sharding.owned_rows(n, local, local_world) == 0 else None  # borrowed row
            sampler = sharding.EpochBatchSampler(num_rows=n, group_rank=local, group_size=local_world,
                                                 num_batches=num_batches, batch_size=batch_size, seed=7,
                                                 filler_row=filler, **kw)
            for epoch in range(epochs):
                sampler.set_epoch(epoch)
                batches = list(sampler)
                lengths_per_rank.append(len(batches))
                for batch in batches:
                    assert batch, "empty batch"
                    assert all(i >= 0 for i in batch) or len(batch) == 1
                    assert len(batch) <= batch_size
                    seen[epoch].update((host, i) for i in batch if i >= 0)
    return seen, lengths_per_rank, num_batches


@settings(max_examples=60, deadline=None)
@given(
    hosts_rows=st.lists(st.integers(min_value=0, max_value=60), min_size=1, max_size=4).filter(lambda x: sum(x) > 0),
    local_world=st.integers(min_value=1, max_value=4),
    batch_size=st.integers(min_value=1, max_value=8),
)
def test_every_row_exactly_once_per_epoch_and_equal_steps(hosts_rows, local_world, batch_size):
    seen, lengths, num_batches = _simulate(hosts_rows, local_world, batch_size)
    expected = {(h, i) for h, n in enumerate(hosts_rows) for i in range(n)}
    for counter in seen.values():
        assert set(counter) == expected
        assert all(c == 1 for c in counter.values())
    assert set(lengths) == {num_batches}


def test_replicated_layout_is_a_distributed_sampler_without_padding():
    world, n = 4, 30
    counts = [sharding.owned_rows(n, r, world) for r in range(world)]
    assert counts == [8, 8, 7, 7]
    seen = collections.Counter()
    for r in range(world):
        s = sharding.EpochBatchSampler(num_rows=n, group_rank=r, group_size=world, num_batches=2, batch_size=4, seed=1)
        seen.update(i for b in s for i in b)
    assert sorted(seen) == list(range(n)) and set(seen.values()) == {1}


def test_epochs_reshuffle_deterministically():
    make = lambda: sharding.EpochBatchSampler(num_rows=50, group_rank=0, group_size=1, num_batches=5,  # noqa: E731
                                              batch_size=10, seed=3)
    a, b = make(), make()
    assert list(a) == list(b)
    a.set_epoch(1)
    assert list(a) != list(b)


def test_length_grouping_batches_similar_lengths():
    lengths = [(i * 37) % 100 + 1 for i in range(400)]
    sampler = sharding.EpochBatchSampler(num_rows=400, group_rank=0, group_size=1, num_batches=25, batch_size=16,
                                         seed=0, lengths=lengths)
    batches = list(sampler)
    assert sorted(i for b in batches for i in b) == list(range(400))
    spread = sum(max(lengths[i] for i in b) - min(lengths[i] for i in b) for b in batches) / len(batches)
    assert spread < 20  # random batches of 16 would spread over most of 1..100
    assert max(lengths[i] for i in batches[0]) == max(lengths)  # longest first


def test_weighted_rows_and_collator():
    import datasets

    ds = datasets.Dataset.from_dict({"input_ids": [[1, 2], [3, 4, 5], [6]], "labels": [0, 1, 0]})
    rows = sharding.WeightedRows(ds, extra_row={"input_ids": [9], "labels": 1})
    assert len(rows) == 4
    got = rows.__getitems__([2, 0])
    assert [r["input_ids"] for r in got] == [[6], [1, 2]] and {r["_weight"] for r in got} == {1.0}
    filler = rows.__getitems__([-4])
    assert filler[0]["input_ids"] == [9] and filler[0]["_weight"] == 0.0

    def collate(features):
        return {"n": torch.tensor(len(features))}

    collator = sharding.WeightedCollator(collate)
    assert "loss_weight" not in collator(rows.__getitems__([0, 1]))
    assert collator(rows.__getitems__([-1]))["loss_weight"].item() == 0.0
    with pytest.raises(ValueError, match="mixes"):
        collator(rows.__getitems__([0, -1]))


def test_agree_layout_single_process():
    layout = sharding.agree_layout(num_rows=10, sharded=False, batch_size=4, rank=0, world_size=1, local_rank=0,
                                   local_world_size=1)
    assert layout.plan.num_batches == 3 and layout.filler_row is None
    with pytest.raises(ValueError, match="empty on every host"):
        sharding.agree_layout(num_rows=0, sharded=True, batch_size=4, rank=0, world_size=1, local_rank=0,
                              local_world_size=1)


@settings(max_examples=40, deadline=None)
@given(
    hosts_rows=st.lists(st.integers(min_value=0, max_value=60), min_size=1, max_size=4).filter(lambda x: sum(x) > 0),
    local_world=st.integers(min_value=1, max_value=4),
    batch_size=st.integers(min_value=1, max_value=8),
    salt=st.integers(min_value=1, max_value=10_000),
)
def test_length_grouped_default_keeps_every_row_once_and_equal_steps(hosts_rows, local_world, batch_size, salt):
    """group_by_length is the default: it must keep the sharding guarantees of the random order."""
    lengths = [(i * salt) % 97 + 1 for i in range(max(hosts_rows))]
    seen, counts, num_batches = _simulate(hosts_rows, local_world, batch_size, lengths=lengths)
    expected = {(h, i) for h, n in enumerate(hosts_rows) for i in range(n)}
    for counter in seen.values():
        assert set(counter) == expected
        assert all(c == 1 for c in counter.values())
    assert set(counts) == {num_batches}
