"""The goodput ledger: where every billed instance-second of a run's training went. Pure (standard library).

Finish (the run summary), `runctl status` (live) and the local mode all compute it here, from evidence that
sources.py reads from AWS (or a test builds):

- `jobs`: the run's training jobs, oldest first, each a DescribeTrainingJob response (SecondaryStatusTransitions,
  TrainingTimeInSeconds, BillableTimeInSeconds, ResourceConfig.InstanceCount).
- `streams`: job name -> the leader host's (`algo-1`) log streams of that job, each `{"name", "first_at"
  (epoch seconds of its first event, or None), "events": [[epoch seconds, message], ...] (at least its GOODPUT
  and PROGRESS lines, oldest first), "error": why it could not be read, or absent}`.
- `stalls`: stall records (see "Stalled" below); [] when there are none.

Attempts. One attempt is one start of a job's instances: a job that was interrupted n times (spot) has n + 1.
They are cut from SecondaryStatusTransitions: `Starting` (provisioning, waiting for capacity) and `Interrupted`
are not billed (`waiting`, shown beside the ledger); every other InProgress status (Downloading, Training,
Uploading, Stopping, and names this code does not know) is billed, as the DescribeTrainingJob reference bills
TrainingStartTime to TrainingEndTime less the spot waits. An attempt's billed seconds are the sum of its billed
transitions' durations times InstanceCount (instance-seconds; `transitions_billed_seconds` for the run). For an
ended job, what SageMaker bills is the reference: TrainingTimeInSeconds x InstanceCount (`reported_billed_seconds`,
whole seconds), and the gap to the transitions' sum (rounding, or billing the transitions do not show) is put in
the job's last attempt as `unaccounted` (detail `reported_vs_transitions`), so `billed_seconds` is what SageMaker
billed. The discounted BillableTimeInSeconds x InstanceCount is beside it (`billable_seconds`). Each attempt gets
the job's leader log stream whose first event falls in its window.

Parts (instance-seconds; they add up to `billed_seconds` exactly, `unaccounted` being the rest):
- `downloading`: billed transitions before Training (data and image download, checkpoint restore).
- `startup`: the Training transition's start to the first optimizer step: `launch` (to the script's process
  start: toolkit, pip check, torchrun), the phases the training code measures (GOODPUT `startup` line: imports,
  setup, data_load, model_load, tokenize, layout, resume_verify, restore) and `other` (between them).
- `productive`: optimizer step time of the steps the final model kept.
- `replayed`: step time an interruption lost: an interrupted attempt's steps after the checkpoint the next
  attempt resumed from (the training code's cumulative step time at each save says where that checkpoint lies),
  plus, when the attempt was killed, the time from its last report to the kill that was not a save.
- `evaluation`: evaluations during training and the final one.
- `checkpointing`: time the loop blocked on saves (the Trainer's save, the completion markers, rotation; a save
  the attempt was killed in; the final model write).
- `uploading`: the Uploading transition.
- `stalled`: see below.
- `recovering`: recoveries in place (RECOVERY lines, contract/recovery_line.py): from the fault to the first step
  of the restarted training processes, in the same job (lambda/goodput/recoveries.py; the failed generation's steps
  after its last complete checkpoint are `replayed`; a first generation that never reported, because it hung or
  died in its start-up, has its start-up end at its last progress, the stall after it `stalled`).
- `unaccounted`: the rest: the processes' exit after their last report (`teardown`), clock differences, and all
  of an attempt whose log could not be read (said in `notes`).

Goodput = productive / billed.

Stalled. Filled from stall records, each `{"job": <training job name>, "last_progress_at": <epoch seconds or
ISO-8601>, "detected_at": <epoch seconds or ISO-8601>}` (more keys, e.g. `host`, `rank`, `step`, are kept as
they are). sources.py reads them from `<checkpoint prefix>/_stalls.json` (`{"stalls": [...]}`), which a
stall watchdog writes (the training code into its checkpoint dir, which SageMaker syncs there, or the pipeline
directly). A record belongs to the attempt of `job` whose billed window contains `detected_at`; that attempt's
`stalled` part is the time from `last_progress_at` (not before its first step) to the end of its Training
window, taken out of what would otherwise be `replayed`, then step time, then `unaccounted` (an attempt whose log
cannot be split, e.g. one that stalled before its first step, gets the same `stalled` out of `unaccounted`). A
stall found in the start-up and recovered from in place runs from `last_progress_at` to `detected_at`, out of
`startup`. Without a record `stalled` is 0.

Interruptions. For every attempt but the last: the step reached (the last PROGRESS line of its own log, not a
progress file that may not have reached S3), the step the next attempt resumed from (its GOODPUT `start_step`,
else its first PROGRESS step less one), the steps and minutes lost, and what the restart cost again (download
and start-up). When the log cannot tell, the value is None and `unknown` says why; never 0.

Modules: values.py (part names, lenient time and number readers), attempts.py (attempts from the
transitions), evidence.py (an attempt's log lines), split.py (one attempt's parts),
interruptions.py (the interruption records), text.py (the words); this module adds them up into
the ledger.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from hfsm_lambda.goodput.attempts import RUNNING, Attempt, attempts_of
from hfsm_lambda.goodput.evidence import Evidence, assign_streams
from hfsm_lambda.goodput.interruptions import interruption
from hfsm_lambda.goodput.split import Split, split_attempt
from hfsm_lambda.goodput.values import PARTS, epoch, iso, number

FORMAT = 1


def _share(parts: dict[str, float], billed: float) -> float | None:
    return round(parts["productive"] / billed, 4) if billed > 0 else None


def _rounded(values: dict[str, float]) -> dict[str, float]:
    return {k: round(v, 3) for k, v in values.items()}


def _stall_for(attempt: Attempt, stalls: list[dict[str, Any]]) -> dict[str, Any] | None:
    for record in stalls:
        detected = epoch(record.get("detected_at"))
        if record.get("job") == attempt.job and detected is not None and attempt.start <= detected <= attempt.end:
            return record
    return None


@dataclass
class _Jobs:
    """The run's attempts (oldest first) with their leader log evidence, and what the jobs report."""
    attempts: list[Attempt] = field(default_factory=list)
    evidence: list[Evidence | None] = field(default_factory=list)
    waiting_after: float = 0.0  # unbilled seconds after each job's last attempt
    reported: float = 0.0  # TrainingTimeInSeconds x InstanceCount
    billable: float = 0.0  # BillableTimeInSeconds x InstanceCount
    job_reported: dict[str, float] = field(default_factory=dict)  # an ended job's TrainingTimeInSeconds x count


def _read_jobs(jobs: list[dict[str, Any]], streams: dict[str, list[dict[str, Any]]], now: float) -> _Jobs:
    out = _Jobs()
    for desc in jobs:
        found, after = attempts_of(desc, now)
        out.evidence += assign_streams(found, streams.get(desc.get("TrainingJobName", ""), []))
        out.attempts += found
        out.waiting_after += after
        count = int((desc.get("ResourceConfig") or {}).get("InstanceCount") or 1)
        out.reported += number(desc.get("TrainingTimeInSeconds")) * count
        out.billable += number(desc.get("BillableTimeInSeconds")) * count
        if desc.get("TrainingTimeInSeconds") and desc.get("TrainingJobStatus") not in RUNNING:
            out.job_reported[desc.get("TrainingJobName", "")] = number(desc["TrainingTimeInSeconds"]) * count
    return out


@dataclass
class _Totals:
    """The run's parts and details (instance-seconds), summed over its attempts."""
    parts: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PARTS, 0.0))
    details: dict[str, dict[str, float]] = field(default_factory=dict)

    def add(self, parts: dict[str, float], details: dict[str, dict[str, float]], count: int) -> None:
        for k, v in parts.items():
            self.parts[k] += v
        for part, detail in details.items():
            into = self.details.setdefault(part, {})
            for k, v in detail.items():
                into[k] = into.get(k, 0.0) + v * count

    def add_gap(self, gap: float) -> None:
        """The gap between what SageMaker billed and the transitions' sum, in `unaccounted`."""
        self.parts["unaccounted"] += gap
        into = self.details.setdefault("unaccounted", {})
        into["reported_vs_transitions"] = into.get("reported_vs_transitions", 0.0) + gap


def _row(i: int, attempt: Attempt, found: Evidence | None, split: Split, parts: dict[str, float]) -> dict[str, Any]:
    """The attempt's ledger row (`parts` in instance-seconds)."""
    count = attempt.instance_count
    billed = attempt.billed_wall * count
    seen = found or Evidence()  # no stream: None for everything it would tell
    last = seen.last or {}
    return {
        "attempt": i, "job_name": attempt.job, "restart": attempt.restart, "instance_type": attempt.instance_type,
        "instance_count": count, "spot": attempt.spot, "ended": attempt.ended,
        "started_at": iso(attempt.start), "ended_at": iso(attempt.end),
        "billed_seconds": round(billed, 3), "waiting_seconds": round(attempt.waiting_before, 3),
        "parts": _rounded(parts), "ratio": _share(parts, billed),
        "details": {k: _rounded({n: v * count for n, v in d.items()}) for k, d in split.details.items() if d},
        "start_step": seen.start_step,
        "step_reached": seen.step_reached,
        "steps_run": split.steps_run,
        "step_seconds": round(split.step_seconds_mean, 5) if split.step_seconds_mean else None,
        "saves": last.get("saves"), "evals": last.get("evals"),
        "tokenize_cache": last.get("tokenize_cache"),
        "log_stream": seen.stream,
    }


def _never_negative(parts: dict[str, float], details: dict[str, dict[str, float]]) -> float:
    """When the measured parts add up to more than the billed time (`unaccounted` below zero), scale them down to
    it and set `unaccounted` to 0, keeping the excess in its details (`measured_over_billed`); returns the excess."""
    over = -parts.get("unaccounted", 0.0)
    measured = sum(v for k, v in parts.items() if k != "unaccounted")
    if over <= 0.0005 or measured <= 0:
        return 0.0
    billed = measured - over
    names = [k for k in parts if k != "unaccounted"]
    for name in names:
        parts[name] = round(parts[name] * billed / measured, 3)
    largest = max(names, key=lambda k: parts[k])
    parts[largest] = round(parts[largest] + billed - sum(parts[k] for k in names), 3)  # the rounding's residue
    parts["unaccounted"] = 0.0
    details.setdefault("unaccounted", {})["measured_over_billed"] = round(over, 3)
    return over


def _reconcile(rows: list[dict[str, Any]], job_reported: dict[str, float], totals: _Totals) -> None:
    """What SageMaker bills is the reference: the rest goes into each ended job's last row as `unaccounted`."""
    for job, seconds in job_reported.items():
        mine = [r for r in rows if r["job_name"] == job]
        if not mine:
            continue
        gap = round(seconds - sum(r["billed_seconds"] for r in mine), 3)
        row = mine[-1]
        row["billed_seconds"] = round(row["billed_seconds"] + gap, 3)
        row["parts"]["unaccounted"] = round(row["parts"]["unaccounted"] + gap, 3)
        row.setdefault("details", {}).setdefault("unaccounted", {})["reported_vs_transitions"] = gap
        row["ratio"] = _share(row["parts"], row["billed_seconds"])
        totals.add_gap(gap)


@dataclass
class _Account:
    """The ledger's rows, interruption records and notes, and the run's totals, attempt by attempt."""
    rows: list[dict[str, Any]] = field(default_factory=list)
    interruptions: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    totals: _Totals = field(default_factory=_Totals)


def _account(attempts: list[Attempt], evidence: list[Evidence | None], stalls: list[dict[str, Any]]) -> _Account:
    out = _Account()
    for i, (attempt, found) in enumerate(zip(attempts, evidence, strict=True)):
        final = i == len(attempts) - 1
        following = evidence[i + 1] if not final else None
        stall = _stall_for(attempt, stalls)
        split = split_attempt(attempt, found, kept_until=following.start_step if following is not None else None,
                              final=final, stall=stall)
        parts = {k: v * attempt.instance_count for k, v in split.parts.items()}
        out.totals.add(parts, split.details, attempt.instance_count)
        out.notes += split.notes
        out.rows.append(_row(i, attempt, found, split, parts))
        if not final:
            out.interruptions.append(interruption(attempt, found, attempts[i + 1], following, split, out.rows[-1],
                                                  stalled=stall is not None))
    return out


def ledger(jobs: list[dict[str, Any]], streams: dict[str, list[dict[str, Any]]],
           stalls: list[dict[str, Any]] | None = None, *, now: float | None = None,
           other_jobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The run's ledger (summary.json's `goodput`): per attempt and for the run."""
    now = now if now is not None else datetime.now(UTC).timestamp()
    run = _read_jobs(jobs, streams, now)
    account = _account(run.attempts, run.evidence, [s for s in stalls or [] if isinstance(s, dict)])
    rows, totals = account.rows, account.totals
    from_transitions = sum(r["billed_seconds"] for r in rows)
    _reconcile(rows, run.job_reported, totals)
    for row in rows:
        over = _never_negative(row["parts"], row.setdefault("details", {}))
        if over:
            account.notes.append(f"{row['job_name']} start {row['restart']}: the measured parts exceeded the billed "
                                 f"time by {over:.1f} s; they are scaled down to it (SageMaker bills whole seconds "
                                 "and the parts are measured by the instances' clocks)")
            row["ratio"] = _share(row["parts"], row["billed_seconds"])
    _never_negative(totals.parts, totals.details)
    billed_total = sum(r["billed_seconds"] for r in rows)
    waiting = sum(a.waiting_before for a in run.attempts) + run.waiting_after
    return {
        "format": FORMAT,
        "billed_seconds": round(billed_total, 3),
        "transitions_billed_seconds": round(from_transitions, 3),
        "reported_billed_seconds": round(run.reported, 3),
        "billable_seconds": round(run.billable, 3),
        "waiting_seconds": round(waiting, 3),
        "parts": _rounded(totals.parts),
        "ratio": _share(totals.parts, billed_total),
        "details": {part: _rounded(detail) for part, detail in totals.details.items() if detail},
        "attempts": rows,
        "interruptions": account.interruptions,
        "other_jobs": other_jobs or [],
        "notes": account.notes,
    }
