"""How a cdk.json setting is declared once, and parsed and checked from that declaration.

A setting is a dataclass field made with `setting(doc, default=..., check=..., ...)`: the field's name is the
cdk.json key, its type hint the JSON type it takes, its metadata the doc and the value checks. `parse_fields`
reads a raw cdk.json object into field values (unknown keys, missing keys and wrong JSON types are errors);
`field_errors` runs the declared value checks on a built config. Nothing else lists the keys, so a key cannot be
read, typed or checked apart from its declaration (the approach of lambda/settings.py for the Lambdas' settings).
Every error reads `<where>.<key>=<value>: <what is allowed>`.
"""

from __future__ import annotations

import dataclasses
import re
import types
from collections.abc import Callable, Sequence
from dataclasses import field, fields
from functools import cache
from typing import Any, get_args, get_origin, get_type_hints

# A value check: None when the value is allowed, else what is allowed (the end of the error message).
Check = Callable[[Any], str | None]
# A check of one entry of a map setting: (key, value) -> None or what is allowed.
EntryCheck = Callable[[Any, Any], str | None]


def setting(doc: str, *, default: Any = dataclasses.MISSING, check: Check | Sequence[Check] = (),
            each: Check | None = None, entry: EntryCheck | None = None, non_empty: bool = False,
            in_environment: bool = True) -> Any:
    """A cdk.json setting: a dataclass field with its doc and checks as metadata.

    `check`: of the whole value (a list is shown as a list); `each`: of every item of a list (the item is shown);
    `entry`: of every key/value of a map (shown as {key: value}); `non_empty`: an empty list fails with "a
    non-empty list". `in_environment=False`: not a key of `environments.<name>` (set by load_config, checked
    under its own name). A dict or dataclass default is a factory (a fresh value per config)."""
    checks = (check,) if callable(check) else tuple(check)
    meta = {"doc": doc, "checks": checks, "each": each, "entry": entry, "non_empty": non_empty,
            "in_environment": in_environment}
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=meta)
    if isinstance(default, type) and dataclasses.is_dataclass(default):
        return field(default_factory=default, metadata=meta)
    return field(default=default, metadata=meta)


# --- value checks ----------------------------------------------------------------------------------------
def matches(pattern: re.Pattern[str], allowed: str) -> Check:
    """A string the whole of which `pattern` matches."""
    def check(value: Any) -> str | None:
        return None if isinstance(value, str) and pattern.fullmatch(value) else allowed
    return check


def all_match(pattern: re.Pattern[str], allowed: str) -> Check:
    """A list of strings each of which `pattern` matches (the whole list is shown when one does not)."""
    def check(values: Any) -> str | None:
        return None if all(isinstance(v, str) and pattern.fullmatch(v) for v in values) else allowed
    return check


def in_range(low: float, high: float, allowed: str, *, low_exclusive: bool = False) -> Check:
    """A number from `low` (or above it, `low_exclusive`) to `high`."""
    def check(value: Any) -> str | None:
        above_low = value > low if low_exclusive else value >= low
        return None if above_low and value <= high else allowed
    return check


def one_of(choices: Sequence[Any], allowed: str) -> Check:
    def check(value: Any) -> str | None:
        return None if value in choices else allowed
    return check


# --- parsing: keys and JSON types ------------------------------------------------------------------------
@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def environment_keys(cls: type) -> list[str]:
    """The keys of `cls` that cdk.json sets, sorted."""
    return sorted(f.name for f in fields(cls) if f.metadata["in_environment"])


def _json_types(hint: Any) -> tuple[type, ...]:
    """The JSON (Python) types a value of type `hint` is read from: a tuple from a list, a dataclass from an
    object, a float from an int too."""
    if isinstance(hint, types.UnionType):
        return tuple(t for arg in get_args(hint) for t in _json_types(arg))
    if hint is float:
        return (int, float)
    if get_origin(hint) is tuple:
        return (list,)
    if get_origin(hint) is dict or dataclasses.is_dataclass(hint):
        return (dict,)
    return (hint,)


def _type_error(label: str, value: Any, want: tuple[type, ...]) -> str | None:
    # bool is an int subclass: a `true` where a number belongs is a mistake, not 1.
    if isinstance(value, want) and not (isinstance(value, bool) and bool not in want):
        return None
    names = " or ".join(t.__name__ for t in want)
    return f"{label}={value!r}: must be {names.replace('NoneType', 'null')}"


def parse_fields(cls: type, raw: dict[str, Any], where: str, errors: list[str]) -> dict[str, Any]:
    """The values of `cls`'s cdk.json keys given in `raw`, typed (lists as tuples, objects as their dataclass).
    Appends to `errors` every unknown key, missing required key and value of the wrong JSON type."""
    declared = {f.name: f for f in fields(cls) if f.metadata["in_environment"]}
    allowed = sorted(declared)
    for key in sorted(set(raw) - set(declared)):
        errors.append(f"{where}.{key}: unknown key; allowed keys are {', '.join(allowed)}")
    for key, f in declared.items():
        if key not in raw and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            errors.append(f"{where}.{key}: missing; it is required")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in declared:
            continue
        hint = _hints(cls)[key]
        problem = _type_error(f"{where}.{key}", value, _json_types(hint))
        if problem:
            errors.append(problem)
        elif dataclasses.is_dataclass(hint):
            values[key] = hint(**parse_fields(hint, value, f"{where}.{key}", errors))
        else:
            values[key] = tuple(value) if isinstance(value, list) else value
    return values


# --- checking: the declared value checks -----------------------------------------------------------------
def field_errors(config: Any, where: str) -> list[str]:
    """Every declared check of every field of `config` (a nested dataclass under `<where>.<key>`)."""
    errors: list[str] = []
    for f in fields(config):
        value = getattr(config, f.name)
        label = f"{where}.{f.name}" if f.metadata["in_environment"] else f.name
        if dataclasses.is_dataclass(value):
            errors += field_errors(value, label)
        else:
            errors += _value_errors(label, value, f.metadata)
    return errors


def _value_errors(label: str, value: Any, meta: Any) -> list[str]:
    shown = list(value) if isinstance(value, tuple) else value
    problems: list[tuple[Any, str | None]] = []
    if meta["non_empty"] and not value:
        problems.append((shown, "a non-empty list"))
    problems += [(shown, check(value)) for check in meta["checks"]]
    if meta["each"] is not None:
        problems += [(item, meta["each"](item)) for item in value]
    if meta["entry"] is not None:
        problems += [({k: v}, meta["entry"](k, v)) for k, v in value.items()]
    return [f"{label}={bad!r}: {allowed}" for bad, allowed in problems if allowed is not None]
