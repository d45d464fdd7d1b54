"""JSON object <-> frozen dataclass, driven by the dataclass's type hints. Standard library only.

`decode(cls, value)` builds `cls` from a JSON object: every key must be a field (an unknown key is an error), a
field without a default must be there, and the value must fit the field's type: a nested dataclass, `X | None`,
`tuple[X, ...]` (a JSON list), `Mapping[str, Any]` (a free-form object, copied), or a scalar (`str`, `int`,
`float`, `bool`, `Any`, or a union of them). `encode(obj)` writes the same JSON back: the keys in field order, a
field declared with `absent()` left out while it is None (an optional field the resolved JSON does not hold), every
other field written even when None (a JSON null). So `encode(decode(cls, x)) == x` for every `x` that `decode`
accepts and that holds its keys in field order; a `ValueError` names the path of what does not fit.
"""

from __future__ import annotations

import copy
import dataclasses
import types
import typing
from collections.abc import Mapping
from functools import cache
from typing import Any, TypeVar

T = TypeVar("T")
_ABSENT_WHEN_NONE = "absent_when_none"


def absent() -> Any:
    """A field that is None when its key is absent from the JSON, and left out of the JSON while it is None."""
    return dataclasses.field(default=None, metadata={_ABSENT_WHEN_NONE: True})


def omitted_when_none(f: dataclasses.Field[Any]) -> bool:
    return bool(f.metadata.get(_ABSENT_WHEN_NONE))


@cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def fields(cls: type) -> list[tuple[dataclasses.Field[Any], Any]]:
    """(field, resolved type) of a dataclass, in declaration order."""
    hints = _hints(cls)
    return [(f, hints[f.name]) for f in dataclasses.fields(cls)]


def _join(path: str, key: Any) -> str:
    return f"{path}[{key}]" if isinstance(key, int) else f"{path}.{key}" if path else str(key)


def _scalar_fits(hint: Any, value: Any) -> bool:
    if hint is Any:
        return True
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, hint)


def _decode(hint: Any, value: Any, path: str) -> Any:
    origin = typing.get_origin(hint)
    if dataclasses.is_dataclass(hint):
        return decode(hint, value, path)
    if origin in (typing.Union, types.UnionType):
        options = typing.get_args(hint)
        if value is None:
            if type(None) in options:
                return None
            raise ValueError(f"{path or '(root)'}: null is not allowed")
        others = [o for o in options if o is not type(None)]
        if len(others) == 1:
            return _decode(others[0], value, path)
        if all(_simple(o) for o in others):
            if any(_scalar_fits(o, value) for o in others):
                return value
            raise ValueError(f"{path}: {type(value).__name__} is not {hint}")
        raise TypeError(f"{path}: unsupported union {hint}")
    if origin is tuple:
        item = typing.get_args(hint)[0]
        if not isinstance(value, list | tuple):
            raise ValueError(f"{path}: expected a list, got {type(value).__name__}")
        return tuple(_decode(item, v, _join(path, i)) for i, v in enumerate(value))
    if origin in (Mapping, dict, typing.Mapping):
        if not isinstance(value, dict):
            raise ValueError(f"{path}: expected an object, got {type(value).__name__}")
        return copy.deepcopy(value)
    if _simple(hint):
        if not _scalar_fits(hint, value):
            raise ValueError(f"{path}: expected {getattr(hint, '__name__', hint)}, got {type(value).__name__}")
        return value
    raise TypeError(f"{path}: unsupported type {hint}")


def _simple(hint: Any) -> bool:
    return hint is Any or hint in (str, int, float, bool)


def decode(cls: type[T], value: Any, path: str = "") -> T:
    """`cls` from a JSON object; ValueError naming the path of a missing, unknown or mistyped key."""
    if not isinstance(value, dict):
        raise ValueError(f"{path or '(root)'}: expected an object, got {type(value).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}  # type: ignore[arg-type]
    unknown = [k for k in value if k not in known]
    if unknown:
        raise ValueError(f"{_join(path, unknown[0])}: not a field of {cls.__name__}")
    kwargs: dict[str, Any] = {}
    for f, hint in fields(cls):
        where = _join(path, f.name)
        if f.name in value:
            kwargs[f.name] = _decode(hint, value[f.name], where)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ValueError(f"{where}: missing")
    return cls(**kwargs)


def encode(obj: Any) -> Any:
    """The JSON of a decoded dataclass (and of the values inside it)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out: dict[str, Any] = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if value is None and omitted_when_none(f):
                continue
            out[f.name] = encode(value)
        return out
    if isinstance(obj, tuple | list):
        return [encode(v) for v in obj]
    if isinstance(obj, Mapping):
        return {k: encode(v) for k, v in obj.items()}
    return obj
