"""Did the model learn? Its headline metric per judged example against the strongest trivial baseline and against the
same model before its first step, with the evaluation set's noise: a paired bootstrap over the examples.

The numbers go out as METRIC lines (`verdict_*`, names in contract/verdict_metrics.py) and the pipeline's Finish
step turns them into the verdict (lambda/runs/verdict.py): "learned" only when the 95% interval of both gains lies
above zero. Pure (numpy only).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from contract import verdict_metrics as names

RESAMPLES = 1000
LEVEL = 0.95
SEED = 0  # the same data gives the same interval


def gain_interval(model: Sequence[float], other: Sequence[float], *, resamples: int = RESAMPLES,
                  seed: int = SEED, level: float = LEVEL) -> tuple[float, float]:
    """The `level` percentile interval of mean(model - other) over `resamples` bootstrap resamples of the examples
    (paired: one draw of examples for both)."""
    diff = np.asarray(model, dtype=np.float64) - np.asarray(other, dtype=np.float64)
    if diff.size == 0:
        raise ValueError("no judged examples")
    rng = np.random.default_rng(seed)
    means = diff[rng.integers(0, diff.size, size=(resamples, diff.size))].mean(axis=1)
    tail = (1.0 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def judgement_metrics(*, model: Sequence[float], baseline: Sequence[float], baseline_index: int,
                      pretrained: Sequence[float], steps: int, loss_change: float) -> dict[str, float]:
    """The `verdict_*` metrics: means of the three score lists (one per judged example, same order), the gains'
    intervals, the strongest baseline's index among the task's candidates, the number of examples and steps, and
    how much training changed the evaluation loss on them."""
    if not len(model) == len(baseline) == len(pretrained):
        raise ValueError(f"judged scores differ in length: model {len(model)}, baseline {len(baseline)}, "
                         f"pretrained {len(pretrained)}")
    over_baseline = gain_interval(model, baseline)
    over_pretrained = gain_interval(model, pretrained)
    return {
        names.EXAMPLES: float(len(model)),
        names.STEPS: float(steps),
        names.MODEL: float(np.mean(model)),
        names.BASELINE: float(np.mean(baseline)),
        names.BASELINE_INDEX: float(baseline_index),
        names.PRETRAINED: float(np.mean(pretrained)),
        names.LOSS_CHANGE: float(loss_change),
        names.GAIN_BASELINE_LOW: over_baseline[0],
        names.GAIN_BASELINE_HIGH: over_baseline[1],
        names.GAIN_PRETRAINED_LOW: over_pretrained[0],
        names.GAIN_PRETRAINED_HIGH: over_pretrained[1],
    }
