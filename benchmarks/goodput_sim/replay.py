"""The simulator's model replayed on a measured local run, compared part by part with that run's ledger.

The replay takes from the ledger only unit costs (each attempt's mean step time, one save, one attempt's download, the first
and a restarted start-up, an interrupted attempt's tail after its last step, the evaluation and the upload) and
the schedule: where each interruption came and of what kind. It predicts the rest as the simulator does: which
checkpoints exist when each interruption comes (every `every_steps`; a save interrupted in flight never counts;
a SIGTERM saves at once), hence where each attempt resumes, how many steps are replayed, how many saves are paid,
how many attempts start. Every ledger part must be predicted within 10% or 1% of the billed time, whichever is
larger (`unaccounted`, the ledger's own residue, is not a prediction). A wrong interval moves the resume points
and the save count; a wrong save cost moves `checkpointing`: either fails the check.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, replace

NOTICE = "notice"  # SIGTERM first (a spot reclaim's notice): the training code saves at once
ABRUPT = "abrupt"  # the instances lost at once: back to the newest complete checkpoint
DURING_SAVE = "during_save"  # lost while the save of checkpoint `step` was being written: it never counts

COMPARED = ("downloading", "startup", "productive", "replayed", "checkpointing", "evaluation", "uploading",
            "stalled")


@dataclass(frozen=True)
class Event:
    step: int  # the step the interrupted attempt reached (for DURING_SAVE: the save's step or, the loop going on
    # while a background save is written, a step after it and before the next save)
    kind: str


@dataclass(frozen=True)
class Units:
    """Per instance, seconds: what the ledger measured once, that the replay multiplies."""

    steps: tuple[float, ...]  # each attempt's mean step time
    save: float
    download: float
    first_startup: float
    restart_startup: float
    tail: float  # an interrupted attempt's billed time after its last step
    evaluation: float
    uploading: float
    start_step: int
    max_steps: int


def _per_instance(attempt: dict, part: str) -> float:
    return float(attempt["parts"].get(part) or 0.0) / attempt["instance_count"]


def units(goodput: dict, schedule: list[Event]) -> Units:
    rows = goodput["attempts"]
    runs = [(a["step_seconds"], a.get("steps_run") or 1) for a in rows if a.get("step_seconds")]
    mean = sum(s * n for s, n in runs) / sum(n for _, n in runs)
    # the ledger's `saves` are the completed ones; a save interrupted in flight was paid too, and the final write
    saves = sum(a.get("saves") or 0 for a in rows) + 1 + sum(e.kind == DURING_SAVE for e in schedule)
    tails = [((a.get("details") or {}).get("replayed") or {}).get("after_last_step", 0.0) / a["instance_count"]
             for a in rows[:-1]]
    return Units(
        steps=tuple(a.get("step_seconds") or mean for a in rows), save=sum(_per_instance(a, "checkpointing") for a in rows) / saves,
        download=statistics.fmean(_per_instance(a, "downloading") for a in rows),
        first_startup=_per_instance(rows[0], "startup"),
        restart_startup=statistics.fmean(_per_instance(a, "startup") for a in rows[1:]) if len(rows) > 1 else 0.0,
        tail=statistics.fmean(tails) if tails else 0.0,
        evaluation=sum(_per_instance(a, "evaluation") for a in rows),
        uploading=sum(_per_instance(a, "uploading") for a in rows),
        start_step=int(rows[0].get("start_step") or 0), max_steps=int(rows[-1]["step_reached"]))


def schedule_from_ledger(goodput: dict) -> list[Event]:
    """The interruptions as the ledger recorded them (a run whose schedule is not known otherwise)."""
    out = []
    for record in goodput.get("interruptions") or []:
        step = int(record.get("step_reached") or record.get("step_logged") or 0)
        kind = DURING_SAVE if record.get("during_save") else NOTICE if record.get("lost_steps") == 0 else ABRUPT
        out.append(Event(step, kind))
    return out


def _multiples(after: int, upto: int, every: int) -> list[int]:
    """Checkpoint steps in (after, upto]."""
    first = (after // every + 1) * every
    return list(range(first, upto + 1, every))


def replay(u: Units, schedule: list[Event], every_steps: int) -> dict[str, float]:
    """Predicted seconds per part, per instance."""
    parts = dict.fromkeys(COMPARED, 0.0)
    start, saves = u.start_step, 0
    mean = statistics.fmean(u.steps)
    for i, event in enumerate(schedule):
        step = u.steps[i] if len(u.steps) == len(schedule) + 1 else mean  # that attempt's own step time
        done = _multiples(start, event.step, every_steps)
        if event.kind == DURING_SAVE:  # the newest save at or before the step reached was in flight: never counts
            kept = done[:-1]
            saves += len(done)  # the interrupted one was paid (in part) too
            resume = kept[-1] if kept else start
        elif event.kind == NOTICE:
            saves += len(done) + (0 if done and done[-1] == event.step else 1)  # the save at SIGTERM
            resume = event.step
        else:
            saves += len(done)
            resume = done[-1] if done else start
        parts["productive"] += (resume - start) * step
        parts["replayed"] += (event.step - resume) * step + u.tail
        start = resume
    saves += len(_multiples(start, u.max_steps, every_steps)) + 1  # + the final model write
    attempts = len(schedule) + 1
    parts["downloading"] = attempts * u.download
    parts["startup"] = u.first_startup + (attempts - 1) * u.restart_startup
    parts["productive"] += (u.max_steps - start) * (u.steps[-1] if len(u.steps) == attempts else mean)
    parts["checkpointing"] = saves * u.save
    parts["evaluation"] = u.evaluation
    parts["uploading"] = u.uploading
    return parts


def cross_check(goodput: dict, schedule: list[Event] | None = None, *, every_steps: int, save_scale: float = 1.0,
                tolerance: float = 0.10, floor: float = 0.01) -> dict:
    """Every part predicted vs measured (per instance): ok when within `tolerance` of the measured value or
    `floor` of the billed time, whichever is larger. `save_scale` multiplies the save cost (the test's wrong
    model)."""
    schedule = schedule_from_ledger(goodput) if schedule is None else schedule
    u = units(goodput, schedule)
    u = replace(u, save=u.save * save_scale)
    predicted = replay(u, schedule, every_steps)
    measured = dict.fromkeys(COMPARED, 0.0)
    billed = 0.0
    for attempt in goodput["attempts"]:
        billed += attempt["billed_seconds"] / attempt["instance_count"]
        for part in COMPARED:
            measured[part] += _per_instance(attempt, part)
    rows = {}
    for part in COMPARED:
        allowed = max(tolerance * abs(measured[part]), floor * billed)
        error = abs(predicted[part] - measured[part])
        rows[part] = {"predicted": round(predicted[part], 3), "measured": round(measured[part], 3),
                      "allowed": round(allowed, 3), "ok": error <= allowed}
    goodput_predicted = predicted["productive"] / sum(predicted.values())
    return {"ok": all(r["ok"] for r in rows.values()), "parts": rows, "billed_per_instance": round(billed, 3),
            "goodput_predicted": round(goodput_predicted, 4), "goodput_measured": goodput.get("ratio")}
