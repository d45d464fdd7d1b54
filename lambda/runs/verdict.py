"""Did the run learn anything? Pure.

The training code evaluates the judged examples (the validation set's first `verdict_eval_samples` rows) with the
model before its first step and after training, scores the task's trivial baselines on them, and reports the
`verdict_*` metrics (contract/verdict_metrics.py; hftrain/scoring/judgement.py): the three scores and the 95%
paired-bootstrap interval of the model's gain over the strongest baseline and over itself before training. The rule
per task comes from the training code's task registry (`Task.verdict`, exported as the `task` entry's `verdict` in
hyperparameters.json):

- *learned*: both intervals lie above zero (the gains exceed the evaluation set's noise) and the gain over the
  baseline is at least the task's margin;
- *not judged*: it did not learn in fewer than the task's `min_steps` steps ("not judged: N steps"), or there was
  nothing to judge with (no validation data, eval_at_end off, verdict_eval_samples 0);
- *not learned*: everything else, and always a run whose training changed nothing (every judged example scored
  as before training, the same evaluation loss: learning rate 0, say), however short.

A run that did not learn still completed: its model is registered (approval stays manual) with the verdict in its
description and metadata, and every place that reports the run (summary, notification subject, `runctl
status/list`, the local report and tally) says so.
"""

from __future__ import annotations

import math
from typing import Any

from contract import verdict_metrics as names
from hfsm_lambda.spec import hyperparameters

LEARNED, NOT_LEARNED, NOT_JUDGED = "learned", "not-learned", "not-judged"
NOT_LEARNED_PHRASE = "completed, but the model did not learn"
BEAT, NOT_BEATEN, NOT_BEATEN_PHRASE = LEARNED, NOT_LEARNED, NOT_LEARNED_PHRASE  # the names runctl reads
# CreateModelPackage metadata values allow letters, digits and _.:/=+-@ (no spaces): the verdicts are such words.
SHORT = {LEARNED: "learned", NOT_LEARNED: "not learned", NOT_JUDGED: "not judged"}


def rules() -> dict[str, dict[str, Any]]:
    """task -> {metric, margin, why, baselines, min_steps} (hftrain.tasks: Task.verdict)."""
    return dict(hyperparameters.schema()["task"].get("verdict", {}))


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        return None
    return float(value)


def _interval(low: float, high: float) -> str:
    return f"95% interval {low:+.3g} to {high:+.3g}"


def judge(task: str, metrics: dict[str, Any]) -> dict[str, Any]:
    """{verdict, metric, value, baseline, baseline_name, pretrained, margin, gain_baseline, gain_pretrained,
    examples, steps, text}: `text` is one line a person reads, starting with the verdict."""
    rule = rules().get(task)
    if not rule:
        return {"verdict": NOT_JUDGED, "text": f"not judged: task {task} declares no verdict"}
    metric, margin = f"eval_{rule['metric']}", float(rule["margin"])
    found = {name: _number(metrics.get(name)) for name in names.ALL}
    loss_change = found.pop(names.LOSS_CHANGE)  # may be unknown (not finite): then never "unchanged"
    if any(value is None for value in found.values()):
        missing = [name for name, value in found.items() if value is None]
        return {"verdict": NOT_JUDGED, "metric": metric, "margin": margin,
                "text": f"not judged: no {', '.join(missing[:3])}{' ...' if len(missing) > 3 else ''} (a verdict needs "
                        "validation data, eval_at_end and verdict_eval_samples above 0)"}
    model, baseline, pretrained = found[names.MODEL], found[names.BASELINE], found[names.PRETRAINED]
    gain_baseline = (found[names.GAIN_BASELINE_LOW], found[names.GAIN_BASELINE_HIGH])
    gain_pretrained = (found[names.GAIN_PRETRAINED_LOW], found[names.GAIN_PRETRAINED_HIGH])
    steps, examples = int(found[names.STEPS]), int(found[names.EXAMPLES])
    listed = rule.get("baselines") or []
    index = int(found[names.BASELINE_INDEX])
    baseline_name = listed[index] if 0 <= index < len(listed) else f"baseline {index}"
    base = {"metric": metric, "value": model, "baseline": baseline, "baseline_name": baseline_name,
            "pretrained": pretrained, "margin": margin, "gain_baseline": list(gain_baseline),
            "gain_pretrained": list(gain_pretrained), "examples": examples, "steps": steps}
    beats_baseline = gain_baseline[0] > 0 and model - baseline >= margin
    beats_pretrained = gain_pretrained[0] > 0
    figures = (f"{rule['metric']} {model:.4g} on {examples} judged examples; the strongest trivial baseline "
               f"({baseline_name}) {baseline:.4g}, gain {model - baseline:+.3g} ({_interval(*gain_baseline)}); the "
               f"model before training {pretrained:.4g}, gain {model - pretrained:+.3g} "
               f"({_interval(*gain_pretrained)}); {steps} steps")
    if beats_baseline and beats_pretrained:
        return {**base, "verdict": LEARNED, "text": f"learned: {figures}"}
    unchanged = gain_pretrained == (0.0, 0.0) and loss_change == 0.0
    if steps < int(rule.get("min_steps") or 0) and not unchanged:
        return {**base, "verdict": NOT_JUDGED,
                "text": f"not judged: {steps} steps, too short to tell (a run is judged from {rule['min_steps']} "
                        f"steps, or earlier once it learned): {figures}"}
    why = ("training changed nothing: the same scores and evaluation loss as before training" if unchanged else
           "it does not beat the model before training by more than the noise" if not beats_pretrained else
           f"it does not beat the strongest trivial baseline by more than the noise and by the task's margin of "
           f"{margin:g}")
    return {**base, "verdict": NOT_LEARNED, "text": f"not learned ({why}): {figures}"}


def outcome(summary: dict[str, Any]) -> str:
    """How the run ended, for first lines and subjects: 'succeeded' or 'completed, but the model did not learn'."""
    return NOT_LEARNED_PHRASE if (summary.get("verdict") or {}).get("verdict") == NOT_LEARNED else "succeeded"


def short(judged: dict[str, Any] | None) -> str:
    """The verdict in a few words for tables and tallies: 'learned', 'not learned', 'not judged: 20 steps'."""
    if not isinstance(judged, dict) or not judged.get("verdict"):
        return ""
    text = str(judged.get("text") or "")
    if judged["verdict"] == NOT_JUDGED:
        return text.split(",", 1)[0].split(" (", 1)[0] if text.startswith("not judged") else "not judged"
    return SHORT.get(judged["verdict"], str(judged["verdict"]))
