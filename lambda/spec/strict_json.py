"""Strict JSON for run specs: text and object trees checked before any field is read. Pure.

Python's json module lets through what a spec must not carry: duplicate keys (the last one wins), NaN and
Infinity (then Prepare's own output is not JSON), integers past the interpreter's digit limit (ValueError),
nesting that exhausts the stack (RecursionError), lone surrogates (boto3 cannot encode them). `loads` and
`tree_problems` turn each of these into a problem naming the field path, with bounded work.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_TEXT_BYTES = 1 << 20
MAX_DEPTH = 20  # a spec is 5 levels deep; object-valued hyperparameters add a few
MAX_NODES = 200_000
MAX_INT_DIGITS = 30
MAX_KEY_SHOWN = 60
_PLAIN_KEY = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_:/=+@-]*")
_SURROGATE = re.compile("[\ud800-\udfff]")
_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|[\[\]{}]')


class _Object(dict):
    """A JSON object that remembers the keys its text gave more than once."""

    duplicates: dict[str, int]


class _Rejected:
    """Stands in for a literal Python reads but a spec must not hold (found again by `tree_problems`)."""

    def __init__(self, why: str) -> None:
        self.why = why


def _pairs(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object(pairs)
    obj.duplicates = {}
    if len(obj) != len(pairs):
        seen: dict[str, int] = {}
        for key, _ in pairs:
            seen[key] = seen.get(key, 0) + 1
        obj.duplicates = {k: n for k, n in seen.items() if n > 1}
    return obj


def _int(text: str) -> int | _Rejected:
    if len(text.lstrip("-")) > MAX_INT_DIGITS:
        return _Rejected(f"an integer of {len(text.lstrip('-'))} digits; at most {MAX_INT_DIGITS}")
    return int(text)


def _float(text: str) -> float | _Rejected:
    value = float(text)
    return value if math.isfinite(value) else _Rejected(f"{text[:20]} is out of range for a number")


def _constant(name: str) -> _Rejected:
    return _Rejected(f"{name} is not JSON (use a finite number)")


def join(path: str, key: Any) -> str:
    """`a.b`, `a[0]`, or `a["odd key"]` for keys that are empty or hold dots, spaces, quotes..."""
    if isinstance(key, int):
        return f"{path}[{key}]"
    key = str(key)
    if not _PLAIN_KEY.fullmatch(key):
        shown = key if len(key) <= MAX_KEY_SHOWN else key[:MAX_KEY_SHOWN - 3] + "..."
        return f"{path}[{json.dumps(shown)}]"
    if len(key) > MAX_KEY_SHOWN:
        return f"{path}[{json.dumps(key[:MAX_KEY_SHOWN - 3] + '...')}]"
    return f"{path}.{key}" if path else key


def loads(text: str | bytes, path: str = "") -> tuple[Any, list[tuple[str, str]]]:
    """(value, problems): JSON text parsed without letting any of the module docstring's cases through."""
    where = path or "(root)"
    size = len(text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text)
    if size > MAX_TEXT_BYTES:
        return None, [(where, f"the JSON text is {size} bytes; at most {MAX_TEXT_BYTES}")]
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as err:
            return None, [(where, f"not UTF-8 text (byte {err.start})")]
    text = text.removeprefix("\ufeff")  # editors on Windows write a byte order mark
    try:
        value = json.loads(text, object_pairs_hook=_pairs, parse_int=_int, parse_float=_float,
                           parse_constant=_constant)
    except json.JSONDecodeError as err:
        return None, [(where, f"not valid JSON: {err.msg} at line {err.lineno} column {err.colno}")]
    except RecursionError:
        return None, [(where, f"nested more than {MAX_DEPTH} levels deep at {_too_deep(text)}")]
    return value, tree_problems(value, path)


def _too_deep(text: str) -> str:
    """`line L column C` where the nesting first passes MAX_DEPTH (strings skipped)."""
    depth = 0
    for token in _TOKENS.finditer(text):
        char = token.group()
        depth += 1 if char in "[{" else -1 if char in "]}" else 0
        if depth > MAX_DEPTH:
            line = text.count("\n", 0, token.start()) + 1
            return f"line {line} column {token.start() - text.rfind(chr(10), 0, token.start())}"
    return "an unknown place"


def _leaf_problem(item: Any) -> str | None:
    if isinstance(item, _Rejected):
        return item.why
    if isinstance(item, str):
        return "the string holds a lone surrogate (not Unicode text)" if _SURROGATE.search(item) else None
    if isinstance(item, float):
        return None if math.isfinite(item) else f"{item} is not JSON (use a finite number)"
    if isinstance(item, int) and not isinstance(item, bool):
        return f"an integer of {MAX_INT_DIGITS}+ digits; at most {MAX_INT_DIGITS}" if abs(item).bit_length() > 100 \
            else None
    return None if item is None or isinstance(item, bool) else f"a {type(item).__name__} is not a JSON value"


def tree_problems(value: Any, path: str = "") -> list[tuple[str, str]]:
    """What keeps `value` (parsed by `loads`, or an object given to a handler) from being a plain JSON tree."""
    problems: list[tuple[str, str]] = []
    stack: list[tuple[Any, str, int]] = [(value, path, 0)]
    nodes = 0
    while stack:
        item, where, depth = stack.pop()
        nodes += 1
        if nodes > MAX_NODES:
            problems.append((path or "(root)", f"more than {MAX_NODES} values; a spec needs far fewer"))
            break
        shown = where or "(root)"
        if depth > MAX_DEPTH:
            problems.append((shown, f"nested more than {MAX_DEPTH} levels deep"))
            continue
        if isinstance(item, dict):
            problems += [(join(where, key), f"duplicate key: the JSON text sets it {count} times (Python would keep "
                                            "the last one silently); keep one")
                         for key, count in getattr(item, "duplicates", {}).items()]
            bad_keys = [key for key in item if not isinstance(key, str) or _SURROGATE.search(key)]
            problems += [(shown, f"key {str(key)[:40]!r} is not Unicode text") for key in bad_keys]
            stack.extend(reversed([(child, join(where, key), depth + 1) for key, child in item.items()
                                   if key not in bad_keys]))  # depth first, in document order
        elif isinstance(item, list):
            stack.extend(reversed([(child, join(where, i), depth + 1) for i, child in enumerate(item)]))
        elif (why := _leaf_problem(item)) is not None:
            problems.append((shown, why))
    return problems
