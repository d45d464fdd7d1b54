"""How a setting is declared once: the one dialect of cdk.json settings and of the Lambdas' PIPELINE_SETTINGS.

A setting is a dataclass field made with `setting(doc, default=..., checks=...)`: the field's name is the key, its
type hint the JSON type it takes, its metadata the doc and its `Constraint`s. A constraint carries its check and
its two texts: `problem` (what an error says is wrong or allowed) and `doc` (the constraints column of a generated
settings table; "" = not shown). Its `kind` says what it checks: the whole value, every item of a list, or every
key/value of a map.

Two readers take the same declarations: `parse_fields` and `field_errors` here read cdk.json (stacks/settings/
environment.py: unknown keys are errors, every error reads `<where>.<key>=<value>: <problem>`), and
lambda/settings.py reads PIPELINE_SETTINGS (unknown keys ignored, errors read `<key>: <problem>`). Standard library
only: the Lambda asset imports it.
"""

from __future__ import annotations

import dataclasses
import re
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from functools import cache
from typing import Any, Literal, get_args, get_origin, get_type_hints


@dataclass(frozen=True)
class Constraint:
    """One rule of a setting. `check(value)` (for kind "entry": `check(key, value)`) is True when allowed;
    `problem` is the error's text, or a function of the failing value that gives it (a parser's own reason)."""
    check: Callable[..., bool]
    problem: str | Callable[[Any], str]
    doc: str = ""
    kind: Literal["value", "each", "entry"] = "value"
    pattern: re.Pattern[str] | None = None  # the regular expression of a pattern constraint

    def text(self, value: Any) -> str:
        return self.problem(value) if callable(self.problem) else self.problem


def setting(doc: str, *, default: Any = dataclasses.MISSING, checks: Constraint | Sequence[Constraint] = (),
            read: bool = True) -> Any:
    """A setting: a dataclass field with its doc and constraints as metadata. `read=False`: not a key of the
    object the reader parses (the caller sets it; cdk.json's `name` and `project`). A dict or dataclass default is
    a factory (a fresh value per object)."""
    meta = {"doc": doc, "checks": (checks,) if isinstance(checks, Constraint) else tuple(checks), "read": read}
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=meta)
    if isinstance(default, type) and dataclasses.is_dataclass(default):
        return field(default_factory=default, metadata=meta)
    return field(default=default, metadata=meta)


def constraints(meta: Any) -> tuple[Constraint, ...]:
    return meta["checks"]


# --- constraints ----------------------------------------------------------------------------------------------
def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def matches(pattern: str | re.Pattern[str], problem: str, doc: str = "", *, kind: Literal["value", "each"] = "value"
            ) -> Constraint:
    """A string the whole of which `pattern` matches (`kind="each"`: every item of a list)."""
    compiled = re.compile(pattern)
    return Constraint(lambda v: isinstance(v, str) and bool(compiled.fullmatch(v)), problem, doc, kind, compiled)


def all_match(pattern: str | re.Pattern[str], problem: str) -> Constraint:
    """A list of strings each of which `pattern` matches (the whole list is shown when one does not)."""
    compiled = re.compile(pattern)
    return Constraint(lambda vs: all(isinstance(v, str) and compiled.fullmatch(v) for v in vs), problem,
                      pattern=compiled)


def in_range(low: float, high: float, problem: str, *, low_exclusive: bool = False) -> Constraint:
    """A number from `low` (or above it, `low_exclusive`) to `high`."""
    return Constraint(lambda v: (v > low if low_exclusive else v >= low) and v <= high, problem)


def one_of(choices: Sequence[Any], problem: str) -> Constraint:
    return Constraint(lambda v: v in choices, problem)


def at_least(minimum: float) -> Constraint:
    return Constraint(lambda v: v >= minimum, f"must be >= {minimum}", f">= {minimum}")


def above(bound: float) -> Constraint:
    return Constraint(lambda v: v > bound, f"must be > {bound}", f"> {bound}")


def non_empty(problem: str = "must not be empty", doc: str = "not empty") -> Constraint:
    return Constraint(bool, problem, doc)


def at_most_items(count: int, limit_by: str = "SageMaker") -> Constraint:
    """A list of at most `count` items (`limit_by`: whose limit it is)."""
    return Constraint(lambda v: len(v) <= count, f"{limit_by} allows at most {count}", f"at most {count} ({limit_by})")


def number_entries(minimum: float | None = None) -> Constraint:
    """A map whose values are numbers (>= `minimum`)."""
    rule = "a number" if minimum is None else "a non-negative number" if minimum == 0 else f"a number >= {minimum}"
    return Constraint(lambda _k, v: _is_number(v) and (minimum is None or v >= minimum), f"expected {rule}",
                      "" if minimum is None else f">= {minimum}", "entry")


def entries(check: Callable[[Any, Any], bool], problem: str) -> Constraint:
    """Every key/value of a map passes `check(key, value)`."""
    return Constraint(check, problem, kind="entry")


def problem_texts(cons: Sequence[Constraint], value: Any) -> list[tuple[Any, str]]:
    """(what is shown, problem) of every constraint `value` fails: the value, the failing item of a list
    ("each"), or {key: value} of the failing map entry ("entry")."""
    shown = list(value) if isinstance(value, tuple) else value
    found: list[tuple[Any, str]] = []
    for c in cons:
        if c.kind == "each":
            found += [(item, c.text(item)) for item in value if not c.check(item)]
        elif c.kind == "entry":
            found += [({k: v}, c.text((k, v))) for k, v in value.items() if not c.check(k, v)]
        elif not c.check(value):
            found.append((shown, c.text(value)))
    return found


def docs(meta: Any) -> str:
    """The constraints column of a settings table."""
    return ", ".join(c.doc for c in constraints(meta) if c.doc)


# --- types ----------------------------------------------------------------------------------------------------
@cache
def hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def unwrap(hint: Any) -> tuple[Any, bool]:
    """(the type, whether null is allowed) of `T | None` or `T`."""
    if isinstance(hint, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        return args[0], len(args) < len(get_args(hint))
    return hint, False


def required(f: dataclasses.Field[Any]) -> bool:
    return f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING


# --- the cdk.json reader: strict, `<where>.<key>=<value>: <problem>` -----------------------------------------------
def read_keys(cls: type) -> list[str]:
    """The keys of `cls` that the source sets, sorted."""
    return sorted(f.name for f in fields(cls) if f.metadata["read"])


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
    """The values of `cls`'s keys given in `raw`, typed (lists as tuples, objects as their dataclass). Appends to
    `errors` every unknown key, missing required key and value of the wrong JSON type."""
    declared = {f.name: f for f in fields(cls) if f.metadata["read"]}
    for key in sorted(set(raw) - set(declared)):
        errors.append(f"{where}.{key}: unknown key; allowed keys are {', '.join(sorted(declared))}")
    for key, f in declared.items():
        if key not in raw and required(f):
            errors.append(f"{where}.{key}: missing; it is required")
    values: dict[str, Any] = {}
    for key, value in raw.items():
        if key not in declared:
            continue
        hint = hints(cls)[key]
        problem = _type_error(f"{where}.{key}", value, _json_types(hint))
        if problem:
            errors.append(problem)
        elif dataclasses.is_dataclass(hint):
            values[key] = hint(**parse_fields(hint, value, f"{where}.{key}", errors))
        else:
            values[key] = tuple(value) if isinstance(value, list) else value
    return values


def field_errors(config: Any, where: str) -> list[str]:
    """Every constraint of every field of `config` (a nested dataclass under `<where>.<key>`)."""
    errors: list[str] = []
    for f in fields(config):
        value = getattr(config, f.name)
        label = f"{where}.{f.name}" if f.metadata["read"] else f.name
        if dataclasses.is_dataclass(value):
            errors += field_errors(value, label)
        else:
            errors += [f"{label}={bad!r}: {problem}" for bad, problem in problem_texts(constraints(f.metadata), value)]
    return errors
