"""What every run spec kind shares (schema.py): the ABSENT / INVALID markers, the problem list, the check
context, defaults taken from the settings or derived from other fields, and `Kind`, the base of every kind."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

MAX_PROBLEMS = 50


# Declarations are built once per cold start: no generated __eq__/__repr__/__setattr__ (each costs a compile).
kind_dataclass = dataclass(kw_only=True, eq=False, repr=False)


class Marker:
    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return self.name


ABSENT = Marker("ABSENT")
INVALID = Marker("INVALID")


def valid(*values: Any) -> bool:
    return all(v is not INVALID and v is not ABSENT for v in values)


def describe(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


class Problems:
    """Collects `path: message` lines, keeping the first MAX_PROBLEMS and counting the rest."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.omitted = 0

    @property
    def full(self) -> bool:
        return len(self.lines) >= MAX_PROBLEMS

    def add(self, path: str, message: str) -> None:
        if self.full:
            self.omitted += 1
        else:
            self.lines.append(f"{path or '(root)'}: {message}")

    def __bool__(self) -> bool:
        return bool(self.lines)


@dataclass
class Context:
    settings: Any
    problems: Problems = field(default_factory=Problems)
    root: dict[str, Any] = field(default_factory=dict)  # the resolved top level, filled in declaration order


@dataclass(eq=False, repr=False)
class Setting:
    """A default taken from the environment settings (PIPELINE_SETTINGS)."""

    name: str
    first: bool = False

    def value(self, ctx: Context) -> Any:
        value = getattr(ctx.settings, self.name)
        return value[0] if self.first else value

    @property
    def doc(self) -> str:
        return f"*env*: first `{self.name}`" if self.first else f"*env*: `{self.name}`"


@dataclass(eq=False, repr=False)
class Derived:
    """A default computed from fields resolved before it (`siblings`: the enclosing object so far)."""

    doc: str
    compute: Callable[[dict[str, Any], Context], Any]


@kind_dataclass
class Kind:
    doc: str = ""
    required: bool = False
    default: Any = ABSENT
    keep: bool = True  # False: accepted and dropped from the resolved spec ($schema)

    def default_value(self, siblings: dict[str, Any], ctx: Context) -> Any:
        if isinstance(self.default, Setting):
            return self.default.value(ctx)
        if isinstance(self.default, Derived):
            return self.default.compute(siblings, ctx)
        return self.default

    def default_doc(self) -> str:
        if self.required:
            return "**required**"
        if isinstance(self.default, Setting | Derived):
            return self.default.doc
        if self.default is ABSENT:
            return "none"
        return f"`{json.dumps(self.default)}`"

    # subclasses
    def check(self, value: Any, path: str, ctx: Context) -> Any:
        raise NotImplementedError

    def schema(self) -> dict[str, Any]:
        raise NotImplementedError

    def type_doc(self) -> str:
        raise NotImplementedError

    def allowed_doc(self) -> str:
        return ""

    def children(self, path: str) -> list[tuple[str, Kind]]:
        return []

    def annotate(self, schema: dict[str, Any]) -> dict[str, Any]:
        text = "; ".join(x for x in (self.allowed_doc(), self.doc) if x)
        if text:
            schema["description"] = text
        if not isinstance(self.default, Setting | Derived | Marker):
            schema["default"] = self.default
        return schema


def portable(body: str) -> str:
    """A whole-string JSON Schema pattern: `(?![\\s\\S])` is end of text in both dialects (`$` is not)."""
    return f"^(?:{body})(?![\\s\\S])"
