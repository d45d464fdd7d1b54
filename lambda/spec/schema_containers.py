"""The run spec's container kinds (schema.py): a free JSON object with some known keys, a list, an object of
declared fields, and a map of user-chosen keys."""

from __future__ import annotations

import json
from dataclasses import field, replace
from typing import Any

from hfsm_lambda.spec.schema_base import ABSENT, INVALID, Context, Kind, describe, kind_dataclass, valid
from hfsm_lambda.spec.schema_scalars import Str
from hfsm_lambda.spec.strict_json import join


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
