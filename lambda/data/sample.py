"""What the data check (preflight.py) read: one file's `Sample`, a `Channel`'s samples, and how data-chosen
text (keys, labels, column names) is shown in a message."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SHOWN = 20  # columns listed in a message
READ_CHANNELS = ("train", "validation")  # the channels the training code reads


@dataclass
class Sample:
    """What one file's sample showed."""

    uri: str
    fmt: str
    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)  # parsed rows (not for Parquet)
    empty: bool = False
    problem: str | None = None  # why it cannot be read as the job would read it
    unread: str | None = None  # why it was not judged (too large a single document, no permission)


@dataclass
class Channel:
    name: str
    uri: str
    samples: list[Sample] = field(default_factory=list)

    @property
    def readable(self) -> list[Sample]:
        return [s for s in self.samples if not s.problem and not s.unread and not s.empty and s.columns]

    @property
    def columns(self) -> list[str]:
        first = self.readable
        return first[0].columns if first else []

    @property
    def shown(self) -> str:
        """Where the columns were read, for messages."""
        first = self.readable
        return first[0].uri if first else self.uri


def printable(text: str) -> str:
    """Data-chosen text (keys, labels) for a message: control characters escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def names(columns: list[str]) -> str:
    """Columns for a message: the first SHOWN, then how many more."""
    shown = ", ".join(repr(c) for c in columns[:SHOWN])
    return shown + (f" and {len(columns) - SHOWN} more" if len(columns) > SHOWN else "") if columns else "no columns"
