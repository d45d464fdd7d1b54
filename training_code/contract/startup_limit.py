"""The start-up stall limit (`stall.startup_minutes`, the `stall_startup_minutes` hyperparameter): how long one
start-up phase (imports, data load, model load, tokenization, rendezvous, checkpoint restore), an evaluation or a
save before its first measurement may go without a phase change.

`auto` (the default) derives it from what this run measured: FACTOR x the longest start-up an attempt of the run
took (train.py's first line to its first optimizer step, `startup_seconds` in `_progress.json`, contract/
run_history.py), at least FLOOR_MINUTES; before any attempt measured one, PRIOR_MINUTES. A number is used as given.

Why these figures: a phase is at most the whole start-up, so 3 x the longest whole start-up is a wide margin
that still ends a hung 20-minute cold start within an hour instead of the 60 minutes the fixed default allowed
from the first second; the 10-minute floor keeps a fast local start (tens of seconds) from turning a busy shared
file system into a false stall. The prior (30 min per phase) is a guess, not a measurement: it covers a cold load
of a multi-GB model from S3 and a first tokenization of a large dataset; set a number in the spec when a phase of
your first attempt may take longer.

Producer of the measurement: global rank 0's run history (hftrain/checkpoint/history.py). Readers: the job's
stall watchdog and train.py's import watch (hftrain/stall/), the outside watch (lambda/watch/stalls.py) and
`runctl plan`, which states the rule. Standard library only (train.py's import watch runs it first thing).
"""

from __future__ import annotations

import json
import os
from typing import Any

FACTOR = 3.0
FLOOR_MINUTES = 10.0
PRIOR_MINUTES = 30.0
PROGRESS_KEY = "startup_seconds"  # in _progress.json: the run's measured start-ups, newest last
KEEP = 20
AUTO = "auto"


def parse(value: Any) -> float | None:
    """Minutes from the spec's or the hyperparameter's value; None for `auto` (and an unset value). ValueError
    for anything else that is not a number > 0."""
    if value is None or (isinstance(value, str) and value.strip().strip('"').lower() in (AUTO, "")):
        return None
    if isinstance(value, bool):
        raise ValueError(f"stall_startup_minutes: expected 'auto' or minutes > 0, got {value!r}")
    try:
        minutes = float(str(value).strip().strip('"'))
    except ValueError:
        raise ValueError(f"stall_startup_minutes: expected 'auto' or minutes > 0, got {value!r}") from None
    if not minutes > 0 or minutes != minutes or minutes == float("inf"):
        raise ValueError(f"stall_startup_minutes: expected 'auto' or minutes > 0, got {value!r}")
    return minutes


def measured(progress: dict[str, Any] | None) -> float | None:
    """The longest start-up (seconds) this run's attempts measured, from `_progress.json`'s record; None when
    none did (a first attempt, or a record without it)."""
    values = (progress or {}).get(PROGRESS_KEY)
    if not isinstance(values, list):
        return None
    found = [float(v) for v in values if isinstance(v, int | float) and not isinstance(v, bool) and 0 < v < 1e7]
    return max(found) if found else None


def read_measured(checkpoint_dir: str | None) -> float | None:
    """`measured` of the progress file in a local checkpoint folder (restored before train.py starts)."""
    if not checkpoint_dir:
        return None
    try:
        with open(os.path.join(checkpoint_dir, "_progress.json"), encoding="utf-8") as handle:
            text = handle.read(1024 * 1024)
        record = json.loads(text)
    except (OSError, ValueError):
        return None
    return measured(record if isinstance(record, dict) else None)


def seconds(minutes: float | None, measured_seconds: float | None) -> float:
    """The limit in seconds: `minutes` when set, else the auto rule."""
    if minutes is not None:
        return minutes * 60
    if measured_seconds is None:
        return PRIOR_MINUTES * 60
    return max(FLOOR_MINUTES * 60, FACTOR * measured_seconds)


def describe(minutes: float | None, measured_seconds: float | None) -> str:
    """The limit as a failure reason or `runctl plan` names it."""
    if minutes is not None:
        return f"stall.startup_minutes={minutes:g}"
    if measured_seconds is None:
        return (f"stall.startup_minutes=auto: {PRIOR_MINUTES:g} min (the prior: no start-up of this run measured "
                "yet)")
    return (f"stall.startup_minutes=auto: max({FLOOR_MINUTES:g} min, {FACTOR:g} x the longest start-up this run "
            f"measured, {measured_seconds:.0f} s) = {seconds(None, measured_seconds) / 60:.1f} min")


def rule() -> str:
    """The auto rule in words (`runctl plan`, the docs)."""
    return (f"{FACTOR:g} x the longest start-up the run measured, at least {FLOOR_MINUTES:g} min "
            f"({PRIOR_MINUTES:g} min before the first measurement)")
