"""Trainer callbacks: log lines for the pipeline, SIGTERM handling, checkpoint markers and rotation, epochs."""

from __future__ import annotations

import logging
import math
import os
import signal
import sys
import time

from transformers import TrainerCallback

from . import checkpoints, distributed

logger = logging.getLogger(__name__)


def format_metric(value: float) -> str:
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(float(value))


def emit_metrics(metrics: dict, stream=None) -> None:
    """`METRIC <name>=<float>` one a line (numbers only), as the pipeline's metric definitions expect."""
    stream = stream or sys.stdout
    for name, value in metrics.items():
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        stream.write(f"METRIC {name}={format_metric(float(value))}\n")
    stream.flush()


class LogLinesCallback(TrainerCallback):
    """PROGRESS at every optimizer step and METRIC for every logged number (global rank 0 only)."""

    def __init__(self, stream=None) -> None:
        self.stream = stream
        self.last_logs: dict = {}

    def on_step_end(self, args, state, control, **kwargs):
        if state.is_world_process_zero:
            stream = self.stream or sys.stdout
            stream.write(f"PROGRESS global_step={state.global_step} max_steps={state.max_steps}\n")
            stream.flush()

    def on_log(self, args, state, control, logs=None, **kwargs):
        if state.is_world_process_zero and logs:
            self.last_logs.update(logs)
            emit_metrics(logs, self.stream)


class SigtermCallback(TrainerCallback):
    """SIGTERM (spot interruption, StopTrainingJob) -> checkpoint at the next optimizer step, then stop.

    The signal only sets a flag; at each step end the ranks agree (an all-reduce of one number, see
    distributed.any_rank) so that all of them stop at the same step and save the same checkpoint together.
    """

    def __init__(self) -> None:
        self.requested = False
        self.requested_at: float | None = None
        self.stopped = False
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

    def on_step_end(self, args, state, control, **kwargs):
        if distributed.any_rank(self.requested):
            self.requested = True
            self.stopped = True
            control.should_save = True
            control.should_evaluate = False
            control.should_training_stop = True
        return control


class CheckpointCallback(TrainerCallback):
    """Completion markers, stale-directory cleanup and safe rotation around the Trainer's own saving."""

    def __init__(
        self,
        *,
        root: str,
        host: str,
        hosts: list[str],
        keep: int | None,
        resumed_step: int | None,
        known_complete: list[int],
        storage: checkpoints.LocalStorage | None = None,
    ) -> None:
        self.root = root
        self.host = host
        self.hosts = hosts
        self.keep = keep
        self.protected = {resumed_step} if resumed_step is not None else set()
        self.known_complete = sorted(set(known_complete))
        self.storage = storage or checkpoints.LocalStorage()
        self.saved: list[int] = []

    def _node_leader(self) -> bool:
        return distributed.local_rank() == 0

    def on_step_end(self, args, state, control, **kwargs):
        # Runs after the flow callback and SIGTERM callback decided whether to save at this step.
        if control.should_save:
            target = os.path.join(self.root, f"{checkpoints.PREFIX}{state.global_step}")
            if self._node_leader() and self.storage.exists(target):
                logger.warning("removing stale checkpoint directory %s before saving the same step", target)
                self.storage.remove_tree(target)
            distributed.barrier()
        return control

    def on_epoch_end(self, args, state, control, **kwargs):  # save_strategy "epoch" decides here
        return self.on_step_end(args, state, control, **kwargs)

    def on_save(self, args, state, control, **kwargs):
        step = state.global_step
        path = os.path.join(self.root, f"{checkpoints.PREFIX}{step}")
        distributed.barrier()  # every rank has finished writing its files
        if self._node_leader():
            checkpoints.write_node_marker(
                path, host=self.host, hosts=self.hosts, step=step, world_size=distributed.world_size(),
                storage=self.storage,
            )
        distributed.barrier()  # every node's marker is written: the checkpoint is complete
        self.known_complete = sorted(set(self.known_complete) | {step})
        self.saved.append(step)
        if state.is_world_process_zero:
            logger.info("checkpoint %s complete", path)
        if self._node_leader():
            on_disk = [s for s in (checkpoints.step_of(n) for n in self.storage.list_dirs(self.root)) if s is not None]
            for victim in checkpoints.rotation_victims(on_disk, self.known_complete, keep=self.keep,
                                                       protected=self.protected):
                victim_path = os.path.join(self.root, f"{checkpoints.PREFIX}{victim}")
                logger.info("rotating out %s", victim_path)
                self.storage.remove_tree(victim_path)
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
