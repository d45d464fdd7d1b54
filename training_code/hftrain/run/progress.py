"""One human-readable line per logging window, on global rank 0's stdout (CloudWatch on SageMaker, the local
run's console locally); the lines' format is contract/progress_lines.py:

    [train] step 40/300 (13%) loss=1.2345 lr=2.90e-03 samples/s=52.3 elapsed=0:00:12 eta=0:01:18
    [eval] step 40/300 eval_loss=1.1020 eval_f1=41.2

samples/s and the ETA are measured over the window since the previous line (the first window starts when
training starts, after a resume too), so they follow the current speed; samples are optimizer steps x the
global batch (per-device batch x world size x gradient accumulation). The pipeline's metric definitions read
`samples/s=` from these lines (metric `samples_per_second`); loss and learning rate also come as METRIC lines.
"""

from __future__ import annotations

import sys
import time

from transformers import TrainerCallback

from contract.progress_lines import eval_line, train_line
from contract.progress_lines import setup_line as _setup_line


def setup_line(text: str, stream=None) -> None:
    """One line per start-up phase (data loaded, model loaded, tokenized, checkpoint restored), so the minutes
    before the first step are not silent; global rank 0 calls it."""
    stream = stream or sys.stdout
    stream.write(_setup_line(text) + "\n")
    stream.flush()


class ProgressLineCallback(TrainerCallback):
    """Prints the [train] line at every training log and an [eval] line at every evaluation (rank 0)."""

    def __init__(self, stream=None, now=time.monotonic) -> None:
        self.stream = stream
        self.now = now
        self._started: float | None = None
        self._window_start: tuple[int, float] | None = None

    def _write(self, line: str) -> None:
        stream = self.stream or sys.stdout
        stream.write(line + "\n")
        stream.flush()

    @staticmethod
    def samples_per_step(args) -> int:
        return max(1, args.per_device_train_batch_size * max(1, args.world_size) * args.gradient_accumulation_steps)

    def on_train_begin(self, args, state, control, **kwargs):
        moment = self.now()
        self._started = moment
        self._window_start = (state.global_step, moment)
        return control

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return control
        if any(k.startswith("eval_") for k in logs):
            self._write(eval_line(step=state.global_step, max_steps=state.max_steps, metrics=logs))
            return control
        if "loss" not in logs or self._window_start is None:
            return control
        moment = self.now()
        first_step, first_time = self._window_start
        steps = state.global_step - first_step
        seconds = moment - first_time
        per_step = seconds / steps if steps > 0 else float("nan")
        rate = self.samples_per_step(args) / per_step if steps > 0 and per_step > 0 else 0.0
        remaining = max(0, (state.max_steps or 0) - state.global_step)
        self._write(train_line(step=state.global_step, max_steps=state.max_steps, loss=logs.get("loss"),
                               lr=logs.get("learning_rate"), samples_per_second=rate,
                               elapsed=moment - (self._started or moment), eta=remaining * per_step,
                               straggler=_straggler()))
        self._window_start = (state.global_step, moment)
        return control


def _straggler() -> str | None:
    """The slowest rank the stall watchdog of this process (global rank 0) named over its last window."""
    from hftrain.stall import stragglers
    from hftrain.stall.watchdog import CURRENT

    found = CURRENT[-1].stragglers if CURRENT else []
    return stragglers.short(found[0]) if found else None
