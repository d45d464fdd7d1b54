"""Strict JSON for the contract's files and lines: one object, finite numbers only, bounded size.

A writer refuses what its reader would refuse (a non-finite number: `NaN` is not JSON), with a ValueError that
says which format; a reader returns None for anything that is not such an object (never raises on bad input).
"""

from __future__ import annotations

import json
from typing import Any


def _no_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name} is not JSON")


def dumps(value: Any, *, what: str, **options: Any) -> str:
    """`value` as JSON text; ValueError naming `what` when it holds a non-finite number."""
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError as err:
        raise ValueError(f"{what}: {err} (the contract's readers accept finite numbers only)") from err


def loads_object(text: str | bytes | None, *, max_chars: int) -> dict[str, Any] | None:
    """The JSON object `text` holds; None when it is empty, longer than `max_chars`, not JSON, holds a non-finite
    number, or is not an object."""
    if not text or len(text) > max_chars:
        return None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
