"""One human-readable line per logging window, on global rank 0's stdout (CloudWatch on SageMaker, the local
run's console locally):

    [train] step 40/300 (13%) loss=1.2345 lr=2.90e-03 samples/s=52.3 elapsed=0:00:12 eta=0:01:18
    [eval] step 40/300 eval_loss=1.1020 eval_f1=41.2

samples/s and the ETA are measured over the window since the previous line (the first window starts when
training starts, after a resume too), so they follow the current speed; samples are optimizer steps x the
global batch (per-device batch x world size x gradient accumulation). The pipeline's metric definitions read
`samples/s=` from these lines (metric `samples_per_second`); loss and learning rate also come as METRIC lines.
"""

from __future__ import annotations

import math
import sys
import time

from transformers import TrainerCallback

TRAIN_PREFIX, EVAL_PREFIX, SETUP_PREFIX = "[train]", "[eval]", "[setup]"


def clock(seconds: float) -> str:
    """0:01:18; unknown or absurd durations as '?'."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0 or seconds > 1e8:
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _number(value: float, digits: int = 4) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return f"{value:.{digits}f}"


def setup_line(text: str, stream=None) -> None:
    """One line per start-up phase (data loaded, model loaded, tokenized, checkpoint restored), so the minutes
    before the first step are not silent; global rank 0 calls it."""
    stream = stream or sys.stdout
    stream.write(f"{SETUP_PREFIX} {text}\n")
    stream.flush()


def train_line(*, step: int, max_steps: int, loss: float | None, lr: float | None, samples_per_second: float,
               elapsed: float, eta: float) -> str:
    share = f" ({100 * step / max_steps:.0f}%)" if max_steps else ""
    parts = [f"{TRAIN_PREFIX} step {step}/{max_steps or '?'}{share}"]
    if loss is not None:
        parts.append(f"loss={_number(loss)}")
    if lr is not None:
        parts.append(f"lr={lr:.2e}" if isinstance(lr, int | float) and math.isfinite(lr) else f"lr={lr}")
    parts += [f"samples/s={samples_per_second:.1f}", f"elapsed={clock(elapsed)}", f"eta={clock(eta)}"]
    return " ".join(parts)


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
            shown = " ".join(f"{k}={_number(v)}" for k, v in logs.items()
                             if k.startswith("eval_") and isinstance(v, int | float) and not isinstance(v, bool)
                             and not k.endswith(("_runtime", "_per_second")))
            self._write(f"{EVAL_PREFIX} step {state.global_step}/{state.max_steps or '?'} {shown}".rstrip())
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
                               elapsed=moment - (self._started or moment), eta=remaining * per_step))
        self._window_start = (state.global_step, moment)
        return control
