"""Which generation of training processes this is: 0 for the job's first, n after the n-th recovery in place.

The per-rank supervisor (supervisor.py) sets it in each worker it forks. Everything that meets its peers through
torchrun's store keys its entries by generation (the process group's rendezvous, the stall board): an earlier
generation's keys (its process group's addresses, a stall flag) must not be read by the next one. Standard library
only: the stall watchdog reads it.
"""

from __future__ import annotations

import mmap
import os
import struct

ENV = "HFTRAIN_GENERATION"
STARTED_ENV = "HFTRAIN_SCRIPT_STARTED_AT"  # the supervisor's process start, for the first generation's clock


def current() -> int:
    try:
        return max(0, int(os.environ.get(ENV, "0") or 0))
    except ValueError:
        return 0


def script_started_at() -> float | None:
    try:
        value = float(os.environ.get(STARTED_ENV, ""))
    except ValueError:
        return None
    return value if value > 0 else None


def rendezvous_prefix(generation: int) -> str:
    """The store prefix of generation `generation`'s default process group (none for the first)."""
    return f"hftrain-generation-{generation}/" if generation else ""


def use_own_rendezvous(generation: int) -> None:
    """This process's `init_process_group` (env://, called by the Trainer's arguments through accelerate) keeps its
    keys under the generation's prefix in torchrun's agent store.

    torchrun's env:// rendezvous reuses the agent's TCPStore with no prefix per worker start (torch 2.13,
    torch/distributed/rendezvous.py `_create_c10d_store`: "We create a new TCPStore for every retry so no need to add
    prefix"): torchrun itself restarts workers with a new store, but a worker restarted by our supervisor meets the
    same store, where the previous generation's process group left its keys. Wrapping the store the rendezvous
    returns keeps backend, timeout and every other argument exactly as the Trainer chooses them."""
    if not generation:
        return
    import importlib

    import torch.distributed as dist

    rendezvous = importlib.import_module("torch.distributed.rendezvous")  # the module (the package exports a function)

    original = rendezvous._create_c10d_store
    prefix = rendezvous_prefix(generation)

    def prefixed(*args, **kwargs):
        return dist.PrefixStore(prefix, original(*args, **kwargs))

    rendezvous._create_c10d_store = prefixed


# The last step this worker completed, in a page shared with its supervisor (created before the fork): what the
# supervisor names when the worker dies without a word (SIGKILL).
_PROGRESS: mmap.mmap | None = None


def share_progress() -> None:
    """The supervisor, before each fork: a fresh shared page ("no step yet")."""
    global _PROGRESS
    if _PROGRESS is None:
        _PROGRESS = mmap.mmap(-1, 8)
    struct.pack_into("q", _PROGRESS, 0, -1)


def step_done(step: int) -> None:
    if _PROGRESS is not None:
        struct.pack_into("q", _PROGRESS, 0, step)


def last_step() -> int | None:
    if _PROGRESS is None:
        return None
    value = struct.unpack_from("q", _PROGRESS, 0)[0]
    return value if value >= 0 else None
