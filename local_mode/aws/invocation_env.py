"""Each emulated Lambda invocation sees its own environment, as each Lambda container does in AWS.

The handlers read their configuration from `os.environ` (PIPELINE_SETTINGS, STATE_MACHINE_ARN, AWS_REGION).
Writing a function's variables into the process environment for the length of an invocation races with the
local jobs' threads, which read the same mapping when they build AWS clients and process environments (a
`KeyError` from `os.environ.copy()` in the middle of a run). Instead, `install()` replaces `os.environ` once
with `InvocationEnviron`: outside an invocation it is the process environment, unchanged; inside one (a
context variable, so per thread and per nested invocation) the function's variables shadow the process's and
whatever the handler sets or deletes stays in that invocation. Nothing about an invocation ever reaches the
process environment, so no other thread can see it.
"""

from __future__ import annotations

import contextvars
import os
import threading
from collections.abc import Iterator, Mapping, MutableMapping
from contextlib import contextmanager

_DELETED = object()
_overlay: contextvars.ContextVar[dict[str, object] | None] = contextvars.ContextVar(
    "lambda_invocation_environment", default=None
)


class InvocationEnviron(MutableMapping[str, str]):
    """`os.environ` with a per-invocation layer; reads and writes outside an invocation go to `base`."""

    def __init__(self, base: MutableMapping[str, str]) -> None:
        self.base = base

    def _layer(self) -> dict[str, object] | None:
        return _overlay.get()

    def __getitem__(self, key: str) -> str:
        layer = self._layer()
        if layer is not None and key in layer:
            value = layer[key]
            if value is _DELETED:
                raise KeyError(key)
            return value  # type: ignore[return-value]
        return self.base[key]

    def __setitem__(self, key: str, value: str) -> None:
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"str expected, not {type(key).__name__}/{type(value).__name__}")
        layer = self._layer()
        if layer is None:
            self.base[key] = value
        else:
            layer[key] = value

    def __delitem__(self, key: str) -> None:
        layer = self._layer()
        if layer is None:
            del self.base[key]
            return
        if key not in self:
            raise KeyError(key)
        layer[key] = _DELETED

    def _keys(self) -> list[str]:
        layer = self._layer()
        base_keys = list(self.base.keys())  # one snapshot: never iterate a mapping another thread may change
        if layer is None:
            return base_keys
        keys = [k for k in base_keys if k not in layer]
        keys += [k for k, v in list(layer.items()) if v is not _DELETED]
        return keys

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys())

    def __len__(self) -> int:
        return len(self._keys())

    def __contains__(self, key: object) -> bool:
        layer = self._layer()
        if layer is not None and key in layer:
            return layer[key] is not _DELETED  # type: ignore[index]
        return key in self.base

    def copy(self) -> dict[str, str]:
        out = {}
        for key in self._keys():
            try:
                out[key] = self[key]
            except KeyError:  # removed from the process environment since the key snapshot
                continue
        return out

    def __repr__(self) -> str:
        return f"InvocationEnviron({'invocation' if self._layer() is not None else 'process'})"


_lock = threading.Lock()
_installed = 0


def install() -> None:
    """Replace `os.environ` by an InvocationEnviron (counted: nested emulators share one)."""
    global _installed
    with _lock:
        if _installed == 0 and not isinstance(os.environ, InvocationEnviron):
            os.environ = InvocationEnviron(os.environ)  # type: ignore[assignment]  # noqa: B003 - a wrapper, on purpose
        _installed += 1


def uninstall() -> None:
    global _installed
    with _lock:
        _installed = max(0, _installed - 1)
        if _installed == 0 and isinstance(os.environ, InvocationEnviron):
            os.environ = os.environ.base  # type: ignore[assignment]  # noqa: B003


@contextmanager
def invocation_environment(variables: Mapping[str, str]) -> Iterator[None]:
    """Run a block as one invocation: `variables` shadow the process environment, changes stay inside."""
    if not isinstance(os.environ, InvocationEnviron):
        raise RuntimeError("invocation_env.install() first: os.environ is the process environment")
    token = _overlay.set(dict(variables))
    try:
        yield
    finally:
        _overlay.reset(token)
