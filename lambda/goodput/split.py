"""The split of one attempt's billed wall seconds into the ledger's parts (ledger.py, "Parts" and "Stalled"),
from its transitions' windows and what its leader log says. Pure.

Three cases, by what the log holds: nothing usable (the Training window is unaccounted, said in `notes`),
PROGRESS lines only (start-up and step time from their times), or GOODPUT reports (the full split: start-up
phases, step, evaluation and save time, and the tail after the last report).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from contract import goodput_line
from hfsm_lambda.goodput import recoveries
from hfsm_lambda.goodput.attempts import Attempt
from hfsm_lambda.goodput.evidence import Evidence
from hfsm_lambda.goodput.values import BEFORE_TRAINING, LEADER, PARTS, epoch, number


@dataclass
class Split:
    parts: dict[str, float]
    details: dict[str, dict[str, float]]
    notes: list[str]
    steps_run: int | None
    step_seconds_mean: float | None
    during_save: bool = False


@dataclass
class _Times:
    """The attempt's Training window [t0, t1] and where its last GOODPUT report puts the first step (epoch s)."""
    t0: float
    t1: float
    first_step: float | None  # None: the attempt never reached its first step
    startup_end: float  # the first step, else the last report
    base: float  # where the last report's account ends: what follows is the tail


@dataclass
class _Loop:
    """The training loop's seconds as the last report counts them, and the tail after it (wall seconds)."""
    steps: float
    evaluation: float
    saving: float
    tail: float
    during_save: bool = False


def _close(parts: dict[str, float], billed: float) -> None:
    """`unaccounted`: what the other parts leave of the billed seconds."""
    parts["unaccounted"] = billed - sum(v for k, v in parts.items() if k != "unaccounted")


def _take_stall(parts: dict[str, float], stall: dict[str, Any], t1: float, not_before: float) -> None:
    """`stalled`: from the stall record's last progress (not before `not_before`) to the end of Training, taken
    out of `replayed`, then `productive`; what is left comes out of `unaccounted` (filled after this)."""
    since = max(epoch(stall.get("last_progress_at")) or t1, not_before)
    parts["stalled"] = remaining = max(0.0, t1 - since)
    for name in ("replayed", "productive"):
        take = min(parts[name], remaining)
        parts[name] -= take
        remaining -= take


def _kept_step_seconds(evidence: Evidence, start_step: int, kept_until: int, reached: int,
                       step_total: float) -> float:
    """Step time of this attempt's steps up to `kept_until` (the step the next attempt resumed from)."""
    if kept_until >= reached:
        return step_total
    if kept_until <= start_step:
        return 0.0
    for report in evidence.reports:
        if report.get("event") == "save" and report.get("saved_step") == kept_until:
            return number(report.get("step_seconds"))
    return step_total * (kept_until - start_step) / max(1, reached - start_step)  # no save record: pro rata


def _why_not_split(attempt: Attempt, evidence: Evidence | None) -> str:
    if evidence is not None and evidence.error:
        return evidence.error
    if evidence is not None and evidence.stream:
        return f"no GOODPUT or PROGRESS line in {evidence.stream}"
    return f"no {LEADER} log stream of {attempt.job} in this attempt's window"


def _not_split(attempt: Attempt, evidence: Evidence | None, parts: dict[str, float], t0: float, t1: float,
               stall: dict[str, Any] | None) -> Split:
    """No GOODPUT or PROGRESS line: the Training window is unaccounted (less a stall's time), said in notes."""
    notes = [f"{attempt.job} start {attempt.restart}: {attempt.window('training'):.0f} s of Training not split "
             f"({_why_not_split(attempt, evidence)})"]
    if stall is not None:  # a stall before the first step: from the last progress the job reported to its end
        _take_stall(parts, stall, t1, t0)
    _close(parts, attempt.billed_wall)
    return Split(parts, {"startup": {}}, notes, None, None)


def _from_progress(attempt: Attempt, evidence: Evidence, parts: dict[str, float], t0: float, *,
                   kept: bool) -> Split:
    """PROGRESS lines only (a training code without GOODPUT reports): start-up to the first, steps to the last."""
    first_progress, last_progress = evidence.progress[0][0], evidence.progress[-1][0]
    parts["startup"] = max(0.0, first_progress - t0)
    steps = max(0.0, (last_progress or first_progress) - first_progress)
    parts["productive" if kept else "replayed"] = steps
    notes = [f"{attempt.job} start {attempt.restart}: no GOODPUT report in {evidence.stream}; start-up and "
             "step time from PROGRESS line times, evaluation and saves not separated"]
    _close(parts, attempt.billed_wall)
    return Split(parts, {"startup": {"other": parts["startup"]}}, notes, len(evidence.progress), None)


def _times(last: dict[str, Any], t0: float, t1: float) -> _Times:
    first_step = number(last.get("first_step_at")) or None
    last_at = min(max(number(last.get("at")), t0), t1)
    startup_end = min(first_step, t1) if first_step else last_at
    return _Times(t0, t1, first_step, startup_end, max(last_at, startup_end))


def _startup(last: dict[str, Any], times: _Times) -> tuple[float, dict[str, float]]:
    """(start-up seconds, its details): `launch` to the script's start, the measured phases, `other`."""
    script_start = number(last.get("script_started_at")) or times.t0
    startup = max(0.0, times.startup_end - times.t0)
    phases = {k: number(v) for k, v in (last.get("startup") or {}).items()}
    details = {"launch": max(0.0, min(script_start, times.startup_end) - times.t0), **phases}
    details["other"] = startup - sum(details.values())
    return startup, details


def _loop(last: dict[str, Any], times: _Times, last_progress: float | None, *, ended: bool) -> _Loop:
    """The loop's seconds; for an attempt killed after its first step, what it did after its last report."""
    loop = _Loop(number(last.get("step_seconds")), number(last.get("eval_seconds")),
                 number(last.get("save_seconds")), max(0.0, times.t1 - times.base))
    if ended or not times.first_step:  # the tail is the processes' exit (or start-up, see _from_reports)
        return loop
    event = last.get("event")
    if event == goodput_line.SAVE_BEGIN:  # killed during a save: the loop was blocked on it
        loop.saving, loop.tail, loop.during_save = loop.saving + loop.tail, 0.0, True
    elif event == goodput_line.EVAL_BEGIN:
        loop.evaluation, loop.tail = loop.evaluation + loop.tail, 0.0
    elif last_progress is not None and last_progress > times.base:  # steps after the last report
        after = min(last_progress, times.t1) - times.base
        loop.steps += after
        loop.tail -= after
    return loop


def _writing(reports: list[dict[str, Any]]) -> bool:
    """Whether a background save was in flight at the attempt's last report: a `write_begin` with no `checkpoint`
    (complete) after it (the loop was training meanwhile; the save's checkpoint never counted)."""
    for report in reversed(reports):
        if report.get("event") == goodput_line.COMPLETE:
            return False
        if report.get("event") == goodput_line.WRITE_BEGIN:
            return True
    return False


def _kept(attempt: Attempt, evidence: Evidence, steps: float, start_step: int, reached: int, *,
          kept_until: int | None, final: bool, notes: list[str]) -> float:
    """The step seconds the final model kept: all of the final attempt's, a lost one's up to where the next
    attempt resumed (all, said in notes, when its log does not say)."""
    if final or kept_until is None:
        if not final:
            notes.append(f"{attempt.job} start {attempt.restart}: the next attempt's log does not say where it "
                         "resumed, so its steps are counted as kept")
        return steps
    return min(steps, _kept_step_seconds(evidence, start_step, kept_until, reached, steps))


def _place(parts: dict[str, float], details: dict[str, dict[str, float]], attempt: Attempt, loop: _Loop,
           kept: float, *, final: bool, ended: bool) -> None:
    """The loop's parts, and the tail's: the step in progress (running), the exit before the upload (final),
    or, for a lost attempt, everything after its last durable checkpoint."""
    lost = max(0.0, loop.steps - kept)
    parts["productive"], parts["evaluation"], parts["checkpointing"] = kept, loop.evaluation, loop.saving
    if final and attempt.ended == "running":  # training now: the step in progress
        parts["productive"] += loop.tail
        parts["replayed"] = lost
    elif final:  # the processes' exit after the final model was written: the end of the job, before its upload
        parts["uploading"] += loop.tail
        details["uploading"] = {"exit": loop.tail, "upload": attempt.window("uploading")}
        parts["replayed"] = lost
    else:  # everything after the last durable checkpoint of a lost attempt
        parts["replayed"] = lost + loop.tail
        details["replayed"] = {"lost_steps": lost, "after_checkpoint" if ended else "after_last_step": loop.tail}


def _step_mean(steps: float, steps_run: int, reached: int, start_step: int, *, ended: bool) -> float | None:
    if steps_run and ended:
        return steps / steps_run
    return steps / max(1, reached - start_step) if reached > start_step else None


def _from_reports(attempt: Attempt, evidence: Evidence, last: dict[str, Any], parts: dict[str, float],
                  times: _Times, *, kept_until: int | None, final: bool, stall: dict[str, Any] | None) -> Split:
    """The full split, from the attempt's last GOODPUT report (its running totals) and its end report."""
    notes: list[str] = []
    ended = bool(evidence.report("end"))
    parts["startup"], startup = _startup(last, times)
    details: dict[str, dict[str, float]] = {"startup": startup}
    last_progress = evidence.progress[-1][0] if evidence.progress else None
    loop = _loop(last, times, last_progress, ended=ended)
    loop.during_save = loop.during_save or (not ended and bool(times.first_step) and _writing(evidence.reports))
    steps_run = int(last.get("steps") or 0)
    if not times.first_step:  # never reached its first step: start-up until the end (or until its last report)
        parts["startup"] += 0.0 if ended else loop.tail
        startup["other"] += 0.0 if ended else loop.tail
        loop.tail = loop.tail if ended else 0.0
    start_step = evidence.start_step or 0
    reached = max(evidence.step_reached or start_step, start_step)
    kept = _kept(attempt, evidence, loop.steps, start_step, reached, kept_until=kept_until, final=final, notes=notes)
    _place(parts, details, attempt, loop, kept, final=final, ended=ended)
    if stall is not None:
        _take_stall(parts, stall, times.t1, times.first_step or times.t0)
    _close(parts, attempt.billed_wall)
    mean = _step_mean(loop.steps, steps_run, reached, start_step, ended=ended)
    return Split(parts, details, notes, steps_run if ended else reached - start_step, mean, loop.during_save)


def split_attempt(attempt: Attempt, evidence: Evidence | None, *, kept_until: int | None, final: bool,
                  stall: dict[str, Any] | None) -> Split:
    """The attempt's wall seconds by part (multiplied by the instance count by the caller)."""
    parts = dict.fromkeys(PARTS, 0.0)
    parts["downloading"] = attempt.window(BEFORE_TRAINING)
    parts["uploading"] = attempt.window("uploading")
    t0, t1 = attempt.training_start, attempt.training_end
    last = evidence.last if evidence else None
    if t0 is None or t1 is None:
        _close(parts, attempt.billed_wall)
        return Split(parts, {"startup": {}}, [], None, None)
    if evidence is None or (last is None and not evidence.progress):
        return _not_split(attempt, evidence, parts, t0, t1, stall)
    if last is None:
        return _from_progress(attempt, evidence, parts, t0, kept=final or kept_until is None)
    merged = recoveries.merge(evidence, t1)
    if merged is None:
        return _from_reports(attempt, evidence, last, parts, _times(last, t0, t1), kept_until=kept_until,
                             final=final, stall=stall)
    last = merged.evidence.last
    times = _times(last, t0, t1)
    split = _from_reports(attempt, merged.evidence, last, parts, times, kept_until=kept_until, final=final,
                          stall=None)
    split.parts["recovering"] += merged.recovering
    split.parts["replayed"] += merged.replayed
    split.details["recovering"] = merged.details
    if merged.before_first_step:  # a first generation that never reported: its start-up ended at its fault; the
        # measured phases were the next generation's, which are the recovery's
        split.parts["startup"] = max(0.0, split.parts["startup"] - merged.before_first_step)
        split.details["startup"] = {"other": split.parts["startup"]}
    if stall is not None:  # a stall that was recovered from ended when it was found, not with the attempt
        detected = min(t1, epoch(stall.get("detected_at")) or t1)
        if times.first_step and detected <= times.first_step:  # found in the start-up: the start-up's to give
            since = max(epoch(stall.get("last_progress_at")) or detected, t0)
            split.parts["stalled"] = stalled = max(0.0, detected - since)
            split.parts["startup"] = max(0.0, split.parts["startup"] - stalled)
            split.details["startup"] = {"other": split.parts["startup"]}
        else:
            _take_stall(split.parts, stall, detected, times.first_step or t0)
    _close(split.parts, attempt.billed_wall)
    return split
