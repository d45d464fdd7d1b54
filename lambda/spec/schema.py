"""The kinds a run spec field can be, each able to check a value, describe itself as JSON Schema and as a docs row.

run_spec.py declares the fields with these kinds; nothing here knows a field name. A check returns the
resolved value (defaults filled in), `INVALID` after recording a problem, or `ABSENT` for an optional field that
stays out of the resolved spec. Patterns are written in the subset of regex syntax that Python's `re` and
ECMAScript read alike (no `\\d`, `\\w`, `\\s`, `$`), matched against the whole string.

In order: what every kind shares (the ABSENT / INVALID markers, the problem list, the check context, defaults taken
from the settings or derived from other fields, and `Kind`, the base of every kind); the value kinds (integers,
numbers, constants, booleans, enums, strings, and a string of one of two kinds picked by its prefix); the container
kinds (a free JSON object with some known keys, a list, an object of declared fields, a map of user-chosen keys).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from hfsm_lambda.spec.charsets import Charset
from hfsm_lambda.spec.strict_json import join

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


# ---- value kinds -------------------------------------------------------------------------------------------
@kind_dataclass
class Int(Kind):
    low: int
    high: int

    def check(self, value: Any, path: str, ctx: Context) -> Any:
        if isinstance(value, bool) or not isinstance(value, int) or not self.low <= value <= self.high:
            ctx.problems.add(path, f"expected an integer from {self.low} to {self.high}, got {describe(value)}")
            return INVALID
        return value

    def schema(self) -> dict[str, Any]:
        return self.annotate({"type": "integer", "minimum": self.low, "maximum": self.high})

    def type_doc(self) -> str:
        return "integer"

    def allowed_doc(self) -> str:
        return f"{self.low:,} - {self.high:,}"


@kind_dataclass
class IntOrWord(Kind):
    """An integer (a number when `number` is a `Num`) within `number`'s bounds, or one word (`"auto"`)."""

    word: str
    number: Any  # Int or Num

    def check(self, value: Any, path: str, ctx: Context) -> Any:
        if value == self.word and isinstance(value, str):
            return value
        kinds = int | float if isinstance(self.number, Num) else int
        if isinstance(value, kinds) and not isinstance(value, bool) and self.number.low <= value <= self.number.high:
            return value
        what = "a number" if isinstance(self.number, Num) else "an integer"
        ctx.problems.add(path, f"expected {json.dumps(self.word)} or {what} from {self.number.low} to "
                               f"{self.number.high}, got {describe(value)}")
        return INVALID

    def schema(self) -> dict[str, Any]:
        kind = "number" if isinstance(self.number, Num) else "integer"
        number = {"type": kind, "minimum": self.number.low, "maximum": self.number.high}
        return self.annotate({"anyOf": [{"const": self.word}, number]})

    def type_doc(self) -> str:
        return f"{'number' if isinstance(self.number, Num) else 'integer'} or string"

    def allowed_doc(self) -> str:
        return f"`{json.dumps(self.word)}` or {self.number.allowed_doc()}"


@kind_dataclass
class Num(Kind):
    """A number (integer or not) from `low` to `high`; `why` explains the unit in the message."""

    low: float
    high: float
    why: str = ""

    def check(self, value: Any, path: str, ctx: Context) -> Any:
        if isinstance(value, bool) or not isinstance(value, int | float) or not self.low <= value <= self.high:
            ctx.problems.add(path, f"expected a number from {self.low} to {self.high}{self.why}, got {describe(value)}")
            return INVALID
        return value

    def schema(self) -> dict[str, Any]:
        return self.annotate({"type": "number", "minimum": self.low, "maximum": self.high})

    def type_doc(self) -> str:
        return "number"

    def allowed_doc(self) -> str:
        return f"{self.low} - {self.high}"


@kind_dataclass
class Const(Kind):
    value: Any
    why: str = ""

    def check(self, value: Any, path: str, ctx: Context) -> Any:
        if type(value) is not type(self.value) or value != self.value:
            ctx.problems.add(path, f"expected {json.dumps(self.value)}{self.why}, got {describe(value)}")
            return INVALID
        return value

    def schema(self) -> dict[str, Any]:
        return self.annotate({"const": self.value})

    def type_doc(self) -> str:
        return "integer" if isinstance(self.value, int) else "string"

    def allowed_doc(self) -> str:
        return f"`{json.dumps(self.value)}`"


@kind_dataclass
class Bool(Kind):
    def check(self, value: Any, path: str, ctx: Context) -> Any:
        if not isinstance(value, bool):
            ctx.problems.add(path, f"expected true or false, got {describe(value)}")
            return INVALID
        return value

    def schema(self) -> dict[str, Any]:
        return self.annotate({"type": "boolean"})

    def type_doc(self) -> str:
        return "boolean"


@kind_dataclass
class Enum(Kind):
    values: tuple[str, ...]

    def check(self, value: Any, path: str, ctx: Context) -> Any:
        if not isinstance(value, str) or value not in self.values:
            ctx.problems.add(path, f"{describe(value)} is not allowed; allowed: {', '.join(self.values)}")
            return INVALID
        return value

    def schema(self) -> dict[str, Any]:
        return self.annotate({"type": "string", "enum": list(self.values)})

    def type_doc(self) -> str:
        return "string"

    def allowed_doc(self) -> str:
        return ", ".join(f"`{v}`" for v in self.values)


@kind_dataclass
class Str(Kind):
    """A string: `what` describes what is allowed (in messages and docs); every constraint must hold."""

    what: str
    pattern: str | None = None
    min_len: int = 0
    max_len: int = 1024
    charset: Charset | None = None
    forbid: tuple[tuple[str, str], ...] = ()  # (whole-string pattern, message) pairs that must not match
    normalize: Callable[[str, Context], str] | None = None

    def check(self, value: Any, path: str, ctx: Context) -> Any:
        if (not isinstance(value, str) or not self.min_len <= len(value) <= self.max_len
                or (self.charset is not None and not self.charset.ok(value))
                or (self.pattern is not None and not re.fullmatch(self.pattern, value))):
            ctx.problems.add(path, f"expected {self.what}, got {describe(value)}")
            return INVALID
        for pattern, message in self.forbid:
            if re.fullmatch(pattern, value):
                ctx.problems.add(path, message)
                return INVALID
        return self.normalize(value, ctx) if self.normalize else value

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "string", "minLength": self.min_len, "maxLength": self.max_len}
        if self.pattern:
            out["pattern"] = portable(self.pattern)
        if self.charset is not None:  # its own subschema: the long class is shared through $defs
            out["allOf"] = [{"pattern": portable(self.charset.regex_class() + "*")}]
        if self.forbid:
            out["not"] = {"anyOf": [{"pattern": portable(p)} for p, _ in self.forbid]}
        return self.annotate(out)

    def type_doc(self) -> str:
        return "string"

    def allowed_doc(self) -> str:
        return self.what


@kind_dataclass
class Either(Kind):
    """One of two string kinds, picked by a prefix (a model is an s3:// URI or a Hub id)."""

    prefix: str
    with_prefix: Str
    otherwise: Str

    def check(self, value: Any, path: str, ctx: Context) -> Any:
        chosen = self.with_prefix if isinstance(value, str) and value.startswith(self.prefix) else self.otherwise
        return chosen.check(value, path, ctx)

    def schema(self) -> dict[str, Any]:
        return self.annotate({"anyOf": [self.with_prefix.schema(), self.otherwise.schema()]})

    def type_doc(self) -> str:
        return "string"

    def allowed_doc(self) -> str:
        return f"{self.otherwise.what}; `{self.prefix}`: {self.with_prefix.what}"


# ---- container kinds ---------------------------------------------------------------------------------------
@kind_dataclass
class JsonObject(Kind):
    """A JSON object of any keys (already checked by strict_json: finite numbers, bounded depth); the keys in
    `known` are checked by their kinds and get their defaults."""

    known: dict[str, Kind] = field(default_factory=dict)

    def check(self, value: Any, path: str, ctx: Context) -> Any:
        if not isinstance(value, dict):
            ctx.problems.add(path, f"expected a JSON object, got {describe(value)}")
            return INVALID
        out = dict(value)
        for name, kind in self.known.items():
            given = value[name] if name in value else kind.default_value(out, ctx)
            if given is not ABSENT:
                out[name] = kind.check(given, join(path, name), ctx)
        return out

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "object"}
        if self.known:
            out["properties"] = {k: v.schema() for k, v in self.known.items()}
        return self.annotate(out)

    def type_doc(self) -> str:
        return "object"

    def children(self, path: str) -> list[tuple[str, Kind]]:
        return [(f"{path}.{k}", v) for k, v in self.known.items()]


@kind_dataclass
class List(Kind):
    item: Kind
    min_items: int = 0
    max_items: int = 100
    unique: bool = False

    def check(self, value: Any, path: str, ctx: Context) -> Any:
        if (not isinstance(value, list) or not self.min_items <= len(value) <= self.max_items
                or (self.unique and len({json.dumps(v, sort_keys=True) for v in value}) != len(value))):
            what = "distinct " if self.unique else ""
            ctx.problems.add(path, f"expected a list of {self.min_items}-{self.max_items} {what}items, got "
                                   f"{describe(value)}")
            return INVALID
        out = [self.item.check(v, join(path, i), ctx) for i, v in enumerate(value)]
        return out if valid(*out) else INVALID

    def schema(self) -> dict[str, Any]:
        out = {"type": "array", "items": self.item.schema(), "minItems": self.min_items, "maxItems": self.max_items}
        if self.unique:
            out["uniqueItems"] = True
        return self.annotate(out)

    def type_doc(self) -> str:
        kind = self.item.type_doc()
        return f"list of {kind}s" if kind in ("string", "object") else "list"

    def allowed_doc(self) -> str:
        return f"{self.min_items}-{self.max_items} {'distinct ' if self.unique else ''}items"

    def children(self, path: str) -> list[tuple[str, Kind]]:
        return [(f"{path}[i]", self.item)]


@kind_dataclass
class Obj(Kind):
    """An object with only the declared fields, resolved in declaration order (defaults may read earlier ones).

    `each`: the docs show the fields as one `<each>` row (the data channels share one kind)."""

    fields: dict[str, Kind]
    min_fields: int = 0
    each: str | None = None

    def check(self, value: Any, path: str, ctx: Context) -> Any:
        if not isinstance(value, dict):
            ctx.problems.add(path, f"expected an object with fields {', '.join(sorted(self.fields))}, got "
                                   f"{describe(value)}")
            return INVALID
        out: dict[str, Any] = ctx.root if not path else {}
        allowed = ", ".join(sorted(self.fields))
        for key in value:
            if key not in self.fields:
                hint = "" if ctx.problems.full else _hint(key, self.fields)
                ctx.problems.add(join(path, key), f"unknown field; allowed: {allowed}{hint}")
        if len(value) < self.min_fields:
            ctx.problems.add(path, "empty; set at least one of " + allowed)
        for name, kind in self.fields.items():
            where = join(path, name)
            if name in value:
                resolved = kind.check(value[name], where, ctx)
            elif kind.required:
                ctx.problems.add(where, "required field is missing")
                resolved = INVALID
            else:
                default = kind.default_value(out, ctx)
                resolved = ABSENT if default is ABSENT else kind.check(default, where, ctx)
            if resolved is not ABSENT and kind.keep:
                out[name] = resolved
        return out

    def schema(self) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "object", "properties": {k: v.schema() for k, v in self.fields.items()},
                               "additionalProperties": False}
        required = [k for k, v in self.fields.items() if v.required]
        if required:
            out["required"] = required
        if self.min_fields:
            out["minProperties"] = self.min_fields
        return self.annotate(out)

    def type_doc(self) -> str:
        return "object"

    def default_doc(self) -> str:
        return "all defaults" if self.default == {} else super().default_doc()

    def children(self, path: str) -> list[tuple[str, Kind]]:
        if self.each:
            return [(f"{path}.{self.each}", replace(next(iter(self.fields.values())), required=False))]
        return [(f"{path}.{k}" if path else k, v) for k, v in self.fields.items()]


@kind_dataclass
class Map(Kind):
    """An object of user-chosen keys (tags): each key and value checked by its own kind."""

    key: Str
    value: Kind
    max_items: int

    def check(self, value: Any, path: str, ctx: Context) -> Any:
        if not isinstance(value, dict) or len(value) > self.max_items:
            ctx.problems.add(path, f"expected an object of at most {self.max_items} entries, got {describe(value)}")
            return INVALID
        out = {}
        for key, item in value.items():
            where = join(path, key)
            out[key] = self.value.check(item, where, ctx) if valid(self.key.check(key, where, ctx)) else INVALID
        return out if valid(*out.values()) else INVALID

    def schema(self) -> dict[str, Any]:
        return self.annotate({"type": "object", "propertyNames": self.key.schema(),
                              "additionalProperties": self.value.schema(), "maxProperties": self.max_items})

    def type_doc(self) -> str:
        return "object"

    def allowed_doc(self) -> str:
        return f"at most {self.max_items}; keys: {self.key.what}; values: {self.value.allowed_doc()}"


def _hint(key: str, names: Any) -> str:
    import difflib  # only when a spec has an unknown field (a cold start need not pay for it)

    close = difflib.get_close_matches(str(key)[:100], list(names), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""
