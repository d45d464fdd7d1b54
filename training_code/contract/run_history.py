"""`_progress.json` and `_history.json`: what a run did across restarts, kept beside its checkpoints.

Producer: global rank 0 of a training job (hftrain/checkpoint/history.py `RunHistory`) at the top of the checkpoint
dir, synced to the run's checkpoint prefix with the checkpoints. Consumers: the next attempt's training code (the
same module, and hftrain/checkpoint/interval.py for `save_interval auto`), CheckJob and Finish
(lambda/watch/durability.py `read_progress`, `read_history`: the step reached, the interruptions and rejected
checkpoints of the run summary).

- `_progress.json`: `{job, host, step, at, at_iso, started_step, started_at, finished, beats, every_seconds,
  save_seconds, startup_seconds}` (the step this process reached and when, where it started, the recent blocking
  save times, the run's measured start-ups: contract/startup_limit.py).
- `_history.json`: `{format: 1, starts: [...], interruptions: [...]}`, at most MAX_RECORDS of each.
"""

from __future__ import annotations

from typing import Any

from contract.jsontext import dumps, loads_object

PROGRESS_FILE = "_progress.json"
HISTORY_FILE = "_history.json"
HISTORY_FORMAT = 1
MAX_RECORDS = 200
MAX_CHARS = 16 * 1024 * 1024


def format_progress(progress: dict[str, Any]) -> str:
    """`_progress.json`'s text; ValueError when it holds a non-finite number."""
    return dumps(progress, what=PROGRESS_FILE)


def parse_progress(text: str | bytes | None) -> dict[str, Any] | None:
    """The progress record of `_progress.json`'s text; None when empty, oversize or not a finite JSON object."""
    return loads_object(text, max_chars=MAX_CHARS)


def format_history(history: dict[str, Any]) -> str:
    """`_history.json`'s text, the newest MAX_RECORDS starts and interruptions; ValueError on a non-finite number."""
    kept = {**history, **{part: list(history.get(part) or [])[-MAX_RECORDS:] for part in ("starts", "interruptions")}}
    return dumps(kept, what=HISTORY_FILE, indent=1)


def parse_history(text: str | bytes | None) -> dict[str, Any] | None:
    """The history of `_history.json`'s text as written; None when empty, oversize or not a finite JSON object."""
    return loads_object(text, max_chars=MAX_CHARS)


def with_defaults(history: dict[str, Any] | None) -> dict[str, Any]:
    """A history with its parts present (an absent or unreadable file: none yet)."""
    out = dict(history or {})
    out.setdefault("format", HISTORY_FORMAT)
    out.setdefault("starts", [])
    out.setdefault("interruptions", [])
    return out


def key(prefix: str, name: str) -> str:
    """The key of PROGRESS_FILE or HISTORY_FILE below a checkpoint prefix."""
    return (prefix.rstrip("/") + "/" if prefix else "") + name
