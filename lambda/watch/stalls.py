"""The stall watch from outside the job: for the case the job cannot report a stall itself (a frozen instance,
a dead host, a watchdog that could not act). Pure, except `read_heartbeat`.

The training code's stall watchdog on global rank 0 (training_code/hftrain/stall/watchdog.py) rewrites the
heartbeat file beside the checkpoints every 30 s (contract/heartbeat.py: `{job, step, phase, kind, moved_at, at,
limit_seconds}`; `moved_at`: the last progress, `limit_seconds`: the in-job limit in effect), which SageMaker's
checkpoint sync uploads. CheckJob reads it while the job is Training: when this job's last progress is older than the in-job
limit plus `MARGIN_MINUTES` (upload delay, the in-job watchdog's own time to act), or when no heartbeat of this
job's current Training period (a spot restart begins a new one) arrived for `stall.startup_minutes` plus the
margin after that period began, the job is stopped as
retryable, saying why. The state between looks travels in the state machine's `$.status` (`stall_watch`).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from contract import heartbeat as heartbeat_file
from contract import stall_records

MARGIN_MINUTES = 5.0


def read_heartbeat(s3: Any, checkpoint_uri: str) -> dict[str, Any] | None:
    bucket, _, prefix = checkpoint_uri.removeprefix("s3://").partition("/")
    try:
        body = s3.get_object(Bucket=bucket, Key=heartbeat_file.key(prefix))["Body"].read()
    except Exception:  # noqa: BLE001 - none yet, or unreadable: the watch then counts from the Training start
        return None
    return heartbeat_file.parse_heartbeat(body)


def rank_line(entry: dict[str, Any]) -> str:
    """One rank's phase as the heartbeat shows it: "rank 1 (algo-2): training, step 57"."""
    return f"rank {entry.get('rank')} ({entry.get('host')}): {entry.get('doing') or entry.get('kind')}"


def watch(previous: dict[str, Any] | None, heartbeat: dict[str, Any] | None, *, job_name: str, now: datetime,
          since: datetime | None, stall: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """(report for $.status.stall_watch, stop now?)."""
    prev = dict(previous or {})
    report: dict[str, Any] = {"stopped_at": prev.get("stopped_at"), "stop_reason": prev.get("stop_reason")}
    if stall.get("action", "retry") == "off" or since is None:
        return {**report, "watching": False}, False
    margin = MARGIN_MINUTES * 60
    t = now.timestamp()
    # this job's heartbeat of its current Training period (after a spot restart, the lost instances' heartbeat
    # says nothing about the new start-up)
    mine = heartbeat if heartbeat and heartbeat.get("job") == job_name and \
        float(heartbeat.get("at") or 0) >= since.timestamp() else None
    if mine is None:
        limit = float(stall.get("startup_minutes") or 60) * 60
        quiet = t - since.timestamp()
        where = "before its first heartbeat (start-up)"
    else:
        limit = float(mine.get("limit_seconds") or float(stall.get("startup_minutes") or 60) * 60)
        quiet = t - max(float(mine.get("moved_at") or 0), since.timestamp())
        where = (f"at step {mine.get('step')} ({mine.get('doing') or mine.get('phase')}); its watchdog last wrote "
                 f"{t - float(mine.get('at') or 0):.0f} s ago")
        if mine.get("ranks"):
            where += "; ranks: " + ", ".join(rank_line(r) for r in mine["ranks"][:8])
    report.update(watching=True, quiet_minutes=round(quiet / 60, 1), threshold_minutes=round((limit + margin) / 60, 1),
                  step=(mine or {}).get("step"), doing=(mine or {}).get("doing"),
                  ranks=[rank_line(r) for r in (mine or {}).get("ranks") or []])
    if quiet <= limit + margin or prev.get("stopped_at"):
        return report, False
    reason = stall_records.outside_message(
        f"job {job_name} made no progress for {quiet / 60:.1f} min {where}, while it says Training (limit "
        f"{limit / 60:.1f} min + {MARGIN_MINUTES:g} min margin); the job could not report it itself (a frozen "
        "instance or a dead host?): stopped so that the next attempt resumes from the last durable checkpoint")
    report.update(stopped_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"), stop_reason=reason,
                  record={"job": job_name, "last_progress_at": round(t - quiet, 3), "detected_at": round(t, 3),
                          "rank": None, "host": None, "step": (mine or {}).get("step"),
                          "phase": (mine or {}).get("phase") or "start-up", "outside": True,
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
