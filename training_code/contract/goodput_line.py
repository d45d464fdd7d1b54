"""The `GOODPUT {json}` log line: the training code's own account of where its time went.

Producer: global rank 0 of a training job (hftrain/run/goodput.py, `GoodputClock`), on stdout (CloudWatch Logs on
SageMaker, the local job's log in local mode). Consumers: the goodput ledger (lambda/goodput/evidence.py, and
sources.py which keeps only these and the PROGRESS lines), the local job runner (local_mode/sagemaker/
training_job.py: the leader's pid and the `save_begin` event for interruptions injected during a save) and
benchmarks/bench_restart.py. The record's fields are described in hftrain/run/goodput.py.
"""

from __future__ import annotations

from typing import Any

from contract.jsontext import dumps, loads_object

PREFIX = "GOODPUT "
FORMAT = 1  # the record's "v"
MAX_LINE_CHARS = 64 * 1024  # a record is about 1 KB; a longer line is not one of ours
# events (the record's "event")
STARTUP, BEAT, SAVE_BEGIN, SAVE, EVAL_BEGIN, EVAL, END = "startup", "beat", "save_begin", "save", "eval_begin", \
    "eval", "end"
WRITE_BEGIN, COMPLETE = "write_begin", "checkpoint"  # a background save's write begins; a checkpoint is complete


def format_line(record: dict[str, Any]) -> str:
    """The line (without its newline) for `record`; ValueError when it holds a non-finite number."""
    return PREFIX + dumps(record, what="GOODPUT line", separators=(",", ":"))


def parse_line(line: str) -> dict[str, Any] | None:
    """The record of a GOODPUT line, wherever the prefix starts in it (a launcher may prefix the line); None for
    other lines, bad or non-finite JSON, a record that is not an object, or a line over MAX_LINE_CHARS."""
    if len(line) > MAX_LINE_CHARS:
        return None
    at = line.find(PREFIX)
    if at < 0:
        return None
    return loads_object(line[at + len(PREFIX):], max_chars=MAX_LINE_CHARS)


def is_line(line: str) -> bool:
    """Whether `line` may be a GOODPUT line (cheap: the prefix is in it), for filters that keep the lines."""
    return PREFIX in line
