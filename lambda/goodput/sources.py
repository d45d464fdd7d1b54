"""The evidence the goodput ledger (ledger.py) is computed from, read from AWS: the run's training jobs
(DescribeTrainingJob), the leader host's log streams of each job (CloudWatch Logs, one stream per instance start)
and the stall records beside the checkpoints. Used by Finish and by `runctl status`; best effort: a part that
cannot be read is said in the ledger's notes, never guessed.

Every read is bounded (bounded_reads.py): a run's log reads share one budget of GetLogEvents calls and bytes
(a stream longer than its share is read from its head and from its tail, the ledger then says `complete: false`
and what was left in its notes); the stall records file is read up to stall_records.MAX_CHARS.

Calls: sagemaker:DescribeTrainingJob, logs:DescribeLogStreams on the log group /aws/sagemaker/TrainingJobs,
logs:GetLogEvents on the project's streams in it (GetLogEvents takes a log-stream ARN, so the grant stays on the
project's job names; FilterLogEvents would need the whole group), s3:GetObject of
the stall records' file beside the checkpoints (contract/stall_records.py).
"""

from __future__ import annotations

import logging
from typing import Any

from botocore.exceptions import BotoCoreError, ClientError

from contract import goodput_line, progress_lines, recovery_line, stall_records
from hfsm_lambda.bounded_reads import LogBudget, ObjectTooLarge, read_object, read_stream
from hfsm_lambda.goodput import ledger as goodput
from hfsm_lambda.goodput.values import LEADER

logger = logging.getLogger("hfsm")

LOG_GROUP = "/aws/sagemaker/TrainingJobs"
MAX_STREAMS_PER_JOB = 50  # the leader's streams: one per instance start (spot restarts)


def _code(err: Exception) -> str:
    if isinstance(err, ClientError):
        return str(err.response.get("Error", {}).get("Code", "")) or type(err).__name__
    return type(err).__name__


def _is_evidence(message: str) -> bool:
    return goodput_line.is_line(message) or progress_lines.is_progress_line(message) or \
        recovery_line.is_line(message)


def leader_streams(logs: Any, job_name: str, budget: LogBudget | None = None) -> list[dict[str, Any]]:
    """The leader host's streams of one job, with their GOODPUT and PROGRESS lines (goodput.ledger's format).

    Only the job's own streams (`<job>/algo-1-<n>`: what the job prints) are evidence: a name the listing returns
    outside that prefix is ignored, so printing GOODPUT lines moves only the printing job's ledger. (The shared
    SageMaker role may PutLogEvents anywhere in the group, so code of a job's choosing could still write into
    another job's stream: docs/security.md, residual risks.)"""
    budget = budget or LogBudget()
    prefix = f"{job_name}/{LEADER}-"
    try:
        pages = logs.get_paginator("describe_log_streams").paginate(
            logGroupName=LOG_GROUP, logStreamNamePrefix=prefix, PaginationConfig={"MaxItems": MAX_STREAMS_PER_JOB})
        described = [s for page in pages for s in page.get("logStreams", [])
                     if str(s.get("logStreamName", "")).startswith(prefix)]
    except ClientError as err:
        if _code(err) == "ResourceNotFoundException":
            return []
        return [{"name": None, "error": f"cannot list the log streams {LOG_GROUP}/{prefix}*: {_code(err)}"}]
    except BotoCoreError as err:
        return [{"name": None, "error": f"cannot list the log streams {LOG_GROUP}/{prefix}*: {err}"}]
    out = []
    for stream in sorted(described, key=lambda s: s["logStreamName"]):
        name = stream["logStreamName"]
        first = stream.get("firstEventTimestamp") or stream.get("creationTime")
        try:
            read = read_stream(logs, LOG_GROUP, name, budget, _is_evidence)
        except (ClientError, BotoCoreError) as err:
            out.append({"name": name, "first_at": first / 1000 if first else None,
                        "error": f"cannot read {LOG_GROUP}/{name}: {_code(err)}", "events": []})
            continue
        first_at = read.events[0][0] if read.events else (first / 1000 if first else None)
        out.append({"name": name, "first_at": first_at, "events": read.events,
                    **({} if read.complete else {"incomplete": read.note})})
    return out


def read_stalls(s3: Any, checkpoint_uri: str) -> list[dict[str, Any]]:
    """The stall records under the checkpoint prefix (ledger.py, "Stalled"); [] when there are none."""
    bucket, _, prefix = checkpoint_uri.removeprefix("s3://").partition("/")
    key = stall_records.key(prefix)
    try:
        body = read_object(s3, bucket, key, max_bytes=stall_records.MAX_CHARS)
    except ClientError as err:
        if _code(err) not in ("NoSuchKey", "404", "NotFound"):
            logger.warning("cannot read s3://%s/%s: %s", bucket, key, _code(err))
        return []
    except ObjectTooLarge as err:
        logger.warning("%s: stall records ignored", err)
        return []
    records = stall_records.parse_records(body)
    if records is None:
        logger.warning("s3://%s/%s is not a stall records file: stall records ignored", bucket, key)
        return []
    return records


def run_ledger(sm: Any, logs: Any, s3: Any, run: dict[str, Any], *, other_jobs: list[dict[str, Any]] | None = None,
               now: float | None = None) -> dict[str, Any]:
    """The run's goodput ledger from what AWS holds now; {"format", "error"} when it cannot be computed. The
    ledger has `complete`: false, and says why in `incomplete`, when a read's bound left part of a log unread."""
    budget = LogBudget()
    try:
        jobs, streams = [], {}
        for name in run["job_names"]["train"]:
            try:
                desc = sm.describe_training_job(TrainingJobName=name)
            except ClientError as err:  # an attempt never started: nothing billed
                logger.info("no training job %s: %s", name, _code(err))
                continue
            jobs.append(desc)
            streams[name] = leader_streams(logs, name, budget)
        stalls = read_stalls(s3, run["uris"]["checkpoint"])
        out = goodput.ledger(jobs, streams, stalls, now=now, other_jobs=other_jobs)
        left = [s["incomplete"] for found in streams.values() for s in found if s.get("incomplete")]
        out.update(complete=not left, incomplete=left)
        out["notes"] = [*out.get("notes", []), *left]
        return out
    except Exception as err:  # noqa: BLE001 - the ledger must never fail the run summary
        logger.warning("goodput ledger not computed: %s", err, exc_info=True)
        return {"format": goodput.FORMAT, "complete": False, "error": f"{type(err).__name__}: {err}"[:2000]}
