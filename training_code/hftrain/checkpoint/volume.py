"""A save that fails because the instance's volume is full says so: what was needed, what was free, what to raise.

torch's checkpoint writer reports a full disk as `[enforce fail at inline_container.cc:...] . unexpected pos N vs
M` (no errno, the ENOSPC is lost inside its C++ stream); safetensors as `I/O error: No space left on device (os
error 28)`; Python's own writes as `OSError [Errno 28]`. `save_failure` recognises the three, checks the free
space of the volume (a write error on a volume with room is not this), and turns it into `VolumeFullError`: a
user error (exit 2) whose message SageMaker shows as the job's FailureReason (run/failure.py), naming the spec field
that sizes the volume (`compute.volume_size_gb`, each training instance's EBS volume).
"""

from __future__ import annotations

import errno
import math
import os
import shutil
from collections.abc import Callable
from typing import NoReturn

from hftrain.checkpoint import manager as checkpoints
from hftrain.checkpoint.storage import LocalStorage

GB = 1024**3
MB = 1024**2
# How torch's and safetensors' writers word a failed write (their errno does not survive).
_WRITE_FAILURES = ("unexpected pos", "file write failed", "basic_ios::clear", "no space left on device",
                   "os error 28")


class VolumeFullError(RuntimeError):
    """The checkpoint volume filled up during a save (a user error: the spec sizes the volume)."""


def _chain(err: BaseException) -> list[BaseException]:
    seen: list[BaseException] = []
    while err is not None and err not in seen and len(seen) < 20:
        seen.append(err)
        err = err.__cause__ or err.__context__
    return seen


def looks_like_a_failed_write(err: BaseException) -> bool:
    """ENOSPC anywhere in the exception chain, or a writer's wording of a failed write."""
    for item in _chain(err):
        if isinstance(item, OSError) and item.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if any(text in str(item).lower() for text in _WRITE_FAILURES):
            return True
    return False


def disk_usage(path: str) -> tuple[int, int]:
    """(total, free) bytes of the volume holding `path`."""
    usage = shutil.disk_usage(path)
    return usage.total, usage.free


def _size(bytes_: float) -> str:
    return f"{bytes_ / GB:.2f} GB" if bytes_ >= GB else f"{bytes_ / MB:.1f} MB"


def last_checkpoint_bytes(root: str) -> int | None:
    """The size of the newest checkpoint under root that has a marker (what the next save needs, about)."""
    for entry in reversed(checkpoints.discover(root)):
        markers, _ = checkpoints.read_markers(entry.path, LocalStorage())
        sizes = [meta.get("size", 0) for m in markers for meta in m.get("files", {}).values()]
        if sizes:
            return int(sum(sizes))
    return None


def state_bytes(model, optimizer) -> int:
    """Bytes of the model's and the optimizer's tensors: what a checkpoint holds, about."""
    total = sum(t.numel() * t.element_size() for t in model.state_dict().values() if hasattr(t, "numel"))
    if optimizer is not None:
        for state in getattr(optimizer, "state", {}).values():
            total += sum(v.numel() * v.element_size() for v in state.values() if hasattr(v, "numel"))
    return int(total)


def raise_save_failure(err: BaseException, root: str, name: str, estimate: Callable[[], int]) -> NoReturn:
    """In the handler of a failed save of checkpoint `name`: raises the VolumeFullError that says so (from `err`)
    when the volume is full, else `err` as it is."""
    full = save_failure(err, root, name, estimate)
    if full is None:
        raise err
    raise full from err


def save_failure(err: BaseException, root: str, name: str, estimate: Callable[[], int]) -> VolumeFullError | None:
    """A VolumeFullError describing the failed save of checkpoint `name` under `root`, or None when `err` is not
    a full volume (then the caller re-raises it as it is)."""
    if not looks_like_a_failed_write(err):
        return None
    try:
        total, free = disk_usage(root)
    except OSError:
        return None
    target = os.path.join(root, name)
    written = sum(LocalStorage().list_files(target).values()) if os.path.isdir(target) else 0
    needed = last_checkpoint_bytes(root) or estimate()
    if free > max(needed - written, 0) + 16 * MB and not any(
            isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT) for e in _chain(err)):
        return None  # room left and no ENOSPC: another write error
    used_before = max(total - free - written, 0)
    at_least = max(math.ceil((used_before + 2 * needed) / GB), math.ceil(total / GB) + 1)
    return VolumeFullError(
        f"the instance's volume is full: saving {name} needs about {_size(needed)}, and the volume holding "
        f"{root} has {_size(free)} free of {_size(total)} ({_size(written)} of {name} were written before the "
        f"write failed). Raise compute.volume_size_gb in the run spec (the volume is {math.ceil(total / GB)} GB; "
        f"at least {at_least} GB holds this and one more checkpoint), or keep fewer checkpoints "
        f"(hyperparameters.save_total_limit). {name} has no completion marker and will not be resumed.")
