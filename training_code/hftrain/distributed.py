"""Small torch.distributed helpers that also work in a single process."""

from __future__ import annotations

import os

import torch


def _dist():
    import torch.distributed as dist

    return dist if dist.is_available() and dist.is_initialized() else None


def is_distributed() -> bool:
    return _dist() is not None


def rank() -> int:
    dist = _dist()
    return dist.get_rank() if dist else 0


def world_size() -> int:
    dist = _dist()
    return dist.get_world_size() if dist else 1


def local_rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0") or 0)


def local_world_size() -> int:
    return int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)


def barrier() -> None:
    dist = _dist()
    if dist:
        dist.barrier()


_CPU_GROUP = None


def _cpu_group():
    """A gloo group for tiny control messages (no GPU stream sync when the main backend is NCCL)."""
    global _CPU_GROUP
    dist = _dist()
    if dist is None:
        return None
    if _CPU_GROUP is None:
        _CPU_GROUP = dist.group.WORLD if dist.get_backend() == "gloo" else dist.new_group(backend="gloo")
    return _CPU_GROUP


def any_rank(flag: bool) -> bool:
    """True on every rank when `flag` is True on at least one rank."""
    dist = _dist()
    if dist is None:
        return bool(flag)
    tensor = torch.tensor([1 if flag else 0], dtype=torch.int32)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=_cpu_group())
    return bool(tensor.item())


def any_rank_each(flags: list[bool]) -> list[bool]:
    """For each flag: True on every rank when it is True on at least one rank (one all-reduce for all)."""
    dist = _dist()
    if dist is None:
        return [bool(f) for f in flags]
    tensor = torch.tensor([1 if f else 0 for f in flags], dtype=torch.int32)
    dist.all_reduce(tensor, op=dist.ReduceOp.MAX, group=_cpu_group())
    return [bool(v) for v in tensor.tolist()]


def all_gather_objects(obj) -> list:
    dist = _dist()
    if dist is None:
        return [obj]
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj, group=_cpu_group())
    return out
