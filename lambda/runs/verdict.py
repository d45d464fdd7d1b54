"""Did the run learn anything? Its final metrics against the task's trivial baseline, by the task's margin. Pure.

The rule per task comes from the training code's task registry (`Task.verdict`: the headline metric and the
margin in that metric's units, exported as the `task` entry's `verdict` in hyperparameters.json): a run beat the
baseline when `eval_<metric>` >= `eval_baseline_<metric>` + margin. The training code reports both numbers after
its final evaluation (hftrain/scoring/baselines.py). Without them (no validation data, a task without a baseline) the
run is *not judged*, and says so. A run that did not beat the baseline still completed: its model is registered
(approval stays manual) with the verdict in its description and metadata, and every place that reports the run
(summary, notification subject, `runctl status`, the local report) says "completed, but did not beat the
trivial baseline".
"""

from __future__ import annotations

import math
from typing import Any

from hfsm_lambda.spec import hyperparameters

BEAT, NOT_BEATEN, NOT_JUDGED = "beat-baseline", "did-not-beat-baseline", "not-judged"
NOT_BEATEN_PHRASE = "completed, but did not beat the trivial baseline"
# CreateModelPackage metadata values allow letters, digits and _.:/=+-@ (no spaces): the verdicts are such words.


def rules() -> dict[str, dict[str, Any]]:
    """task -> {metric, margin, why} (hftrain.tasks: Task.verdict)."""
    return dict(hyperparameters.schema()["task"].get("verdict", {}))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def judge(task: str, metrics: dict[str, Any]) -> dict[str, Any]:
    """{verdict, metric, value, baseline, margin, text}: `text` is one line a person reads."""
    rule = rules().get(task)
    if not rule:
        return {"verdict": NOT_JUDGED, "text": f"not judged: task {task} declares no trivial baseline"}
    metric, margin = f"eval_{rule['metric']}", float(rule["margin"])
    value, baseline = _number(metrics.get(metric)), _number(metrics.get(f"eval_baseline_{rule['metric']}"))
    base = {"metric": metric, "value": value, "baseline": baseline, "margin": margin}
    if value is None or baseline is None:
        missing = metric if value is None else f"eval_baseline_{rule['metric']}"
        return {**base, "verdict": NOT_JUDGED,
                "text": f"not judged against the trivial baseline: no {missing} (it needs validation data)"}
    beat = value >= baseline + margin
    relation = "beat" if beat else "did not beat"
    return {**base, "verdict": BEAT if beat else NOT_BEATEN,
            "text": f"{metric} {value:.4g} {relation} the trivial baseline {baseline:.4g} by the task's margin of "
                    f"{margin:g} (needed >= {baseline + margin:.4g})"}


def outcome(summary: dict[str, Any]) -> str:
    """How the run ended, for first lines and subjects: 'succeeded' or 'completed, but did not beat ...'."""
    return NOT_BEATEN_PHRASE if (summary.get("verdict") or {}).get("verdict") == NOT_BEATEN else "succeeded"
