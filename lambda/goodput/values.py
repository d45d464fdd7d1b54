"""What every module of the goodput ledger (ledger.py) shares: the names of the parts, the leader host, and the
lenient readers of the times and numbers in DescribeTrainingJob responses, GOODPUT lines and stall records
(a value that cannot be read is None or 0, never an error: the ledger must not fail the run summary). Pure.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

# The parts of the billed time, in the order the ledger and its text list them (ledger.py says what each holds).
PARTS = ("downloading", "startup", "productive", "replayed", "evaluation", "checkpointing", "uploading", "stalled",
         "recovering",
         "unaccounted")
LEADER = "algo-1"  # the host whose log stream says what the attempt did
BEFORE_TRAINING = "downloading"  # the part (and the transitions' kind) before the Training transition


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


def number(value: Any) -> float:
    """A number of a GOODPUT line or a DescribeTrainingJob response as float; 0.0 when it is none (or a bool)."""
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def iso(seconds: float) -> str:
    """Epoch seconds as the summary writes times: UTC, milliseconds, `Z`."""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
