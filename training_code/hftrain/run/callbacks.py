"""Trainer callbacks: log lines for the pipeline, SIGTERM handling, checkpoint markers and rotation, epochs."""

from __future__ import annotations

import logging
import math
import os
import signal
import sys
import time

from transformers import TrainerCallback

from contract import progress_lines
from contract.checkpoint_marker import checkpoint_name
from hftrain.checkpoint import history as run_history
from hftrain.checkpoint import manager as checkpoints
from hftrain.checkpoint.background import BackgroundSaves
from hftrain.checkpoint.storage import LocalStorage
from hftrain.parallel import process_group as distributed

logger = logging.getLogger(__name__)


def emit_metrics(metrics: dict, stream=None) -> None:
    """A METRIC line per number (contract/progress_lines.py), as the pipeline's metric definitions expect."""
    stream = stream or sys.stdout
    for line in progress_lines.metric_lines(metrics):
        stream.write(line + "\n")
    stream.flush()


class LogLinesCallback(TrainerCallback):
    """PROGRESS at every optimizer step and METRIC for every logged number (global rank 0 only)."""

    def __init__(self, stream=None) -> None:
        self.stream = stream
        self.last_logs: dict = {}

    def on_step_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            stream = self.stream or sys.stdout
            stream.write(progress_lines.progress_line(state.global_step, state.max_steps) + "\n")
            stream.flush()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs:
            self.last_logs.update(logs)
            emit_metrics(logs, self.stream)


class SigtermCallback(TrainerCallback):
    """SIGTERM (spot interruption, StopTrainingJob) -> checkpoint at the next optimizer step, then stop; and
    a checkpoint at least every `save_every_seconds` (whichever of steps and time comes first).

    The signal only sets a flag; at each step end the ranks agree (one all-reduce of two flags, see
    distributed.sum_each) so that all of them stop or save at the same step and save the same checkpoint
    together. The same all-reduce carries the background save's votes (checkpoint/background.py).
    """

    def __init__(self, save_every_seconds: float | None = None, clock=time.monotonic) -> None:
        self.requested = False
        self.requested_at: float | None = None
        self.stopped = False
        self.save_every_seconds = save_every_seconds or None
        self.interval = None  # save_interval.AutoInterval: the interval chosen from measurements (auto)
        # checkpoint/background.py: the save being written behind the loop rides on this step's all-reduce
        self.saves: BackgroundSaves | None = None
        self.clock = clock
        self.timed_saves = 0
        self._last_save = clock()
        self._previous = None

    def install(self) -> None:
        self._previous = signal.signal(signal.SIGTERM, self._handle)

    def uninstall(self) -> None:
        if self._previous is not None:
            signal.signal(signal.SIGTERM, self._previous)
            self._previous = None

    def _handle(self, signum, frame) -> None:
        if not self.requested:
            self.requested = True
            self.requested_at = time.time()
            # a plain write: logging from a signal handler can deadlock on the handler's lock
            sys.stderr.write("SIGTERM received: saving a checkpoint at the next step boundary, then exiting\n")
            sys.stderr.flush()

    def on_train_begin(self, args, state, control, **kwargs):
        self._last_save = self.clock()
        return control

    def every_seconds(self) -> float | None:
        return self.interval.seconds() if self.interval is not None else self.save_every_seconds

    def on_step_end(self, args, state, control, **kwargs):
        every = self.every_seconds()
        due = bool(every) and self.clock() - self._last_save >= every
        votes = self.saves.votes() if self.saves is not None else []
        sums = distributed.sum_each([1.0 if self.requested else 0.0, 1.0 if due else 0.0, *votes])
        stop, due = sums[0] > 0, sums[1] > 0
        if self.saves is not None:
            self.saves.settle(sums[2:])  # a phase of the save in flight ends on every rank at once (or it failed)
        if due and not control.should_save:
            self.timed_saves += 1
            control.should_save = True
            if state.is_world_process_zero:
                logger.info("saving a checkpoint at step %d: %.1f minutes since the last one (%s)", state.global_step,
                            (every or 0) / 60, "save_interval auto" if self.interval else "save_every_minutes")
        if stop:
            self.requested = True
            self.stopped = True
            control.should_save = True
            control.should_evaluate = False
            control.should_training_stop = True
        return control

    def on_save(self, args, state, control, **kwargs):
        self._last_save = self.clock()
        return control


class CheckpointCallback(TrainerCallback):
    """Completion markers with content hashes, moving stale directories aside, and safe rotation around the
    Trainer's own saving; global rank 0 also keeps `_progress.json` current (checkpoint/history.py)."""

    def __init__(
        self,
        *,
        root: str,
        host: str,
        hosts: list[str],
        keep: int | None,
        resumed_step: int | None,
        ours: list[int],
        identity: dict,
        lineage: str,
        history: run_history.RunHistory | None = None,
        storage: LocalStorage | None = None,
    ) -> None:
        self.root = root
        self.host = host
        self.hosts = hosts
        self.keep = keep
        self.protected = {resumed_step} if resumed_step is not None else set()
        self.ours = sorted(set(ours))
        self.identity = identity
        self.lineage = lineage
        self.history = history
        self.storage = storage or LocalStorage()
        self.saved: list[int] = []
        self.deleted: list[str] = []
        self.moved: list[tuple[str, str]] = []
        self.saves: BackgroundSaves | None = None  # set when saves are written behind the loop

    def _node_leader(self) -> bool:
        return distributed.local_rank() == 0

    def on_step_end(self, args, state, control, **kwargs):
        # Runs after the flow callback and SigtermCallback decided whether to save at this step.
        if control.should_save:
            name = checkpoint_name(state.global_step)
            target = os.path.join(self.root, name)
            if self._node_leader() and self.storage.exists(target):
                # An earlier attempt's partial or rejected save of this step, or someone's files: the Trainer
                # would write into it and mix the two. Move it aside; never delete what may be someone's work.
                aside = checkpoints.quarantine_name(state.global_step, self.storage.list_dirs(self.root))
                self.storage.rename(target, os.path.join(self.root, aside))
                self.moved.append((name, aside))
                logger.warning("moved %s aside to %s before saving step %d again (it was not a verified "
                               "checkpoint of this run; nothing is deleted)", target, aside, state.global_step)
            distributed.barrier()
        elif self.history is not None and state.is_world_process_zero:
            self.history.beat(state.global_step)
        return control

    def on_epoch_end(self, args, state, control, **kwargs):  # save_strategy "epoch" decides here
        return self.on_step_end(args, state, control, **kwargs)

    def on_save(self, args, state, control, **kwargs):
        step = state.global_step
        if self.saves is not None and self.saves.in_flight == step:
            return control  # written behind the loop: marked and counted when complete (checkpoint/background.py)
        distributed.barrier()  # every rank has finished writing its files
        if self._node_leader():
            self.mark(step, os.path.join(self.root, checkpoint_name(step)))
        distributed.barrier()  # every node's marker is written: the checkpoint is complete
        self.complete(step)
        return control

    def mark(self, step: int, path: str) -> None:
        """The node's completion marker (its local rank 0, once every rank of the node has written its files)."""
        marker = checkpoints.write_node_marker(
            path, host=self.host, hosts=self.hosts, step=step, world_size=distributed.world_size(),
            identity=self.identity, lineage=self.lineage, storage=self.storage,
        )
        if distributed.rank() == 0:
            size = sum(f["size"] for f in marker["files"].values())
            logger.info("checkpoint %s complete: %d file(s), %.1f MB hashed (%s) in %.3f s", path,
                        len(marker["files"]), size / 1e6, marker["hash_algorithm"], marker["hash_seconds"])

    def complete(self, step: int) -> None:
        """Every node marked checkpoint `step` (every rank, at the same step): it counts from now on: the progress
        record, and rotation of the older ones."""
        self.ours = sorted(set(self.ours) | {step})
        self.saved.append(step)
        if self.history is not None and distributed.rank() == 0:
            self.history.beat(step, force=True)
        victims = checkpoints.rotation_victims(self.ours, keep=self.keep, protected=self.protected)
        for victim in victims:
            victim_path = os.path.join(self.root, checkpoint_name(victim))
            if self._node_leader():
                logger.info("deleting %s (rotation: save_total_limit=%s keeps the newest verified checkpoints "
                            "%s of this run)", victim_path, self.keep,
                            ", ".join(str(s) for s in self.ours[-(self.keep or 0):]))
                kept = checkpoints.remove_checkpoint(victim_path, self.storage)  # only what its markers list
                if kept:
                    logger.warning("%s: kept %d file(s) its markers do not list: %s (the checkpoint's own files "
                                   "are deleted; the directory stays for these)", victim_path, len(kept),
                                   ", ".join(kept[:10]) + (" ..." if len(kept) > 10 else ""))
            self.deleted.append(checkpoint_name(victim))
        self.ours = [s for s in self.ours if s not in victims]


class ReleaseStagedCheckpoint(TrainerCallback):
    """After the first optimizer step (every rank has loaded the resumed checkpoint by then), remove its staged
    copy (resume.ResumePlanner.release): links or copies only, made for the load."""

    def __init__(self, release) -> None:
        self.release = release

    def on_step_end(self, args, state, control, **kwargs):
        if self.release is not None:
            release, self.release = self.release, None
            release()
        return control


class EpochCallback(TrainerCallback):
    """Sets the training batch sampler's epoch at each epoch start, also after a mid-epoch resume
    (the Trainer's skip-ahead dataloader does not forward set_epoch)."""

    def __init__(self, sampler, batches_per_epoch: int) -> None:
        self.sampler = sampler
        self.batches_per_epoch = max(1, batches_per_epoch)

    def on_epoch_begin(self, args, state, control, **kwargs):
        steps_per_epoch = max(1, math.ceil(self.batches_per_epoch / args.gradient_accumulation_steps))
        self.sampler.set_epoch(state.global_step // steps_per_epoch)
        return control
