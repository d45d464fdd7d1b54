"""`_stalls.json` and `_stalls/<job>/rank-<rank>.txt`: what a stall left beside the checkpoints, and its message.

Producer: the stall watchdog (hftrain/stall/watchdog.py, hftrain/stall/verdict.py): the rank that claimed a stall
appends its record to `<checkpoint dir>/_stalls.json` (`{"stalls": [...]}`, the newest MAX_RECORDS), every rank that
can still run writes its threads' stacks to `_stalls/<job>/rank-<rank>.txt`, and each says the stall in a line
that starts with MESSAGE_PREFIX (the job's FailureReason). Consumers: the goodput ledger's `stalled` part
(lambda/goodput/sources.py), the run's links to the stacks (lambda/handlers.py), the local job runner
(local_mode/sagemaker/training_job.py shows the stall line once), the job classification (lambda/runs/outcomes.py:
a FailureReason that says a stall). The pipeline's outside watch says its own stops in the same words
(lambda/watch/stalls.py, `outside_message`).
"""

from __future__ import annotations

import os
import re
from typing import Any

from contract.jsontext import dumps, loads_object

FILE_NAME = "_stalls.json"
STACKS_DIR = "_stalls"
MESSAGE_PREFIX = "stall watchdog: "
RANK_LINE_PREFIX = f"{MESSAGE_PREFIX}rank "  # the line that declares a stall (the first named rank)
_MESSAGE_RE = re.compile(r"\b" + re.escape(MESSAGE_PREFIX))
MAX_RECORDS = 100
MAX_CHARS = 16 * 1024 * 1024


def outside_message(text: str) -> str:
    """The stall message of the pipeline's outside watch (CheckJob stops the job: lambda/watch/stalls.py)."""
    return f"{MESSAGE_PREFIX}(from outside the job, CheckJob) {text}"


def says_stall(reason: str) -> bool:
    """Whether a job's FailureReason (or any text) holds a stall message (a prefix such as `AlgorithmError: ` may
    come before it)."""
    return bool(_MESSAGE_RE.search(reason))


def format_records(records: list[dict[str, Any]]) -> str:
    """The file's text holding the newest MAX_RECORDS of `records`; ValueError on a non-finite number."""
    return dumps({"stalls": records[-MAX_RECORDS:]}, what=FILE_NAME, indent=1)


def parse_records(text: str | bytes | None) -> list[dict[str, Any]] | None:
    """The stall records of the file's text ([] for a file without any); None when it is not the format."""
    value = loads_object(text, max_chars=MAX_CHARS)
    if value is None:
        return None
    records = value.get("stalls")
    return [r for r in records if isinstance(r, dict)] if isinstance(records, list) else []


def append_record(checkpoint_dir: str, record: dict[str, Any]) -> None:
    """Append `record` to `<checkpoint_dir>/_stalls.json` (earlier attempts' records kept; written to a temporary
    file, then renamed). OSError or ValueError when it cannot be written."""
    path = os.path.join(checkpoint_dir, FILE_NAME)
    try:
        with open(path, encoding="utf-8") as handle:
            stalls = parse_records(handle.read(MAX_CHARS + 1)) or []
    except OSError:
        stalls = []
    os.makedirs(checkpoint_dir, exist_ok=True)
    tmp = os.path.join(checkpoint_dir, f".{FILE_NAME}.{os.getpid()}")
    with open(tmp, "w", encoding="utf-8") as handle:
        handle.write(format_records([*stalls, record]))
    os.replace(tmp, path)


def key(prefix: str) -> str:
    """The file's key below a checkpoint prefix."""
    return (prefix.rstrip("/") + "/" if prefix else "") + FILE_NAME


def stacks_prefix(checkpoint_uri: str, job: str) -> str:
    """Where the stacks of `job`'s ranks lie below the run's checkpoint prefix (a folder, ending in '/')."""
    return f"{checkpoint_uri.rstrip('/')}/{STACKS_DIR}/{job}/"


def stacks_file(rank: int) -> str:
    return f"rank-{rank}.txt"
