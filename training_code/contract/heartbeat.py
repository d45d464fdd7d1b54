"""`_heartbeat.json`: global rank 0's progress, for the stall watch from outside the job.

Producer: the stall watchdog of global rank 0 (hftrain/stall/watchdog.py) rewrites `<checkpoint dir>/_heartbeat.json`
every WRITE_SECONDS; SageMaker's checkpoint sync uploads it to the run's checkpoint prefix. Consumer: CheckJob's
outside stall watch (lambda/watch/stalls.py), which reads it from S3 while the job is Training.

    {"job": ..., "step": 57, "phase": "train", "kind": "train", "moved_at": <unix s>, "at": <unix s>,
     "limit_seconds": 600.0}

`moved_at`: the last progress; `at`: when the watchdog wrote it; `limit_seconds`: the in-job limit in effect.
"""

from __future__ import annotations

from typing import Any

from contract.jsontext import dumps, loads_object

FILE_NAME = "_heartbeat.json"
WRITE_SECONDS = 30.0
MAX_CHARS = 64 * 1024
FIELDS = ("job", "step", "phase", "kind", "moved_at", "at", "limit_seconds")


def record(*, job: str, step: int | None, phase: str, kind: str, moved_at: float, at: float,
           limit_seconds: float) -> dict[str, Any]:
    return {"job": job, "step": step, "phase": phase, "kind": kind, "moved_at": round(moved_at, 3),
            "at": round(at, 3), "limit_seconds": round(limit_seconds, 1)}


def format_heartbeat(heartbeat: dict[str, Any]) -> str:
    """The file's text; ValueError when it holds a non-finite number."""
    return dumps(heartbeat, what=FILE_NAME)


MAX_TEXT_CHARS = 256  # job, phase, kind


def _text(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= MAX_TEXT_CHARS


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)  # finite: loads_object refuses the rest


def parse_heartbeat(text: str | bytes | None) -> dict[str, Any] | None:
    """The heartbeat the file holds, its FIELDS only; None when there is none or it is not one (empty, oversize,
    not a JSON object, a non-finite number, a field missing or of another type, a limit not above 0). The file is
    written by the job, so its reader trusts nothing of it but these shapes (the stall watch also clamps the
    limit to what the spec allows)."""
    value = loads_object(text, max_chars=MAX_CHARS)
    if value is None:
        return None
    step = value.get("step")
    if not (_text(value.get("job")) and _text(value.get("phase")) and _text(value.get("kind"))
            and (step is None or (isinstance(step, int) and not isinstance(step, bool) and step >= 0))
            and _number(value.get("moved_at")) and _number(value.get("at")) and _number(value.get("limit_seconds"))
            and value["limit_seconds"] > 0):
        return None
    return {name: value[name] for name in FIELDS}


def key(prefix: str) -> str:
    """The file's key below a checkpoint prefix ('' or ending in '/' or not)."""
    return (prefix.rstrip("/") + "/" if prefix else "") + FILE_NAME
