"""The goodput ledger: where every billed instance-second of a run's training went. Pure (standard library).

Finish (the run summary), `runctl status` (live) and the local mode all compute it here, from evidence that
goodput_sources.py reads from AWS (or a test builds):

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
- `unaccounted`: the rest: the processes' exit after their last report (`teardown`), clock differences, and all
  of an attempt whose log could not be read (said in `notes`).

Goodput = productive / billed.

Stalled. Filled from stall records, each `{"job": <training job name>, "last_progress_at": <epoch seconds or
ISO-8601>, "detected_at": <epoch seconds or ISO-8601>}` (more keys, e.g. `host`, `rank`, `step`, are kept as
they are). goodput_sources.py reads them from `<checkpoint prefix>/_stalls.json` (`{"stalls": [...]}`), which a
stall watchdog writes (the training code into its checkpoint dir, which SageMaker syncs there, or the pipeline
directly). A record belongs to the attempt of `job` whose billed window contains `detected_at`; that attempt's
`stalled` part is the time from `last_progress_at` (not before its first step) to the end of its Training
window, taken out of what would otherwise be `replayed`, then step time, then `unaccounted` (an attempt whose log
cannot be split, e.g. one that stalled before its first step, gets the same `stalled` out of `unaccounted`).
Without a record `stalled` is 0.

Interruptions. For every attempt but the last: the step reached (the last PROGRESS line of its own log, not a
progress file that may not have reached S3), the step the next attempt resumed from (its GOODPUT `start_step`,
else its first PROGRESS step less one), the steps and minutes lost, and what the restart cost again (download
and start-up). When the log cannot tell, the value is None and `unknown` says why; never 0.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

FORMAT = 1
PARTS = ("downloading", "startup", "productive", "replayed", "evaluation", "checkpointing", "uploading", "stalled",
         "unaccounted")
LEADER = "algo-1"
GOODPUT_PREFIX = "GOODPUT "
PROGRESS_PREFIX = "PROGRESS global_step="
UNBILLED = frozenset({"Starting", "Interrupted", "LaunchingMLInstances", "PreparingTrainingStack", "Pending"})
END_STATUSES = frozenset({"Completed", "Failed", "Stopped", "MaxRuntimeExceeded", "MaxWaitTimeExceeded"})
BEFORE_TRAINING = "downloading"
STREAM_SLACK_SECONDS = 120.0  # a stream's first event may follow its attempt's end by this much (log delivery)
SHOW_SHARE = 0.05  # parts shown in the summary text: more than 5% of the billed time


# --- small helpers -------------------------------------------------------------------------------------------
def epoch(value: Any) -> float | None:
    """datetime, epoch seconds or ISO-8601 text -> epoch seconds (None when unreadable)."""
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str) and value:
        try:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
        return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()
    return None


def parse_report(message: str) -> dict[str, Any] | None:
    at = message.find(GOODPUT_PREFIX)
    if at < 0:
        return None
    try:
        value = json.loads(message[at + len(GOODPUT_PREFIX):])
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def parse_progress(message: str) -> int | None:
    at = message.find(PROGRESS_PREFIX)
    if at < 0:
        return None
    digits = ""
    for char in message[at + len(PROGRESS_PREFIX):]:
        if not char.isdigit():
            break
        digits += char
    return int(digits) if digits else None


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


# --- attempts from the status transitions ----------------------------------------------------------------------
@dataclass
class Segment:
    status: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass
class Attempt:
    job: str
    restart: int  # 0 for the job's first start
    instance_count: int
    instance_type: str | None
    spot: bool
    segments: list[Segment] = field(default_factory=list)
    waiting_before: float = 0.0
    ended: str = ""  # how it ended: "Interrupted", the job's end status, or "running"

    @property
    def start(self) -> float:
        return self.segments[0].start

    @property
    def end(self) -> float:
        return self.segments[-1].end

    @property
    def billed_wall(self) -> float:
        return sum(s.seconds for s in self.segments)

    def window(self, kind: str) -> float:
        """Wall seconds of the attempt's downloading / training / uploading transitions."""
        return sum((s.seconds for s in self.segments if _kind(s, self.segments) == kind), 0.0)

    @property
    def training_start(self) -> float | None:
        return next((s.start for s in self.segments if s.status == "Training"), None)

    @property
    def training_end(self) -> float | None:
        ends = [s.end for s in self.segments if _kind(s, self.segments) == "training"]
        return max(ends) if ends else None


def _kind(segment: Segment, segments: list[Segment]) -> str:
    if segment.status == "Uploading":
        return "uploading"
    training = next((s.start for s in segments if s.status == "Training"), None)
    if training is None or segment.start < training:
        return BEFORE_TRAINING
    return "training"


def attempts_of(desc: dict[str, Any], now: float) -> tuple[list[Attempt], float]:
    """(attempts, unbilled seconds after the last attempt) of one training job."""
    resources = desc.get("ResourceConfig") or {}
    count = int(resources.get("InstanceCount") or 1)
    kind, spot = resources.get("InstanceType"), bool(desc.get("EnableManagedSpotTraining"))
    status = desc.get("TrainingJobStatus")
    job_end = epoch(desc.get("TrainingEndTime"))
    transitions = desc.get("SecondaryStatusTransitions") or []
    out: list[Attempt] = []
    current: Attempt | None = None
    waiting = 0.0
    for i, transition in enumerate(transitions):
        name = str(transition.get("Status") or "")
        start = epoch(transition.get("StartTime"))
        end = epoch(transition.get("EndTime"))
        if start is None:
            continue
        if end is None:  # the current transition: up to the next one's start, the job's end, or now
            following = epoch(transitions[i + 1].get("StartTime")) if i + 1 < len(transitions) else None
            end = following or (job_end if status not in ("InProgress", "Stopping") else None) or now
        if name == "Interrupted" and current is not None:  # the instances are gone: the next is a new attempt
            current.ended = name
            out.append(current)
            current = None
        if name in UNBILLED:
            waiting += max(0.0, end - start)
            continue
        if name in END_STATUSES and end - start <= 1e-6:
            if current is not None:
                current.ended = name
                out.append(current)
                current = None
            continue
        if current is None:
            current = Attempt(desc.get("TrainingJobName", "?"), len(out), count, kind, spot)
        current.waiting_before += waiting  # unbilled time before (or, rarely, within) this attempt
        waiting = 0.0
        current.segments.append(Segment(name, start, end))
    if current is not None:
        current.ended = "running" if status in ("InProgress", "Stopping") else str(status)
        out.append(current)
    if out and out[-1].ended == "Interrupted" and status not in ("InProgress", "Stopping"):
        out[-1].ended = f"Interrupted, then {desc.get('SecondaryStatus') or status}"
    return out, waiting


# --- evidence of one attempt from its leader log stream ------------------------------------------------------
@dataclass
class Evidence:
    stream: str | None = None
    reports: list[dict[str, Any]] = field(default_factory=list)
    progress: list[tuple[float, int]] = field(default_factory=list)  # (event time, step)
    error: str | None = None

    @property
    def last(self) -> dict[str, Any] | None:
        return self.reports[-1] if self.reports else None

    def report(self, event: str) -> dict[str, Any] | None:
        return next((r for r in reversed(self.reports) if r.get("event") == event), None)

    @property
    def start_step(self) -> int | None:
        for report in reversed(self.reports):
            if isinstance(report.get("start_step"), int):
                return report["start_step"]
        if self.progress:
            return max(0, self.progress[0][1] - 1)
        return None

    @property
    def step_reached(self) -> int | None:
        steps = [s for _, s in self.progress]
        steps += [r["step"] for r in self.reports if isinstance(r.get("step"), int)]
        if steps:
            return max(steps)
        return None

    @property
    def trained(self) -> bool:
        return bool(self.progress) or any(r.get("first_step_at") for r in self.reports)


def evidence_from(stream: dict[str, Any]) -> Evidence:
    found = Evidence(stream=stream.get("name"), error=stream.get("error"))
    for event in stream.get("events") or []:
        moment, message = float(event[0]), str(event[1])
        report = parse_report(message)
        if report is not None:
            found.reports.append(report)
            continue
        step = parse_progress(message)
        if step is not None:
            found.progress.append((moment, step))
    return found


def assign_streams(attempts: list[Attempt], streams: list[dict[str, Any]]) -> list[Evidence | None]:
    """Each attempt's leader stream: the one whose first event lies in the attempt's window (else by order)."""
    chosen: list[Evidence | None] = [None] * len(attempts)
    timed = sorted((s for s in streams if s.get("first_at") is not None), key=lambda s: s["first_at"])
    untimed = [s for s in streams if s.get("first_at") is None]
    starts = [a.start for a in attempts]
    for stream in timed:
        index = bisect.bisect_right(starts, float(stream["first_at"])) - 1
        if 0 <= index < len(attempts) and chosen[index] is None and \
                float(stream["first_at"]) <= attempts[index].end + STREAM_SLACK_SECONDS:
            chosen[index] = evidence_from(stream)
        else:
            untimed.append(stream)
    free = [i for i, c in enumerate(chosen) if c is None]
    for i, stream in zip(free, sorted(untimed, key=lambda s: str(s.get("name"))), strict=False):
        chosen[i] = evidence_from(stream)
    return chosen


# --- the split of one attempt ----------------------------------------------------------------------------------
@dataclass
class Split:
    parts: dict[str, float]
    details: dict[str, dict[str, float]]
    notes: list[str]
    steps_run: int | None
    step_seconds_mean: float | None
    during_save: bool = False


def _kept_step_seconds(evidence: Evidence, start_step: int, kept_until: int, reached: int,
                       step_total: float) -> float:
    """Step time of this attempt's steps up to `kept_until` (the step the next attempt resumed from)."""
    if kept_until >= reached:
        return step_total
    if kept_until <= start_step:
        return 0.0
    for report in evidence.reports:
        if report.get("event") == "save" and report.get("saved_step") == kept_until:
            return _num(report.get("step_seconds"))
    return step_total * (kept_until - start_step) / max(1, reached - start_step)  # no save record: pro rata


def split_attempt(attempt: Attempt, evidence: Evidence | None, *, kept_until: int | None, final: bool,
                  stall: dict[str, Any] | None) -> Split:
    """The attempt's wall seconds by part (multiplied by the instance count by the caller)."""
    parts = dict.fromkeys(PARTS, 0.0)
    details: dict[str, dict[str, float]] = {"startup": {}}
    notes: list[str] = []
    parts["downloading"] = attempt.window(BEFORE_TRAINING)
    parts["uploading"] = attempt.window("uploading")
    training = attempt.window("training")
    t0, t1 = attempt.training_start, attempt.training_end
    billed = attempt.billed_wall
    last = evidence.last if evidence else None

    def rest() -> float:
        return billed - sum(v for k, v in parts.items() if k != "unaccounted")

    if t0 is None or t1 is None:
        parts["unaccounted"] = rest()
        return Split(parts, details, notes, None, None)
    if evidence is None or (last is None and not evidence.progress):
        why = (evidence.error if evidence and evidence.error else
               f"no GOODPUT or PROGRESS line in {evidence.stream}" if evidence and evidence.stream else
               f"no {LEADER} log stream of {attempt.job} in this attempt's window")
        notes.append(f"{attempt.job} start {attempt.restart}: {training:.0f} s of Training not split ({why})")
        if stall is not None:  # a stall before the first step: from the last progress the job reported to its end
            parts["stalled"] = max(0.0, t1 - max(epoch(stall.get("last_progress_at")) or t1, t0))
        parts["unaccounted"] = rest()
        return Split(parts, details, notes, None, None)
    last_progress = evidence.progress[-1][0] if evidence.progress else None
    if last is None:  # PROGRESS lines only (a training code without GOODPUT reports)
        first_progress = evidence.progress[0][0]
        parts["startup"] = max(0.0, first_progress - t0)
        details["startup"]["other"] = parts["startup"]
        steps = max(0.0, (last_progress or first_progress) - first_progress)
        parts["productive" if final or kept_until is None else "replayed"] = steps
        notes.append(f"{attempt.job} start {attempt.restart}: no GOODPUT report in {evidence.stream}; start-up and "
                     "step time from PROGRESS line times, evaluation and saves not separated")
        parts["unaccounted"] = rest()
        return Split(parts, details, notes, len(evidence.progress), None)

    ended = evidence.report("end")
    script_start = _num(last.get("script_started_at")) or t0
    first_step = _num(last.get("first_step_at")) or None
    last_at = min(max(_num(last.get("at")), t0), t1)
    startup_end = min(first_step, t1) if first_step else last_at
    parts["startup"] = max(0.0, startup_end - t0)
    phases = {k: _num(v) for k, v in (last.get("startup") or {}).items()}
    details["startup"] = {"launch": max(0.0, min(script_start, startup_end) - t0), **phases}
    details["startup"]["other"] = parts["startup"] - sum(details["startup"].values())
    evaluation = _num(last.get("eval_seconds"))
    saving = _num(last.get("save_seconds"))
    steps_total = _num(last.get("step_seconds"))
    during_save = False
    # After the last report: the process's exit (a graceful end), or what it did until it was killed.
    base = max(last_at, startup_end)
    tail = max(0.0, t1 - base)
    if not ended and first_step:
        event = last.get("event")
        if event == "save_begin":  # killed during a save: the loop was blocked on it
            saving, tail, during_save = saving + tail, 0.0, True
        elif event == "eval_begin":
            evaluation, tail = evaluation + tail, 0.0
        elif last_progress is not None and last_progress > base:  # steps after the last report
            after = min(last_progress, t1) - base
            steps_total += after
            tail -= after
    steps_run = int(last.get("steps") or 0)
    if not first_step:  # never reached its first step: start-up until the end (or until its last report)
        parts["startup"] += 0.0 if ended else tail
        details["startup"]["other"] += 0.0 if ended else tail
        tail = tail if ended else 0.0
    start_step = evidence.start_step or 0
    reached = max(evidence.step_reached or start_step, start_step)
    if final or kept_until is None:
        kept = steps_total
        if not final:
            notes.append(f"{attempt.job} start {attempt.restart}: the next attempt's log does not say where it "
                         "resumed, so its steps are counted as kept")
    else:
        kept = min(steps_total, _kept_step_seconds(evidence, start_step, kept_until, reached, steps_total))
    lost = max(0.0, steps_total - kept)
    parts["productive"], parts["evaluation"], parts["checkpointing"] = kept, evaluation, saving
    if final and attempt.ended == "running":  # training now: the step in progress
        parts["productive"] += tail
        parts["replayed"] = lost
    elif final:  # the processes' exit after the final model was written: the end of the job, before its upload
        parts["uploading"] += tail
        details["uploading"] = {"exit": tail, "upload": attempt.window("uploading")}
        parts["replayed"] = lost
    else:  # everything after the last durable checkpoint of a lost attempt
        parts["replayed"] = lost + tail
        details["replayed"] = {"lost_steps": lost, "after_checkpoint" if ended else "after_last_step": tail}
    if stall is not None:
        since = max(epoch(stall.get("last_progress_at")) or t1, first_step or t0)
        parts["stalled"] = remaining = max(0.0, t1 - since)
        for name in ("replayed", "productive"):  # what is left comes out of unaccounted below
            take = min(parts[name], remaining)
            parts[name] -= take
            remaining -= take
    parts["unaccounted"] = rest()
    mean = steps_total / steps_run if steps_run and ended else (
        steps_total / max(1, reached - start_step) if reached > start_step else None)
    return Split(parts, details, notes, steps_run if ended else reached - start_step, mean, during_save)


# --- the run ---------------------------------------------------------------------------------------------------
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


def ledger(jobs: list[dict[str, Any]], streams: dict[str, list[dict[str, Any]]],
           stalls: list[dict[str, Any]] | None = None, *, now: float | None = None,
           other_jobs: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The run's ledger (summary.json's `goodput`): per attempt and for the run."""
    now = now if now is not None else datetime.now(UTC).timestamp()
    stalls = [s for s in stalls or [] if isinstance(s, dict)]
    attempts: list[Attempt] = []
    evidence: list[Evidence | None] = []
    waiting_after = 0.0
    reported = billable = 0.0
    job_reported: dict[str, float] = {}  # an ended job's TrainingTimeInSeconds x InstanceCount
    for desc in jobs:
        found, after = attempts_of(desc, now)
        evidence += assign_streams(found, streams.get(desc.get("TrainingJobName", ""), []))
        attempts += found
        waiting_after += after
        count = int((desc.get("ResourceConfig") or {}).get("InstanceCount") or 1)
        reported += _num(desc.get("TrainingTimeInSeconds")) * count
        billable += _num(desc.get("BillableTimeInSeconds")) * count
        if desc.get("TrainingTimeInSeconds") and desc.get("TrainingJobStatus") not in ("InProgress", "Stopping"):
            job_reported[desc.get("TrainingJobName", "")] = _num(desc["TrainingTimeInSeconds"]) * count
    rows: list[dict[str, Any]] = []
    interruptions: list[dict[str, Any]] = []
    totals = dict.fromkeys(PARTS, 0.0)
    run_details: dict[str, dict[str, float]] = {}
    notes: list[str] = []
    for i, (attempt, found) in enumerate(zip(attempts, evidence, strict=True)):
        final = i == len(attempts) - 1
        following = evidence[i + 1] if not final else None
        kept_until = following.start_step if following is not None else None
        split = split_attempt(attempt, found, kept_until=kept_until, final=final, stall=_stall_for(attempt, stalls))
        count = attempt.instance_count
        parts = {k: v * count for k, v in split.parts.items()}
        for k, v in parts.items():
            totals[k] += v
        for part, detail in split.details.items():
            into = run_details.setdefault(part, {})
            for k, v in detail.items():
                into[k] = into.get(k, 0.0) + v * count
        notes += split.notes
        billed = attempt.billed_wall * count
        last = found.last if found else None
        rows.append({
            "attempt": i, "job_name": attempt.job, "restart": attempt.restart, "instance_type": attempt.instance_type,
            "instance_count": count, "spot": attempt.spot, "ended": attempt.ended,
            "started_at": _iso(attempt.start), "ended_at": _iso(attempt.end),
            "billed_seconds": round(billed, 3), "waiting_seconds": round(attempt.waiting_before, 3),
            "parts": _rounded(parts), "ratio": _share(parts, billed),
            "details": {k: _rounded({n: v * count for n, v in d.items()}) for k, d in split.details.items() if d},
            "start_step": found.start_step if found else None,
            "step_reached": found.step_reached if found else None,
            "steps_run": split.steps_run,
            "step_seconds": round(split.step_seconds_mean, 5) if split.step_seconds_mean else None,
            "saves": (last or {}).get("saves"), "evals": (last or {}).get("evals"),
            "tokenize_cache": (last or {}).get("tokenize_cache"),
            "log_stream": found.stream if found else None,
        })
        if not final:
            interruptions.append(_interruption(attempt, found, attempts[i + 1], following, split, rows[-1],
                                               stalled=_stall_for(attempt, stalls) is not None))
    from_transitions = sum(r["billed_seconds"] for r in rows)
    for job, seconds in job_reported.items():  # what SageMaker bills is the reference: the rest is unaccounted
        mine = [r for r in rows if r["job_name"] == job]
        if not mine:
            continue
        gap = round(seconds - sum(r["billed_seconds"] for r in mine), 3)
        row = mine[-1]
        row["billed_seconds"] = round(row["billed_seconds"] + gap, 3)
        row["parts"]["unaccounted"] = round(row["parts"]["unaccounted"] + gap, 3)
        row.setdefault("details", {}).setdefault("unaccounted", {})["reported_vs_transitions"] = gap
        row["ratio"] = _share(row["parts"], row["billed_seconds"])
        totals["unaccounted"] += gap
        run_details.setdefault("unaccounted", {})
        run_details["unaccounted"]["reported_vs_transitions"] = run_details["unaccounted"].get(
            "reported_vs_transitions", 0.0) + gap
    billed_total = sum(r["billed_seconds"] for r in rows)
    waiting = sum(a.waiting_before for a in attempts) + waiting_after
    return {
        "format": FORMAT,
        "billed_seconds": round(billed_total, 3),
        "transitions_billed_seconds": round(from_transitions, 3),
        "reported_billed_seconds": round(reported, 3),
        "billable_seconds": round(billable, 3),
        "waiting_seconds": round(waiting, 3),
        "parts": _rounded(totals),
        "ratio": _share(totals, billed_total),
        "details": {part: _rounded(detail) for part, detail in run_details.items() if detail},
        "attempts": rows,
        "interruptions": interruptions,
        "other_jobs": other_jobs or [],
        "notes": notes,
    }


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


def _interruption(attempt: Attempt, found: Evidence | None, nxt: Attempt, following: Evidence | None,
                  split: Split, row: dict[str, Any], *, stalled: bool = False) -> dict[str, Any]:
    logged = reached = found.step_reached if found else None
    resumed = following.start_step if following else None
    source = f"the last PROGRESS line of {found.stream}" if found else None
    start = found.start_step if found else None
    if logged is not None and resumed is not None and start is not None and resumed > max(logged, start):
        # The next attempt resumed from a checkpoint this attempt saved after its last line that reached the
        # log (a SIGTERM save whose output was lost with the process relaying it): it reached at least that.
        reached = resumed
        source = (f"checkpoint-{resumed}, which it saved after its last logged line (step {logged} in "
                  f"{found.stream if found else '?'})")
    unknown = []
    if reached is None:
        if found is None:
            unknown.append(f"no {LEADER} log stream of {attempt.job} for this attempt")
        elif found.error:
            unknown.append(f"its log {found.stream} could not be read: {found.error}")
        elif found.reports and not found.trained:
            reached = found.start_step  # it never reached its first step: it stopped where it started
        else:
            unknown.append(f"its log {found.stream} has no PROGRESS line")
    if resumed is None:
        unknown.append("the next attempt's log does not say where it resumed" if following else
                       f"no {LEADER} log stream of {nxt.job} for the next attempt")
    lost = reached - resumed if reached is not None and resumed is not None else None
    count = attempt.instance_count
    replayed = row["parts"]["replayed"]
    restart = (nxt.window(BEFORE_TRAINING) + _startup_wall(nxt, following))
    how = "stall" if stalled else {"Interrupted": "spot interruption"}.get(attempt.ended, attempt.ended or "ended")
    return {
        "job": attempt.job, "attempt": row["attempt"], "restart": attempt.restart, "how": how,
        "step_reached": reached, "step_logged": logged, "step_reached_from": source if reached is not None else None,
        "reached_at": _iso(found.progress[-1][0]) if found and found.progress else None,
        "during_save": split.during_save,
        "resumed_from_step": resumed, "resumed_by_job": nxt.job, "resumed_at": _iso(nxt.start),
        "lost_steps": max(0, lost) if lost is not None else None,
        "lost_minutes": round(replayed / count / 60, 3) if lost is not None else None,
        "lost_instance_seconds": round(replayed, 3),
        "restart_seconds": round(restart, 3),
        "unknown": "; ".join(unknown) or None,
    }


def _startup_wall(attempt: Attempt, found: Evidence | None) -> float:
    t0 = attempt.training_start
    first = (found.last or {}).get("first_step_at") if found else None
    if t0 is None:
        return 0.0
    return max(0.0, (_num(first) if first else (attempt.training_end or t0)) - t0)


# --- words ------------------------------------------------------------------------------------------------------
def _seconds(value: float) -> str:
    value = float(value)
    if abs(value) < 120:
        return f"{value:.0f} s"
    if abs(value) < 7200:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.2f} h"


def summary_lines(goodput: dict[str, Any] | None) -> list[str]:
    """The goodput line and the parts that cost more than 5% (unaccounted always), for notifications and
    `runctl status`."""
    if not goodput or not goodput.get("billed_seconds"):
        return []
    billed = float(goodput["billed_seconds"])
    parts = goodput.get("parts") or {}
    ratio = goodput.get("ratio") or 0.0
    attempts = goodput.get("attempts") or []
    lines = [f"Goodput: {ratio:.1%} of {_seconds(billed)} billed instance time was productive training "
             f"({len(attempts)} attempt(s); waiting for instances, unbilled: {_seconds(goodput.get('waiting_seconds') or 0)})"]
    details = goodput.get("details") or {}
    for name in PARTS:
        value = float(parts.get(name) or 0.0)
        if name != "unaccounted" and value <= SHOW_SHARE * billed:
            continue
        extra = ""
        top = sorted(((k, v) for k, v in (details.get(name) or {}).items() if v >= 0.5), key=lambda kv: -kv[1])[:4]
        if top:
            extra = " (" + ", ".join(f"{k.replace('_', ' ')} {_seconds(v)}" for k, v in top) + ")"
        lines.append(f"  {name:<13} {value / billed:6.1%}  {_seconds(value)}{extra}")
    return lines


def interruption_line(record: dict[str, Any]) -> str:
    """One interruption as it happened; unknown values said as unknown."""
    reached = record.get("step_reached")
    resumed = record.get("resumed_from_step")
    where = f"step {reached} reached" if reached is not None else "step reached unknown"
    if record.get("during_save"):
        where += " (during a checkpoint save)"
    back = (f"resumed from step {resumed}" if resumed else "restarted from scratch (step 0)") if resumed is not None \
        else "resumed from an unknown step"
    if record.get("lost_steps") is not None:
        lost = f"{record['lost_steps']} step(s), {record.get('lost_minutes') or 0:.2f} min of training lost"
    else:
        lost = "work lost unknown"
    line = (f"{record.get('how')} of {record.get('job')}: {where}, {back} by {record.get('resumed_by_job')}: {lost}; "
            f"the restart spent {_seconds(record.get('restart_seconds') or 0)} on download and start-up again")
    if record.get("unknown"):
        line += f" (unknown: {record['unknown']})"
    return line
