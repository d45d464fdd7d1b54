"""The stall watch from outside the job: for the case the job cannot report a stall itself (a frozen instance,
a dead host, a watchdog that could not act). Pure, except `read_heartbeat`.

The training code's stall watchdog on global rank 0 (training_code/hftrain/stall/watchdog.py) rewrites the
heartbeat file beside the checkpoints every 30 s (contract/heartbeat.py: `{job, step, phase, kind, moved_at, at,
limit_seconds}`; `moved_at`: the last progress, `limit_seconds`: the in-job limit in effect), which SageMaker's
checkpoint sync uploads. CheckJob reads it while the job is Training: when this job's last progress is older than the in-job
limit plus `MARGIN_MINUTES` (upload delay, the in-job watchdog's own time to act), or when no heartbeat of this
job's current Training period (a spot restart begins a new one) arrived for the start-up limit plus the
margin after that period began (`stall.startup_minutes`; `auto`: derived from the start-ups the run's attempts
measured, contract/startup_limit.py, read from `_progress.json`), the job is stopped as
retryable, saying why. The state between looks travels in the state machine's `$.status` (`stall_watch`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from contract import heartbeat as heartbeat_file
from contract import stall_records, startup_limit
from hfsm_lambda.bounded_reads import read_object
from hfsm_lambda.neutral_text import printable
from hfsm_lambda.watch import durability

MARGIN_MINUTES = 5.0
# The billed phases before train.py runs (SageMaker's SecondaryStatus values: the training image's pull and the
# input data's download; `Starting`, the wait for instances, is not billed and MaxWaitTimeInSeconds bounds it)
BEFORE_TRAINING = ("DownloadingTrainingImage", "Downloading")
# The spec's bounds of stall.minutes and stall.startup_minutes (spec/run_spec.py): the heartbeat is the job's
# word, so the limit it states is held to what the run's spec allows (an "auto" limit to the field's maximum).
LIMIT_MINUTES_LOW, LIMIT_MINUTES_HIGH = 0.05, 10080.0


def read_heartbeat(s3: Any, checkpoint_uri: str) -> dict[str, Any] | None:
    """The job's heartbeat (contract/heartbeat.py, strictly parsed, at most its MAX_CHARS read); None when there
    is none or it is not one."""
    bucket, _, prefix = checkpoint_uri.removeprefix("s3://").partition("/")
    try:
        body = read_object(s3, bucket, heartbeat_file.key(prefix), max_bytes=heartbeat_file.MAX_CHARS)
    except Exception:  # noqa: BLE001 - none yet, unreadable or oversize: the watch counts from the Training start
        return None
    return heartbeat_file.parse_heartbeat(body)


def read_measured_startup(s3: Any, checkpoint_uri: str) -> float | None:
    """The longest start-up the run's attempts measured (seconds), from the progress file beside the
    checkpoints; None when none is known."""
    return startup_limit.measured(durability.read_progress(s3, checkpoint_uri))


def allowed_limit(stated: float, stall: dict[str, Any]) -> float:
    """The heartbeat's limit (seconds) held within the spec's: at least the field's minimum, at most the larger of
    stall.minutes (its maximum when "auto") and stall.startup_minutes."""
    minutes, startup = stall.get("minutes"), stall.get("startup_minutes")
    longest = max(*(float(value) if isinstance(value, int | float) and not isinstance(value, bool)
                    else LIMIT_MINUTES_HIGH for value in (minutes, startup)))
    return min(max(stated, LIMIT_MINUTES_LOW * 60), min(longest, LIMIT_MINUTES_HIGH) * 60)


def _strict(heartbeat: dict[str, Any] | None) -> dict[str, Any] | None:
    """The heartbeat as its strict reader takes it (whoever built the dict), else None."""
    try:
        return heartbeat_file.parse_heartbeat(heartbeat_file.format_heartbeat(heartbeat)) if heartbeat else None
    except (TypeError, ValueError):
        return None


def rank_line(entry: dict[str, Any]) -> str:
    """One rank's phase as the heartbeat shows it: "rank 1 (algo-2): training, step 57"."""
    return f"rank {entry.get('rank')} ({entry.get('host')}): {entry.get('doing') or entry.get('kind')}"


def startup_seconds(stall: dict[str, Any], measured: float | None, *, download: bool = False) -> tuple[float, str]:
    """The start-up limit before the first heartbeat (seconds, its name): the spec's minutes, or `auto` from the
    longest start-up the run measured (`measured`, seconds; None: the prior). `download`: for the phases before
    train.py (image pull, data download), which the measured start-up does not include: under `auto` never less
    than the prior."""
    try:
        minutes = startup_limit.parse(stall.get("startup_minutes"))
    except ValueError:  # a state written by hand: the rule, not a crash of the job check
        minutes = None
    seconds, name = startup_limit.seconds(minutes, measured), startup_limit.describe(minutes, measured)
    if download and minutes is None and seconds < startup_limit.PRIOR_MINUTES * 60:
        return startup_limit.PRIOR_MINUTES * 60, (f"stall.startup_minutes=auto: {startup_limit.PRIOR_MINUTES:g} min "
                                                  "(the prior; the measured start-ups do not include downloads)")
    return seconds, name


def billed_start_phase(desc: dict[str, Any]) -> tuple[str, datetime] | None:
    """(SecondaryStatus, its start) while the job is in a billed phase before train.py runs (BEFORE_TRAINING:
    the training image's pull, the input data's download), else None."""
    status = desc.get("SecondaryStatus")
    if status not in BEFORE_TRAINING:
        return None
    for transition in reversed(desc.get("SecondaryStatusTransitions") or []):
        if transition.get("Status") == status:
            began = transition.get("StartTime")
            if isinstance(began, str):
                began = datetime.fromisoformat(began.replace("Z", "+00:00"))
            return (status, began) if isinstance(began, datetime) else None
    return None


def watch(previous: dict[str, Any] | None, heartbeat: dict[str, Any] | None, *, job_name: str, now: datetime,
          since: datetime | None, stall: dict[str, Any], measured_startup: float | None = None,
          before_training: tuple[str, datetime] | None = None) -> tuple[dict[str, Any], bool]:
    """(report for $.status.stall_watch, stop now?); `measured_startup`: the longest start-up the run's attempts
    measured (seconds, from `_progress.json`), for `stall.startup_minutes: auto`; `before_training`: the billed
    phase before train.py the job is in (`billed_start_phase`), when it is not Training."""
    prev = dict(previous or {})
    report: dict[str, Any] = {"stopped_at": prev.get("stopped_at"), "stop_reason": prev.get("stop_reason")}
    if stall.get("action", "retry") == "off" or (since is None and before_training is None):
        return {**report, "watching": False}, False
    margin = MARGIN_MINUTES * 60
    t = now.timestamp()
    # this job's heartbeat of its current Training period (after a spot restart, the lost instances' heartbeat
    # says nothing about the new start-up)
    heartbeat = _strict(heartbeat)
    mine = heartbeat if heartbeat and since is not None and heartbeat["job"] == job_name and \
        heartbeat["at"] >= since.timestamp() else None
    saying = "Training"
    if since is None and before_training is not None:  # the image pull or the data download, before train.py
        saying, began = before_training
        limit, limit_name = startup_seconds(stall, measured_startup, download=True)
        quiet = t - began.timestamp()
        where = f"in {printable(saying)} (before train.py starts; {limit_name})"
    elif mine is None:
        limit, limit_name = startup_seconds(stall, measured_startup)
        quiet = t - since.timestamp()
        where = f"before its first heartbeat (start-up; {limit_name})"
    else:
        limit = allowed_limit(mine["limit_seconds"], stall)
        quiet = t - max(mine["moved_at"], since.timestamp())
        where = (f"at step {mine['step']} ({printable(str(mine.get('doing') or mine['phase']))}); its watchdog last "
                 f"wrote {t - mine['at']:.0f} s ago")
        if mine.get("ranks"):
            where += "; ranks: " + ", ".join(printable(rank_line(r)) for r in mine["ranks"][:8])
    report.update(watching=True, quiet_minutes=round(quiet / 60, 1), threshold_minutes=round((limit + margin) / 60, 1),
                  step=(mine or {}).get("step"), doing=(mine or {}).get("doing"),
                  ranks=[rank_line(r) for r in (mine or {}).get("ranks") or []])
    if quiet <= limit + margin or prev.get("stopped_at"):
        return report, False
    reason = stall_records.outside_message(
        f"job {job_name} made no progress for {quiet / 60:.1f} min {where}, while it says {printable(saying)} (limit "
        f"{limit / 60:.1f} min + {MARGIN_MINUTES:g} min margin); the job could not report it itself (a frozen "
        "instance or a dead host?): stopped so that the next attempt resumes from the last durable checkpoint")
    report.update(stopped_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"), stop_reason=reason,
                  record={"job": job_name, "last_progress_at": round(t - quiet, 3), "detected_at": round(t, 3),
                          "rank": None, "host": None, "step": (mine or {}).get("step"),
                          "phase": (mine or {}).get("phase") or ("start-up" if saying == "Training" else saying),
                          "outside": True,
                          "limit": f"{limit / 60:.1f} min + {MARGIN_MINUTES:g} min margin",
                          "reason": reason, "ranks": (mine or {}).get("ranks") or []})
    return report, True


def add_record(s3: Any, checkpoint_uri: str, record: dict[str, Any], put: Any) -> None:
    """The outside watch's stop as a stall record in `_stalls.json` beside the checkpoints (the ledger's `stalled`,
    the summary's attempt outcome read it there, as they read the job's own); `put(uri, text)` writes it."""
    bucket, _, prefix = checkpoint_uri.removeprefix("s3://").partition("/")
    try:
        body = s3.get_object(Bucket=bucket, Key=stall_records.key(prefix))["Body"].read()
    except Exception:  # noqa: BLE001 - none yet
        body = None
    records = (stall_records.parse_records(body) or []) if body else []
    put(f"s3://{bucket}/{stall_records.key(prefix)}", stall_records.format_records([*records, record]))
