"""Recoveries in place inside one attempt (contract/recovery_line.py): one SageMaker job whose training processes
were restarted on the same instances. Pure.

Each generation of processes keeps its own GOODPUT totals from zero. `merge` makes them one account, as if one
process had run throughout: the totals of each generation are added to the next one's (its step time less the
steps lost to the fault), the start-up is the first generation's, and what lies between is returned apart:
`recovering` (from the fault to the first step of the next generation: detection, agreement, the new processes'
start-up and restore) and `replayed` (the failed generation's steps after its last complete checkpoint, and its
time from its last report to the fault).
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from contract import goodput_line
from hfsm_lambda.goodput.evidence import Evidence
from hfsm_lambda.goodput.values import epoch, number

_SUMMED = ("step_seconds", "eval_seconds", "save_seconds", "final_seconds", "steps", "saves", "evals")
_FIRST = ("script_started_at", "start_step", "startup", "tokenize_cache")


@dataclass
class Merged:
    evidence: Evidence
    recovering: float = 0.0
    replayed: float = 0.0
    details: dict[str, float] = field(default_factory=dict)  # per recovery: its recovering seconds
    # recovering seconds before the account's first step (a first generation that never reported: it hung or died
    # in its start-up), which the start-up would otherwise claim
    before_first_step: float = 0.0


def _generation(report: dict[str, Any]) -> int:
    value = report.get("generation")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _kept_seconds(reports: list[dict[str, Any]], kept_until: int | None) -> float | None:
    """The step seconds a generation had run when the checkpoint the next one resumed from was taken."""
    if kept_until is None:
        return None
    for report in reversed(reports):
        event = report.get("event")
        if (event == goodput_line.SAVE and not report.get("background") and report.get("saved_step") == kept_until) \
                or (event == goodput_line.COMPLETE and report.get("complete_step") == kept_until):
            return number(report.get("step_seconds"))
    return None


def merge(evidence: Evidence, t1: float) -> Merged | None:
    """One account for an attempt with recoveries in place; None when its log shows none."""
    if not evidence.recoveries or not evidence.reports:
        return None
    by_generation: dict[int, list[dict[str, Any]]] = {}
    for report in evidence.reports:
        by_generation.setdefault(_generation(report), []).append(report)
    first = by_generation[min(by_generation)]
    first_step = next((r.get("first_step_at") for r in reversed(first) if r.get("first_step_at")), None)
    merged = Merged(evidence)
    offsets = dict.fromkeys(_SUMMED, 0.0)
    reports: list[dict[str, Any]] = []
    recoveries = {int(r["generation"]): r for r in evidence.recoveries}
    generations = sorted(set(by_generation) | set(recoveries))
    took_over = recoveries.get(min(by_generation))
    fault_at = epoch(took_over.get("fault_at")) if took_over else None
    if fault_at is not None and first_step:
        # the first generation that reported was started by a recovery: the one before never reported (it hung
        # or died in its start-up); from its fault to this generation's first step is recovering
        recovering = max(0.0, min(number(first_step), t1) - fault_at)
        merged.recovering += recovering
        merged.before_first_step += recovering
        merged.details[f"recovery {took_over.get('recovery', min(by_generation))} "
                       f"({took_over.get('cause') or '?'})"] = recovering
    for index, gen in enumerate(generations):
        own = by_generation.get(gen, [])
        for report in own:
            copy = dict(report)
            for key in _SUMMED:
                copy[key] = number(report.get(key)) + offsets[key]
            for key in _FIRST:
                copy[key] = first[-1].get(key)
            copy["first_step_at"] = first_step
            reports.append(copy)
        later = generations[index + 1] if index + 1 < len(generations) else None
        recovery = recoveries.get(later) if later is not None else None
        if recovery is None or not own:
            continue
        last = own[-1]
        nxt = by_generation.get(later, [])
        kept_until = next((r.get("start_step") for r in nxt if isinstance(r.get("start_step"), int)), None)
        steps = number(last.get("step_seconds"))
        kept = _kept_seconds(own, kept_until)
        kept = 0.0 if kept is None and (kept_until is None or kept_until <= (own[0].get("start_step") or 0)) \
            else (kept if kept is not None else steps)
        lost = max(0.0, steps - kept)
        fault_at = epoch(recovery.get("fault_at")) or number(last.get("at"))
        tail = max(0.0, min(fault_at, t1) - number(last.get("at")))
        resumed = next((number(r.get("first_step_at")) for r in nxt if r.get("first_step_at")), None)
        recovering = max(0.0, min(resumed or t1, t1) - fault_at)
        merged.recovering += recovering
        merged.replayed += lost + tail
        merged.details[f"recovery {recovery.get('recovery', later)} ({recovery.get('cause') or '?'})"] = recovering
        for key in _SUMMED:
            offsets[key] += number(last.get(key))
        offsets["step_seconds"] -= lost
        if not resumed and reports:  # the last generation never trained: its time up to the end is recovering
            reports[-1] = {**reports[-1], "at": t1}
    merged.evidence = replace(evidence, reports=reports)
    return merged
