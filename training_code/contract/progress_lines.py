"""The training code's progress and metric log lines, and the MetricDefinitions regexes that read them.

Producer: global rank 0 of a training job (hftrain/run/callbacks.py `LogLinesCallback`: PROGRESS at every optimizer
step and METRIC for every logged number; hftrain/run/goodput.py: the goodput METRIC lines; hftrain/run/progress.py:
the human-readable `[train]`/`[eval]`/`[setup]` window lines). Consumers: SageMaker, through the job's
MetricDefinitions (`metric_definition`, built by lambda/plan/job_requests.py), the goodput ledger
(lambda/goodput/evidence.py: PROGRESS), and the local job runner (local_mode/sagemaker: PROGRESS, the window lines,
and the MetricDefinitions applied as SageMaker applies them).

    PROGRESS global_step=40 max_steps=300
    METRIC eval_loss=1.102
    [train] step 40/300 (13%) loss=1.2345 lr=2.90e-03 samples/s=52.3 elapsed=0:00:12 eta=0:01:18
    [eval] step 40/300 eval_loss=1.1020 eval_f1=41.2
    [setup] model loaded (3.2 s)
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

MAX_LINE_CHARS = 64 * 1024  # longer lines are not ours: the parsers answer None

# --- PROGRESS -------------------------------------------------------------------------------------------------
PROGRESS_PREFIX = "PROGRESS global_step="
_PROGRESS_RE = re.compile(re.escape(PROGRESS_PREFIX) + r"([0-9]+)(?: max_steps=([0-9]+))?")


@dataclass(frozen=True)
class Progress:
    global_step: int
    max_steps: int | None


def progress_line(global_step: int, max_steps: int) -> str:
    return f"{PROGRESS_PREFIX}{global_step} max_steps={max_steps}"


def parse_progress(line: str) -> Progress | None:
    """The step a PROGRESS line reports, wherever it starts in the line (a launcher may prefix it); None for other
    lines and lines over MAX_LINE_CHARS."""
    if len(line) > MAX_LINE_CHARS:
        return None
    match = _PROGRESS_RE.search(line)
    if not match:
        return None
    return Progress(int(match.group(1)), int(match.group(2)) if match.group(2) else None)


def is_progress_line(line: str) -> bool:
    """Whether `line` may be a PROGRESS line (cheap: the prefix is in it), for filters that keep the lines."""
    return PROGRESS_PREFIX in line


# --- METRIC ---------------------------------------------------------------------------------------------------
METRIC_PREFIX = "METRIC "
# what a MetricDefinitions regex captures as the value (SageMaker drops values that are not finite)
METRIC_VALUE_REGEX = "([-+0-9.eE]+|nan|inf)"
_METRIC_RE = re.compile(re.escape(METRIC_PREFIX) + r"([A-Za-z0-9_.:/-]+)=(\S+)")


def format_metric(value: float) -> str:
    """A metric's value as METRIC lines write it: repr of the float, `nan`, `inf` or `-inf`."""
    if math.isnan(value):
        return "nan"
    if math.isinf(value):
        return "inf" if value > 0 else "-inf"
    return repr(float(value))


def metric_line(name: str, value: float) -> str:
    return f"{METRIC_PREFIX}{name}={format_metric(float(value))}"


def metric_lines(metrics: Mapping[str, object]) -> list[str]:
    """One METRIC line per number of `metrics` (bools and non-numbers skipped), in their order."""
    return [metric_line(name, float(value)) for name, value in metrics.items()
            if isinstance(value, int | float) and not isinstance(value, bool)]


def parse_metric(line: str) -> tuple[str, float] | None:
    """(name, value) of a METRIC line; the value may be nan or ±inf (as written). None for other lines, a value that
    is no number, and lines over MAX_LINE_CHARS."""
    if len(line) > MAX_LINE_CHARS:
        return None
    match = _METRIC_RE.search(line)
    if not match:
        return None
    try:
        return match.group(1), float(match.group(2))
    except ValueError:
        return None


def metric_definition(name: str) -> dict[str, str]:
    """The MetricDefinitions entry that reads metric `name` from its METRIC lines."""
    return {"Name": name, "Regex": f"{METRIC_PREFIX}{name}={METRIC_VALUE_REGEX}"}


# --- window lines ---------------------------------------------------------------------------------------------
TRAIN_PREFIX, EVAL_PREFIX, SETUP_PREFIX = "[train]", "[eval]", "[setup]"
WINDOW_PREFIXES = (f"{TRAIN_PREFIX} ", f"{EVAL_PREFIX} ", f"{SETUP_PREFIX} ")
# metrics read from the [train] line by a MetricDefinitions regex (name -> regex)
WINDOW_METRICS = {"samples_per_second": r"\[train\] step .* samples/s=([-+0-9.eE]+)"}


def clock(seconds: float | None) -> str:
    """0:01:18; unknown or absurd durations as '?'."""
    if seconds is None or not math.isfinite(seconds) or seconds < 0 or seconds > 1e8:
        return "?"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def number(value: object, digits: int = 4) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    if not math.isfinite(value):
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return f"{value:.{digits}f}"


def setup_line(text: str) -> str:
    return f"{SETUP_PREFIX} {text}"


def train_line(*, step: int, max_steps: int, loss: float | None, lr: float | None, samples_per_second: float,
               elapsed: float, eta: float, straggler: str | None = None) -> str:
    share = f" ({100 * step / max_steps:.0f}%)" if max_steps else ""
    parts = [f"{TRAIN_PREFIX} step {step}/{max_steps or '?'}{share}"]
    if loss is not None:
        parts.append(f"loss={number(loss)}")
    if lr is not None:
        parts.append(f"lr={lr:.2e}" if isinstance(lr, int | float) and math.isfinite(lr) else f"lr={lr}")
    parts += [f"samples/s={samples_per_second:.1f}", f"elapsed={clock(elapsed)}", f"eta={clock(eta)}"]
    if straggler:  # the slowest straggler of the last window (hftrain/stall/stragglers.py), e.g. "rank 3 (algo-2) +35%"
        parts.append(f"straggler={straggler}")
    return " ".join(parts)


def eval_line(*, step: int, max_steps: int, metrics: Mapping[str, object]) -> str:
    """The [eval] line: every numeric `eval_` metric but runtimes and rates."""
    shown = " ".join(f"{k}={number(v)}" for k, v in metrics.items()
                     if k.startswith("eval_") and isinstance(v, int | float) and not isinstance(v, bool)
                     and not k.endswith(("_runtime", "_per_second")))
    return f"{EVAL_PREFIX} step {step}/{max_steps or '?'} {shown}".rstrip()


def is_window_line(line: str) -> bool:
    return line.startswith(WINDOW_PREFIXES)


_TRAIN_RE = re.compile(re.escape(TRAIN_PREFIX) + r" step ([0-9]+)/(?:[0-9]+|\?)\S*.*? samples/s=([0-9]+(?:\.[0-9]+)?)")


def parse_train_line(line: str) -> tuple[int, float] | None:
    """(step, samples/s) of a [train] window line; None for any other line."""
    if len(line) > MAX_LINE_CHARS:
        return None
    found = _TRAIN_RE.match(line)
    return (int(found.group(1)), float(found.group(2))) if found else None
