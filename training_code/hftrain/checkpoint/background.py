"""Checkpoint saves that do not block training: the loop waits only for a snapshot, the files are written behind it.

A save has three phases, and every rank moves through them in lockstep:

1. **snapshot** (blocking, in the training loop): the model's and the optimizer's state are copied off the
   accelerator into host memory (on CPU: cloned, since the next step changes them in place); the small files
   (trainer state, RNG states, scaler) are written at once. This is the `checkpointing` time of the ledger.
2. **write** (a background thread): the Trainer's own writers run on the snapshot (safetensors weights,
   `optimizer.pt`, `scheduler.pt`, config and tokenizer).
3. **mark** (a background thread, each node's local rank 0): when every rank has written its files, the node's
   completion marker is hashed and written (checkpoint/manager.py, `write_node_marker`).

The phases advance at step boundaries through the one small all-reduce the ranks already make there (SigtermCallback:
`votes()` and `settle()`): a phase is over when every rank says its part is done, so no collective ever runs on the
background thread, and all ranks see the same verdict at the same step. Only then does the checkpoint count:
rotation, `_progress.json` and the GOODPUT `checkpoint` record follow `on_complete`, and a resume reads only
checkpoints whose markers verify, so an interruption while a save is in flight resumes from the previous complete
one.

At most one save is in flight: a save that comes due while the previous one is still being written waits for it
(that wait is blocking time, and counted as such). A write that fails (a full volume, a permission) is logged at
once by the rank it failed on, and ends the run at the next step boundary on every rank with that rank's error: a
run never trains on silently unprotected.

FSDP and DeepSpeed save through collectives (sharded state): their saves stay blocking (`eligible`).
"""

from __future__ import annotations

import copy
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

logger = logging.getLogger(__name__)

IDLE, WRITING, MARKING = "idle", "writing", "marking"
# the injected failure of local mode's fault tests: "<step>" makes the background write of that step fail
INJECT_ENV = "HFTRAIN_INJECT_SAVE_ERROR"
# local mode's interruptions during a save: "<seconds>@<step>": each background write of a step >= <step> first
# waits <seconds>, so that an interruption injected when the write begins lands inside it (a tiny model's write
# takes milliseconds); the writes before it are not delayed (a delayed older checkpoint would complete just before
# the loss, too late for the checkpoint sync, and the run would resume from further back than the loss explains)
DELAY_ENV = "HFTRAIN_INJECT_SAVE_DELAY"


class BackgroundSaveError(RuntimeError):
    """A background checkpoint write failed on some rank (the message names it); the run ends."""


# ---------------------------------------------------------------- snapshots


class SnapshotPool:
    """Host buffers for snapshots, kept from save to save: pinned when the state lives on a GPU (a copy into pinned
    memory runs at the bus's speed and asynchronously; into fresh pageable memory it is several times slower and
    page-faults every time), reused because at most one save is in flight (the previous one's files are written
    before the next snapshot overwrites its buffers). Costs one copy of the model and optimizer state in host
    memory for the run's life."""

    def __init__(self) -> None:
        self.buffers: dict[str, torch.Tensor] = {}

    def copy(self, key: str, tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.detach()
        buffer = self.buffers.get(key)
        if buffer is None or buffer.shape != tensor.shape or buffer.dtype != tensor.dtype:
            buffer = torch.empty(tensor.shape, dtype=tensor.dtype, pin_memory=tensor.is_cuda)
            self.buffers[key] = buffer
        buffer.copy_(tensor, non_blocking=tensor.is_cuda)
        return buffer


def snapshot(obj: Any, pool: SnapshotPool | None = None, key: str = "", memo: dict[int, Any] | None = None) -> Any:
    """A copy of a (nested) state dict whose tensors live in host memory and share nothing with the original.

    Tensors that are one object (tied parameters, as a state dict lists them) stay one object in the copy, so
    `save_pretrained` still sees them as tied. Non-tensor leaves are deep-copied (schedulers change the optimizer's
    param groups in place). Returns once every copy off the device is done.
    """
    out = _snapshot(obj, pool or SnapshotPool(), key, {} if memo is None else memo)
    if torch.cuda.is_available():
        torch.cuda.synchronize()  # the copies are done before the next step changes the state
    return out


def _snapshot(obj: Any, pool: SnapshotPool, key: str, memo: dict[int, Any]) -> Any:
    if isinstance(obj, torch.Tensor):
        if id(obj) not in memo:
            memo[id(obj)] = pool.copy(key, obj)
        return memo[id(obj)]
    if isinstance(obj, dict):
        return type(obj)((k, _snapshot(v, pool, f"{key}/{k}", memo)) for k, v in obj.items())
    if isinstance(obj, list | tuple):
        items = [_snapshot(v, pool, f"{key}/{i}", memo) for i, v in enumerate(obj)]
        return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
    return copy.deepcopy(obj)


def state_snapshot(state_dict: dict[str, Any], pool: SnapshotPool | None = None) -> dict[str, Any]:
    """`snapshot` of a model state dict, keeping tied parameters tied (one storage -> one copy)."""
    pool = pool or SnapshotPool()
    first: dict[tuple[int, int, tuple, tuple], torch.Tensor] = {}
    tensors = {}
    for name, tensor in state_dict.items():
        if isinstance(tensor, torch.Tensor):
            view = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape),
                    tuple(tensor.stride()))
            tensors[name] = first.setdefault(view, tensor)
        else:
            tensors[name] = tensor
    return snapshot(tensors, pool, "model")


def model_write(
    trainer: Any, output_dir: str, state_dict: dict | None, save: Callable[..., None]
) -> Callable[[], None]:
    """The Trainer's model write (`save`: its own `_save`) on a snapshot taken now."""
    unwrapped = trainer.accelerator.unwrap_model(trainer.model, keep_torch_compile=False)
    snap = state_snapshot(state_dict if state_dict is not None else unwrapped.state_dict(), trainer._saves.pool)
    os.makedirs(output_dir, exist_ok=True)  # the small files written now go beside it
    return lambda: save(output_dir, state_dict=snap)


def optimizer_writes(trainer: Any, output_dir: str) -> list[Callable[[], None]]:
    """The Trainer's optimizer and scheduler files (unsharded state: one writer, global rank 0) on a snapshot."""
    if not trainer.args.should_save:
        return []
    from transformers.trainer import OPTIMIZER_NAME, SCHEDULER_NAME

    optimizer = snapshot(trainer.optimizer.state_dict(), trainer._saves.pool, "optimizer")
    scheduler = snapshot(trainer.lr_scheduler.state_dict(), trainer._saves.pool, "scheduler")
    return [
        lambda: torch.save(optimizer, os.path.join(output_dir, OPTIMIZER_NAME)),
        lambda: torch.save(scheduler, os.path.join(output_dir, SCHEDULER_NAME)),
    ]


# ---------------------------------------------------------------- the saves


@dataclass
class _Save:
    step: int
    path: str
    writes: list[Callable[[], None]]
    phase: str = WRITING
    started: float = field(default_factory=time.perf_counter)
    thread: threading.Thread | None = None
    error: str = ""  # this rank's failure, "" when none
    report: BaseException | None = None  # the failure to raise as it is (a full volume says so), if any
    done: bool = False  # this rank's part of the current phase is done


class BackgroundSaves:
    """At most one checkpoint being written behind the training loop (see the module docstring)."""

    def __init__(
        self,
        *,
        mark: Callable[[int, str], None],
        on_complete: Callable[[int, float], None],
        node_leader: bool,
        agree: Callable[[list[float]], list[float]],
        describe: Callable[[BaseException, int], BaseException | None] | None = None,
        inject_failure_at: int | None = None,
        inject_delay: tuple[float, int] = (0.0, 0),
        inject_hang: Callable[[int], None] | None = None,
        on_wait: Callable[[int], None] | None = None,
    ) -> None:
        self.mark = mark  # (step, path): the node's marker (called on the node's local rank 0 only)
        self.on_complete = on_complete  # (step, seconds since the snapshot): every rank, in lockstep
        self.node_leader = node_leader
        self.agree = agree  # the element-wise SUM over all ranks (parallel/process_group.py, sum_each)
        self.inject_failure_at = inject_failure_at
        self.inject_delay = inject_delay  # (seconds, from step): see DELAY_ENV
        self.inject_hang = inject_hang  # (step): local mode's injected hang inside a write (stall/injection.py)
        self.on_wait = on_wait  # (step): the loop begins to wait for the save in flight (the stall watchdog's phase)
        # (error, step) -> the error to raise as it is on every rank (checkpoint/volume.py's full volume), or None
        self.describe = describe or (lambda err, step: None)
        self.current: _Save | None = None
        self.pool = SnapshotPool()  # host buffers reused by every snapshot (one save in flight at most)
        self.completed: list[int] = []
        self.waited_seconds = 0.0  # blocking time spent waiting for a previous save (part of the save's own)

    @property
    def in_flight(self) -> int | None:
        return self.current.step if self.current is not None else None

    # --- the training loop's side ---------------------------------------------------------------------------
    def submit(self, step: int, path: str, writes: list[Callable[[], None]]) -> None:
        """Start writing checkpoint `step` behind the loop (call after `wait_for_room`)."""
        if self.current is not None:
            raise RuntimeError(f"checkpoint {self.current.step} is still in flight")
        self.current = _Save(step, path, writes)
        self._start(self._write)

    def wait_for_room(self) -> None:
        """Block until no save is in flight (every rank calls it at the same step: it settles in lockstep)."""
        started = time.perf_counter()
        if self.current is not None and self.on_wait is not None:
            self.on_wait(self.current.step)
        while self.current is not None:
            self._join()
            self.settle(self.agree(self.votes()))
        self.waited_seconds += time.perf_counter() - started

    def drain(self) -> None:
        """Training is over: finish the save in flight (the last checkpoint must be complete before the job
        ends: a SIGTERM's emergency save above all)."""
        self.wait_for_room()

    def votes(self) -> list[float]:
        """This rank's [part done, part failed] for the save in flight (zeros when none)."""
        save = self.current
        if save is None:
            return [0.0, 0.0]
        if save.thread is not None and not save.thread.is_alive():
            save.done = True
        return [1.0 if save.done and not save.error else 0.0, 1.0 if save.error else 0.0]

    def settle(self, sums: list[float], world_size: int | None = None) -> None:
        """Act on the SUM of every rank's `votes()`: fail, move to the next phase, or complete."""
        save = self.current
        if save is None:
            return
        done, failed = sums[0], sums[1]
        world = world_size if world_size is not None else self._world()
        if failed > 0:
            self._fail(save)
        if done < world:
            return
        if save.phase == WRITING:
            save.phase, save.done = MARKING, False
            self._start(self._mark)
            return
        seconds = time.perf_counter() - save.started
        self.current = None
        self.completed.append(save.step)
        self.on_complete(save.step, seconds)

    # --- the thread's side -------------------------------------------------------------------------------
    def _start(self, work: Callable[[_Save], None]) -> None:
        save = self.current
        assert save is not None
        save.thread = threading.Thread(
            target=self._guarded, args=(work, save), daemon=True, name=f"save-{save.step}-{save.phase}"
        )
        save.thread.start()

    def _guarded(self, work: Callable[[_Save], None], save: _Save) -> None:
        try:
            work(save)
        except BaseException as err:  # noqa: BLE001 - reported to every rank at the next step boundary
            save.error = f"{type(err).__name__}: {err}"
            try:
                save.report = self.describe(err, save.step)
            except Exception:  # noqa: BLE001 - the plain error still ends the run
                save.report = None
            logger.error(
                "background save of checkpoint %d failed in its %s phase: %s (the run ends at the next step)",
                save.step,
                save.phase,
                save.error,
            )

    def _write(self, save: _Save) -> None:
        if self.inject_hang is not None:
            self.inject_hang(save.step)
        seconds, from_step = self.inject_delay
        if seconds > 0 and save.step >= from_step:
            time.sleep(seconds)
        if self.inject_failure_at is not None and save.step >= self.inject_failure_at:
            raise OSError(28, f"No space left on device (injected by {INJECT_ENV})")
        for write in save.writes:
            write()
        save.writes = []  # the snapshot's memory is released once its files are written

    def _mark(self, save: _Save) -> None:
        if self.node_leader:
            self.mark(save.step, save.path)

    def _join(self) -> None:
        save = self.current
        if save is not None and save.thread is not None:
            save.thread.join()

    def _fail(self, save: _Save) -> None:
        from hftrain.parallel import process_group as distributed

        self._join()
        host = os.environ.get("SM_CURRENT_HOST") or "algo-1"
        errors = distributed.all_gather_objects((save.error, save.report, host))
        rank, (text, report, where) = next(((r, e) for r, e in enumerate(errors) if e[0]),
                                           (None, ("unknown error", None, "?")))
        self.current = None
        if report is not None:  # every rank raises the failing rank's own account: the same text in every failure file
            raise _naming(report, f"(the background write of checkpoint {save.step} on rank {rank}, {where})")
        raise BackgroundSaveError(
            f"the background write of checkpoint {save.step} ({save.path}) failed on rank {rank} ({where}): {text}; "
            "the run "
            "ends rather than train on without a checkpoint (the previous complete checkpoint is kept and is "
            "where the next attempt resumes)"
        )

    @staticmethod
    def _world() -> int:
        from hftrain.parallel import process_group as distributed

        return distributed.world_size()


def _naming(report: BaseException, where: str) -> BaseException:
    """`report` with where it happened appended (the failure file names the process that raised it, which may be
    another rank)."""
    try:
        return type(report)(f"{report} {where}")
    except TypeError:  # an exception type that takes other arguments: as it is
        return report


def injected_failure_step(value: str | None, rank: int) -> int | None:
    """`HFTRAIN_INJECT_SAVE_ERROR`: "<step>" (every rank) or "<step>@<rank>": the first step whose background write
    fails on this rank (local mode's fault tests); None when unset or for another rank."""
    if not value:
        return None
    step, _, only = value.partition("@")
    if only and int(only) != rank:
        return None
    return int(step)


def injected_delay(value: str | None) -> tuple[float, int]:
    """`HFTRAIN_INJECT_SAVE_DELAY`: "<seconds>@<step>" (or "<seconds>": every write) -> (seconds, first step)."""
    if not value:
        return 0.0, 0
    seconds, _, step = value.partition("@")
    return float(seconds), int(step or 0)


def eligible(trainer: Any) -> tuple[bool, str]:
    """(whether this Trainer's saves can be written in the background, why not)."""
    if getattr(trainer, "is_fsdp_enabled", False):
        return False, "FSDP saves sharded state through collectives"
    if getattr(trainer, "is_deepspeed_enabled", False):
        return False, "DeepSpeed saves through its own engine"
    if getattr(trainer.args, "push_to_hub", False):
        return False, "push_to_hub uploads each checkpoint as it is saved"
    if getattr(trainer.args, "load_best_model_at_end", False):
        # the Trainer loads the best checkpoint inside train(), before the run could wait for the last save
        return False, "load_best_model_at_end loads the best checkpoint as soon as training ends"
    return True, ""
