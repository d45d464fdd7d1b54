"""The `RECOVERY {json}` log line: one recovery in place (hftrain/recovery/supervisor.py, global rank 0's supervisor).

Consumers: the goodput ledger (lambda/goodput/evidence.py and split.py: the `recovering` part, from `fault_at` to
the first step of the next generation of training processes) and the run summary's recovery rows. Fields:
`generation` (the one starting), `recovery` (its number in this job), `budget` (in_job_restarts), `cause`
(contract/failure_causes.py), `rank`, `host`, `step` (the failed rank's last completed step, when known),
`fault_at` (the first failure seen), `restart_at` (the new generation forked), `text` (the cause's first line).
"""

from __future__ import annotations

from typing import Any

from contract.jsontext import dumps, loads_object

PREFIX = "RECOVERY "
MAX_LINE_CHARS = 8 * 1024


def format_line(record: dict[str, Any]) -> str:
    return PREFIX + dumps(record, what="RECOVERY line", separators=(",", ":"))


def parse_line(line: str) -> dict[str, Any] | None:
    """The record of a RECOVERY line (at the start of the line or after a launcher's prefix); None otherwise."""
    if len(line) > MAX_LINE_CHARS:
        return None
    at = line.find(PREFIX)
    if at < 0:
        return None
    record = loads_object(line[at + len(PREFIX):], max_chars=MAX_LINE_CHARS)
    if record is None or not isinstance(record.get("generation"), int):
        return None
    return record


def is_line(line: str) -> bool:
    return PREFIX in line
