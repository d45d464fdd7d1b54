"""The checkpoint interval's bounds: `save_interval auto` chooses within them, the durability watchdog measures an
auto interval against the upper one.

Producers of the interval: the training code (hftrain/checkpoint/interval.py clamps sqrt(2CM) to the bounds). Its
consumers: the pipeline (lambda/plan/checkpoint_interval.py: the watchdog's interval for `every_minutes: "auto"`;
lambda/plan/runtime_limits.py: the first save of an auto run; the run spec's documentation, lambda/spec/run_spec.py).
"""

from __future__ import annotations

CHECKPOINT_MIN_MINUTES = 5
CHECKPOINT_MAX_MINUTES = 60


def clamp_checkpoint_minutes(minutes: float) -> float:
    """`minutes` within [CHECKPOINT_MIN_MINUTES, CHECKPOINT_MAX_MINUTES], as a float."""
    return min(float(CHECKPOINT_MAX_MINUTES), max(float(CHECKPOINT_MIN_MINUTES), minutes))


def describe_checkpoint_bounds() -> str:
    """'[5, 60]', for messages and documentation."""
    return f"[{CHECKPOINT_MIN_MINUTES:g}, {CHECKPOINT_MAX_MINUTES:g}]"
