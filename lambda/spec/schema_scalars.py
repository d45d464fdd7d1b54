"""The run spec's value kinds (schema.py): integers, numbers, constants, booleans, enums, strings, and a
string of one of two kinds picked by its prefix."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from hfsm_lambda.spec.charsets import Charset
from hfsm_lambda.spec.schema_base import INVALID, Context, Kind, describe, kind_dataclass, portable


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
