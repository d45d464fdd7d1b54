"""A TrainerCallback that logs the run to MLflow (global rank 0 only), through the background worker.

Params: the job's hyperparameters as the pipeline resolved and sent them (SM_HPS, the sagemaker_* reserved ones
left out). Metrics, against the global step: what the Trainer logs (loss, learning rate, grad norm, epoch, eval
metrics, the train_* totals at the end), plus the mean optimizer step time and samples per second since the
previous log. Tags: this attempt's job, instance type, host count and resumed step. The Trainer's own MLflow
integration (`report_to: mlflow`) is not used: it would log replayed steps of a resumed attempt again.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Mapping
from typing import Any

from transformers import TrainerCallback

from contract import tracking
from hftrain.tracking.worker import TrackingWorker, take_early

logger = logging.getLogger(__name__)

CLOSE_WAIT_SECONDS = 15.0  # at the end: what is queued gets this long, then the run's outputs go on


def job_params(environ: Mapping[str, str]) -> dict[str, Any]:
    """The hyperparameters the job was started with (SM_HPS), without the SageMaker-reserved ones."""
    try:
        values = json.loads(environ.get("SM_HPS") or "{}")
    except ValueError:
        return {}
    return {k: v for k, v in values.items() if not k.startswith("sagemaker_")} if isinstance(values, dict) else {}


class MlflowTrackingCallback(TrainerCallback):
    def __init__(self, worker: TrackingWorker, *, job: str, world_size: int, hosts: int,
                 resumed_step: int | None = None, environ: Mapping[str, str] | None = None,
                 clock=time.monotonic) -> None:
        self.worker, self.job, self.world_size = worker, job, world_size
        self.hosts, self.resumed_step = hosts, resumed_step
        self.environ = os.environ if environ is None else environ
        self.clock = clock
        self._step_started: float | None = None
        self._step_seconds: list[float] = []
        self._started = self._tagged = self._closed = False

    @classmethod
    def from_environ(cls, **kwargs: Any) -> MlflowTrackingCallback | None:
        """The callback when the job's environment turns tracking on (contract/tracking.py), else None."""
        if not tracking.enabled(os.environ):
            return None
        return cls(take_early() or TrackingWorker(os.environ), **kwargs)

    def begin(self) -> None:
        """Start the worker at the job's start: mlflow's import, the run's lookup and its metric history happen on
        its thread while the data and the model load, so that the first steps' points leave promptly."""
        if not self._started:
            self._started = True
            self.worker.start()
            self.worker.log_params(job_params(self.environ), self.job)

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero or self._tagged:
            return  # a Trainer built again (a checkpoint that failed to load) continues the same worker
        self._tagged = True
        self.begin()
        self.worker.set_tags({tracking.attempt_tag(self.job, "instance_type"):
                              self.environ.get("SM_CURRENT_INSTANCE_TYPE", "local"),
                              tracking.attempt_tag(self.job, "hosts"): self.hosts,
                              tracking.attempt_tag(self.job, "world_size"): self.world_size,
                              tracking.attempt_tag(self.job, "resumed_step"): self.resumed_step or 0,
                              "last_attempt": self.job})
        self.samples_per_step = args.per_device_train_batch_size * args.gradient_accumulation_steps * self.world_size

    def on_step_begin(self, args, state, control, **kwargs):
        self._step_started = self.clock()

    def on_step_end(self, args, state, control, **kwargs):
        if self._step_started is not None:
            self._step_seconds.append(self.clock() - self._step_started)
            self._step_started = None

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        metrics = {k: float(v) for k, v in logs.items()
                   if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)}
        if self._step_seconds:
            mean = sum(self._step_seconds) / len(self._step_seconds)
            metrics["step_seconds"] = mean
            if mean > 0:
                metrics["samples_per_second"] = self.samples_per_step / mean
            self._step_seconds.clear()
        if metrics:
            self.worker.log_metrics(metrics, state.global_step)

    def close(self) -> None:
        """Bounded wait for what is queued: the runner calls it after the final evaluation, and when it fails."""
        if self._started and not self._closed:
            self._closed = True
            self.worker.close(CLOSE_WAIT_SECONDS)
