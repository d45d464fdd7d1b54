"""Who trains on which rows, with every rank running the same number of steps.

Two layouts, one mechanism:

* FullyReplicated input: every host holds the whole dataset. The *group* is the whole world: each epoch
  the rows are shuffled with a seed shared by all ranks and rank r takes rows r, r+W, r+2W, ... (a
  distributed sampler without padding).
* ShardedByS3Key input: each host holds its own shard. The group is the host's local ranks: each epoch
  the shard is shuffled with a seed shared by the host's ranks and local rank r takes rows r, r+L, ...

Either way each row a rank owns is used exactly once per epoch. Ranks may own different numbers of rows
(uneven shards, or W not dividing N). All ranks agree on the number of batches per epoch,
S = max over ranks of ceil(rows / batch_size), and each rank splits its rows into S batches of as even a
size as possible, so a rank with fewer rows runs the same steps with slightly smaller batches: nothing
is dropped and nothing is repeated. Only when a rank owns fewer rows than S (a host that received few or
no files) does it fill the missing batches with *zero-weight* batches: a copy of one row whose loss is
multiplied by 0, so the rank takes part in the gradient all-reduce (no hang) without counting any
example twice. Those steps are logged.
"""

from __future__ import annotations

import json
import logging
import math
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import torch

from hftrain.parallel.process_group import all_gather_objects

logger = logging.getLogger(__name__)


def owned_rows(num_rows: int, group_rank: int, group_size: int) -> int:
    """How many rows of `num_rows` the strided split gives to `group_rank`."""
    if group_size < 1 or not 0 <= group_rank < group_size:
        raise ValueError(f"bad group: rank {group_rank} of {group_size}")
    return len(range(group_rank, num_rows, group_size))


def batches_needed(rows: int, batch_size: int) -> int:
    return math.ceil(rows / batch_size) if rows > 0 else 0


def batch_sizes(rows: int, num_batches: int) -> list[int]:
    """Split `rows` into `num_batches` real batches of sizes that differ by at most one.

    When rows < num_batches, the result has `rows` batches of one row; the caller adds zero-weight
    batches for the rest.
    """
    if num_batches <= 0:
        return []
    if rows < num_batches:
        return [1] * rows
    base, extra = divmod(rows, num_batches)
    return [base + 1 if i < extra else base for i in range(num_batches)]


@dataclass(frozen=True)
class EpochPlan:
    """The per-rank numbers for one layout (the same every epoch)."""

    rows: int  # rows this rank owns
    num_batches: int  # S, the same on every rank
    zero_weight_batches: int  # batches this rank fills with a zero-weight copy


def plan(rows_per_rank: Sequence[int], batch_size: int, rank: int) -> EpochPlan:
    """Given every rank's row count, the plan for `rank`."""
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    num_batches = max((batches_needed(r, batch_size) for r in rows_per_rank), default=0)
    rows = rows_per_rank[rank]
    return EpochPlan(rows=rows, num_batches=num_batches, zero_weight_batches=max(0, num_batches - rows))


def length_grouped(indices: list[int], lengths: Sequence[int], batch_size: int, generator: torch.Generator) -> list[int]:
    """Order shuffled indices so that neighbours have similar lengths: mega-batches of up to 50 batches, each
    sorted longest first, with at least 4 mega-batches per epoch (as the Trainer's LengthGroupedSampler sizes
    them), so that a small dataset is not sorted whole and batches still change from epoch to epoch."""
    mega = max(batch_size, 1) * max(1, min(50, len(indices) // (4 * max(batch_size, 1))))
    out: list[int] = []
    for start in range(0, len(indices), mega):
        chunk = indices[start : start + mega]
        chunk.sort(key=lambda i: lengths[i], reverse=True)
        out.extend(chunk)
    return out


class EpochBatchSampler(torch.utils.data.Sampler):
    """Yields S batches of row indices per epoch for one rank (see the module docstring).

    Negative indices stand for zero-weight rows: -(i + 1) is a zero-weight copy of row i.
    `set_epoch` must be called before each epoch (the training callbacks do it).
    """

    def __init__(
        self,
        *,
        num_rows: int,
        group_rank: int,
        group_size: int,
        num_batches: int,
        batch_size: int,
        seed: int,
        shuffle: bool = True,
        lengths: Sequence[int] | None = None,
        filler_row: int | None = None,
        trace_ids: Sequence[str] | None = None,
        trace_path: str | None = None,
    ) -> None:
        self.num_rows = num_rows
        self.group_rank = group_rank
        self.group_size = group_size
        self.num_batches = num_batches
        self.batch_size = batch_size
        self.seed = seed
        self.shuffle = shuffle
        self.lengths = lengths
        self.filler_row = filler_row
        self.epoch = 0
        self.trace_ids = trace_ids
        self.trace_path = trace_path
        self.rows = owned_rows(num_rows, group_rank, group_size)
        if self.rows < num_batches and filler_row is None and self.rows == 0:
            raise ValueError("a rank without rows needs a filler row for its zero-weight batches")

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.num_batches

    def epoch_batches(self, epoch: int | None = None) -> list[list[int]]:
        epoch = self.epoch if epoch is None else epoch
        generator = torch.Generator()
        generator.manual_seed(self.seed * 1_000_003 + epoch)
        if self.shuffle:
            order = torch.randperm(self.num_rows, generator=generator).tolist()
        else:
            order = list(range(self.num_rows))
        mine = order[self.group_rank :: self.group_size]
        if self.lengths is not None and self.shuffle:
            mine = length_grouped(mine, self.lengths, self.batch_size, generator)
        batches: list[list[int]] = []
        start = 0
        for size in batch_sizes(len(mine), self.num_batches):
            batches.append(mine[start : start + size])
            start += size
        if self.lengths is not None and self.shuffle and len(batches) > 1:
            # random batch order, longest batch first (an out-of-memory shows at the first step)
            perm = torch.randperm(len(batches), generator=generator).tolist()
            batches = [batches[i] for i in perm]
            longest = max(range(len(batches)), key=lambda b: max(self.lengths[i] for i in batches[b]))
            batches[0], batches[longest] = batches[longest], batches[0]
        filler = mine[0] if mine else self.filler_row
        while len(batches) < self.num_batches:
            batches.append([-(filler + 1)])
        return batches

    def __iter__(self) -> Iterator[list[int]]:
        batches = self.epoch_batches()
        trace = self.trace_path is not None
        for batch in batches:
            if trace:
                self._trace(batch)
            yield batch

    def _trace(self, batch: list[int]) -> None:
        ids = [self.trace_ids[i] if self.trace_ids is not None else str(i) for i in batch if i >= 0]
        with open(self.trace_path, "a") as handle:
            handle.write(json.dumps({"epoch": self.epoch, "ids": ids, "zero_weight": len(batch) - len(ids)}) + "\n")


class WeightedRows(torch.utils.data.Dataset):
    """A tokenized dataset read by index lists that may hold zero-weight (negative) indices.

    Each returned row carries `_weight` (1.0 or 0.0); `WeightedCollator` turns it into `loss_weight`.
    """

    def __init__(self, dataset, extra_row: dict | None = None) -> None:
        self.dataset = dataset
        self.extra_row = extra_row
        self.base_len = len(dataset)

    def __len__(self) -> int:
        return self.base_len + (1 if self.extra_row is not None else 0)

    def _rows(self, indices: list[int]) -> list[dict]:
        real = [i for i in indices if i < self.base_len]
        rows: dict[int, dict] = {}
        if real:
            batch = self.dataset[real]
            keys = list(batch.keys())
            for pos, index in enumerate(real):
                rows[index] = {k: batch[k][pos] for k in keys}
        if self.extra_row is not None:
            rows[self.base_len] = dict(self.extra_row)
        return [dict(rows[i]) for i in indices]

    def __getitems__(self, indices: list[int]) -> list[dict]:
        plain = [i if i >= 0 else -i - 1 for i in indices]
        rows = self._rows(plain)
        for row, index in zip(rows, indices, strict=True):
            row["_weight"] = 1.0 if index >= 0 else 0.0
        return rows

    def __getitem__(self, index: int) -> dict:
        return self.__getitems__([index])[0]


class WeightedCollator:
    """Wraps a collator: removes `_weight` from rows, adds a scalar `loss_weight` to zero-weight batches."""

    def __init__(self, collator) -> None:
        self.collator = collator

    def __call__(self, features: list[dict]):
        weights = [float(f.pop("_weight", 1.0)) for f in features]
        batch = self.collator(features)
        if min(weights) < 1.0:
            if max(weights) > 0.0:
                raise ValueError("a batch mixes real and zero-weight rows")
            batch["loss_weight"] = torch.tensor(0.0)
        return batch


def weighted_loss(out, weight, return_outputs: bool):
    """The Trainer's compute_loss result (the loss, or (loss, outputs)) scaled by the batch's `loss_weight`
    (WeightedCollator; None: a batch of real rows, left as it is)."""
    if weight is None:
        return out
    if return_outputs:
        loss, outputs = out
        return loss * weight, outputs
    return out * weight


class EpochDataLoader(torch.utils.data.DataLoader):
    """A DataLoader whose `set_epoch` reaches the batch sampler (the Trainer calls it each epoch)."""

    def set_epoch(self, epoch: int) -> None:
        sampler = self.batch_sampler
        if hasattr(sampler, "set_epoch"):
            sampler.set_epoch(epoch)


# ---------------------------------------------------------------- agreement across ranks


@dataclass
class Layout:
    """How this rank reads the training rows, agreed with every other rank."""

    group_rank: int
    group_size: int
    rows_per_rank: list[int]
    plan: EpochPlan
    filler_row: dict | None  # a row borrowed from another rank when this rank owns none
    sharded: bool


def agree_layout(
    *,
    num_rows: int,
    sharded: bool,
    batch_size: int,
    rank: int,
    world_size: int,
    local_rank: int,
    local_world_size: int,
    first_row_fn=None,
) -> Layout:
    """Every rank calls this at the same time; it exchanges row counts (and, if needed, one row)."""
    if sharded:
        group_rank, group_size = local_rank, local_world_size
    else:
        group_rank, group_size = rank, world_size
    mine = owned_rows(num_rows, group_rank, group_size)
    rows_per_rank = [int(x) for x in all_gather_objects(mine)]
    if sum(rows_per_rank) == 0:
        raise ValueError("the training data is empty on every host (no rows after preprocessing)")
    epoch_plan = plan(rows_per_rank, batch_size, rank if len(rows_per_rank) > 1 else 0)
    filler = None
    needs_filler = [r == 0 for r in rows_per_rank]
    if any(needs_filler):
        offered = all_gather_objects(first_row_fn() if (mine > 0 and first_row_fn is not None) else None)
        if mine == 0:
            filler = next(row for row in offered if row is not None)
    layout = Layout(
        group_rank=group_rank,
        group_size=group_size,
        rows_per_rank=rows_per_rank,
        plan=epoch_plan,
        filler_row=filler,
        sharded=sharded,
    )
    if rank == 0:
        zero = sum(max(0, epoch_plan.num_batches - r) for r in rows_per_rank)
        logger.info(
            "training layout: %s input, rows per rank %s, %d batches per epoch on every rank, "
            "%d zero-weight batches per epoch in total",
            "sharded" if sharded else "replicated",
            rows_per_rank,
            epoch_plan.num_batches,
            zero,
        )
    return layout


def trace_path_for(host: str, rank: int) -> str | None:
    """HFTRAIN_TRACE_DIR (tests, debugging): each rank appends the ids of the rows it trains on."""
    directory = os.environ.get("HFTRAIN_TRACE_DIR")
    if not directory:
        return None
    os.makedirs(directory, exist_ok=True)
    return os.path.join(directory, f"seen-{host}-rank{rank}.jsonl")
