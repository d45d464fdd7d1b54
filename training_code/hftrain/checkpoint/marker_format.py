"""The names and the format of a checkpoint and of its completion markers: declared once, here.

The training code writes `checkpoint-<step>/_complete.<host>.json` (hftrain/checkpoint/manager.py), and the pipeline's
durability watchdog reads the same names in S3 (lambda/watch/durability.py, through lambda/training_contract.py, which
ships a copy of this file in the Lambda asset). Standard library only: nothing from its package.
"""

from __future__ import annotations

import re

PREFIX = "checkpoint-"  # transformers' PREFIX_CHECKPOINT_DIR
MARKER_PREFIX = "_complete."
MARKER_SUFFIX = ".json"
MARKER_FORMAT = 2  # 2: the marker lists every file's size and content hash
# `checkpoint-<step>/_complete.<host>.json` below a checkpoint prefix (fullmatch): groups step, host
MARKER_KEY_RE = re.compile(rf"{re.escape(PREFIX)}([0-9]+)/{re.escape(MARKER_PREFIX)}([^/]+){re.escape(MARKER_SUFFIX)}")


def checkpoint_name(step: int) -> str:
    return f"{PREFIX}{step}"


def marker_name(host: str) -> str:
    return f"{MARKER_PREFIX}{host}{MARKER_SUFFIX}"
