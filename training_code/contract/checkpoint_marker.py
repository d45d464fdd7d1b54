"""The names and the format of a checkpoint and of its completion markers.

Producer: each node's local rank 0 of a training job writes `checkpoint-<step>/_complete.<host>.json` after every
rank has finished writing the checkpoint's files (hftrain/checkpoint/manager.py `write_node_marker`). Consumers: the
next attempt's resume (the same module: `read_markers`, `inspect_structure`) and the durability watchdog, which reads
the same names in S3 (lambda/watch/durability.py).

Format 2: `{format, step, host, hosts, world_size, task, model_fingerprint, model, lineage, saved_at, saved_at_unix,
hash_algorithm, hash_seconds, files: {name: {size, hash}}}`: every file's size and content hash.
"""

from __future__ import annotations

import json
import re
from typing import Any

from contract.jsontext import dumps

PREFIX = "checkpoint-"  # transformers' PREFIX_CHECKPOINT_DIR
MARKER_PREFIX = "_complete."
MARKER_SUFFIX = ".json"
MARKER_FORMAT = 2  # 2: the marker lists every file's size and content hash
MAX_CHARS = 64 * 1024 * 1024  # a marker lists every file of the node's part of a checkpoint
# `checkpoint-<step>/_complete.<host>.json` below a checkpoint prefix (fullmatch): groups step, host
MARKER_KEY_RE = re.compile(rf"{re.escape(PREFIX)}([0-9]+)/{re.escape(MARKER_PREFIX)}([^/]+){re.escape(MARKER_SUFFIX)}")
_STEP_RE = re.compile(rf"{re.escape(PREFIX)}([0-9]+)")


class MarkerError(ValueError):
    """A marker file's text is not a marker (what is wrong, in words)."""


def checkpoint_name(step: int) -> str:
    return f"{PREFIX}{step}"


def step_of(name: str) -> int | None:
    """The step of a checkpoint directory's name (`checkpoint-<step>`), else None."""
    match = _STEP_RE.fullmatch(name)
    return int(match.group(1)) if match else None


def marker_name(host: str) -> str:
    return f"{MARKER_PREFIX}{host}{MARKER_SUFFIX}"


def is_marker_name(name: str) -> bool:
    """Whether a file name at the top of a checkpoint directory is a completion marker."""
    return name.startswith(MARKER_PREFIX) and name.endswith(MARKER_SUFFIX)


def format_marker(marker: dict[str, Any]) -> str:
    """The marker file's text; ValueError when the marker holds a non-finite number."""
    return dumps(marker, what="checkpoint marker", indent=1)


def parse_marker(text: str | bytes | None) -> dict[str, Any]:
    """The marker of a marker file's text; MarkerError when it is not valid JSON (or over MAX_CHARS, or holds a
    non-finite number) or not a JSON object. Its fields are checked by the reader (format, hosts, files)."""
    if text is not None and len(text) > MAX_CHARS:
        raise MarkerError(f"is over {MAX_CHARS} characters")
    try:
        value = json.loads(text or "", parse_constant=_non_finite)
    except (ValueError, RecursionError) as err:
        raise MarkerError("is not valid JSON") from err
    if not isinstance(value, dict):
        raise MarkerError("is not a JSON object")
    return value


def _non_finite(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")
