"""`_heartbeat.json`: global rank 0's progress, for the stall watch from outside the job.

Producer: the stall watchdog of global rank 0 (hftrain/stall/watchdog.py) rewrites `<checkpoint dir>/_heartbeat.json`
every WRITE_SECONDS; SageMaker's checkpoint sync uploads it to the run's checkpoint prefix. Consumer: CheckJob's
outside stall watch (lambda/watch/stalls.py), which reads it from S3 while the job is Training.

    {"job": ..., "step": 57, "phase": "train", "kind": "train", "moved_at": <unix s>, "at": <unix s>,
     "limit_seconds": 600.0, "doing": "training, step 57", "ranks": [{"rank": 1, "host": "algo-2",
     "step": 57, "kind": "train", "doing": "training, step 57", "moved_at": <unix s>, "at": <unix s>}, ...]}

`moved_at`: the last progress; `at`: when the watchdog wrote it; `limit_seconds`: the in-job limit in effect;
`doing`: what the rank is doing, in words ("checkpoint save of step 400 since 12:03:05Z": a long save or upload
is not a hang); `ranks`: every rank's phase as the store shows it (rank 0's view; [] without a store);
`stragglers`: every rank named slower than the fleet in this job (hftrain/stall/stragglers.py), with its latest
figures while it was; `now` true when it still was at the last look, false when it caught up.
"""

from __future__ import annotations

import time
from typing import Any

from contract.jsontext import dumps, loads_object

FILE_NAME = "_heartbeat.json"
WRITE_SECONDS = 30.0
MAX_CHARS = 64 * 1024
FIELDS = ("job", "step", "phase", "kind", "moved_at", "at", "limit_seconds", "doing", "ranks", "stragglers")


def doing(*, phase: str, kind: str, step: int | None, since: float | None) -> str:
    """What a rank is doing, in words: "training, step 57", "checkpoint save of step 400 since 12:03:05Z"."""
    if kind == "train":
        return f"training, step {step if step is not None else 0}"
    when = time.strftime("%H:%M:%SZ", time.gmtime(since)) if since else "?"
    return f"{phase} since {when}" + (f" (after step {step})" if step and kind != "save" else "")


def record(*, job: str, step: int | None, phase: str, kind: str, moved_at: float, at: float,
           limit_seconds: float, since: float | None = None, ranks: list[dict[str, Any]] | None = None,
           stragglers: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"job": job, "step": step, "phase": phase, "kind": kind, "moved_at": round(moved_at, 3),
            "at": round(at, 3), "limit_seconds": round(limit_seconds, 1),
            "doing": doing(phase=phase, kind=kind, step=step, since=since if since is not None else moved_at),
            "ranks": ranks or [], "stragglers": stragglers or []}


def rank_entry(beat: dict[str, Any]) -> dict[str, Any]:
    """One rank's line in `ranks`, from its stall watchdog beat (hftrain/stall/watchdog.py)."""
    return {"rank": beat.get("rank"), "host": beat.get("host"), "step": beat.get("step"), "kind": beat.get("kind"),
            "doing": doing(phase=str(beat.get("phase")), kind=str(beat.get("kind")), step=beat.get("step"),
                           since=beat.get("since") or beat.get("moved_at")),
            "moved_at": round(float(beat.get("moved_at") or 0), 3), "at": round(float(beat.get("alive_at") or 0), 3)}


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
    core = {name: value[name] for name in FIELDS[:7]}
    doing_text = value.get("doing")
    return {**core, "doing": doing_text if _text(doing_text) else None,
            "ranks": _entries(value.get("ranks")), "stragglers": _entries(value.get("stragglers"))}


MAX_ENTRIES = 1024  # ranks (and stragglers) a heartbeat may list


def _entries(value: Any) -> list[dict[str, Any]]:
    """`ranks`/`stragglers` as a reader may use them: at most MAX_ENTRIES objects of short texts, numbers and
    booleans (anything else in an entry is left out; a value that is not a list is none)."""
    if not isinstance(value, list):
        return []
    out = []
    for entry in value[:MAX_ENTRIES]:
        if isinstance(entry, dict):
            out.append({k: v for k, v in entry.items()
                        if _text(k) and (v is None or isinstance(v, bool) or _text(v) or _number(v))})
    return out


def key(prefix: str) -> str:
    """The file's key below a checkpoint prefix ('' or ending in '/' or not)."""
    return (prefix.rstrip("/") + "/" if prefix else "") + FILE_NAME
