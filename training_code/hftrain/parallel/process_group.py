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


# Backends that allow no second process group: the SMDDP library documents that its `smddp` backend supports
# neither torch.distributed.new_group() nor running alongside another backend such as gloo or NCCL.
SINGLE_GROUP_BACKENDS = ("smddp",)

_CONTROL: tuple | None = None  # (group, device) for the small control collectives below


def _control():
    """(group, device) for tiny control messages.

    gloo: the default group, CPU tensors. NCCL: a gloo side group (no GPU stream sync for a flag or a row
    count). smddp: no side group is allowed, so the default group with tensors on this rank's device.
    """
    global _CONTROL
    dist = _dist()
    if dist is None:
        return None, None
    if _CONTROL is None:
        backend = str(dist.get_backend()).lower()
        if backend == "gloo":
            _CONTROL = (None, torch.device("cpu"))
        elif backend in SINGLE_GROUP_BACKENDS:
            device = (torch.device("cuda", torch.cuda.current_device()) if torch.cuda.is_available()
                      else torch.device("cpu"))
            _CONTROL = (None, device)
        else:
            _CONTROL = (dist.new_group(backend="gloo"), torch.device("cpu"))
    return _CONTROL


def any_rank(flag: bool) -> bool:
    """True on every rank when `flag` is True on at least one rank."""
    dist = _dist()
    if dist is None:
        return bool(flag)
    group, device = _control()
    # a float SUM: the one reduction every backend (SMDDP's AllReduce included) supports
    tensor = torch.tensor([1.0 if flag else 0.0], dtype=torch.float32, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)
    return bool(tensor.item() > 0)


def sum_each(values: list[float]) -> list[float]:
    """Each value summed over every rank (one all-reduce for all; small counts, exact in float32)."""
    dist = _dist()
    if dist is None:
        return [float(v) for v in values]
    group, device = _control()
    tensor = torch.tensor([float(v) for v in values], dtype=torch.float32, device=device)
    dist.all_reduce(tensor, op=dist.ReduceOp.SUM, group=group)  # SUM: supported by every backend (SMDDP too)
    return tensor.tolist()


def any_rank_each(flags: list[bool]) -> list[bool]:
    """For each flag: True on every rank when it is True on at least one rank (one all-reduce for all)."""
    return [v > 0 for v in sum_each([1.0 if f else 0.0 for f in flags])]


def all_gather_objects(obj) -> list:
    """Every rank's `obj`, in rank order (pickled; torch sends them as tensors on the group's device)."""
    dist = _dist()
    if dist is None:
        return [obj]
    group, _device = _control()
    out = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj, group=group)
    return out
