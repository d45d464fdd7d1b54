"""Character sets that AWS APIs define by Unicode general category (botocore's service models).

`\\p{L}\\p{Z}\\p{N}` (tag keys and values, model package metadata) and `[\\p{L}\\p{M}\\p{Z}\\p{S}\\p{N}\\p{P}]`
(model package descriptions) are Java regex classes; Python's `re` has no `\\p{..}`. A `Charset` checks text
with `unicodedata` at run time and, for the JSON Schema, renders the same set as an explicit class of ranges
that both Python's `re` and ECMAScript (`u` flag, as editors use) read alike.
"""

from __future__ import annotations

import sys
import unicodedata
from dataclasses import dataclass
from functools import cache

# Java's `.` stops at these (botocore patterns like HyperParameterValue `.*` are matched without DOTALL).
LINE_TERMINATORS = frozenset("\n\r\x85\u2028\u2029")


@dataclass(frozen=True)
class Charset:
    """Characters whose general category starts with one of `categories` (e.g. "L" or "Zs"), plus `extra`;
    `negate` inverts the set (then `extra` are excluded as well)."""

    categories: tuple[str, ...]
    extra: str = ""
    negate: bool = False
    doc: str = ""

    def contains(self, char: str) -> bool:
        category = unicodedata.category(char)
        inside = char in self.extra or category in self.categories or category[0] in self.categories
        return inside != self.negate

    def ok(self, text: str) -> bool:
        return all(self.contains(c) for c in text)

    def regex_class(self) -> str:
        return _regex_class(self)


def _escape(code: int) -> str:
    char = chr(code)
    if char.isalnum() and code < 128:
        return char
    if code > 0xFFFF:
        return char  # a literal astral character: `\U...` is Python only, `\u{...}` ECMAScript only
    return f"\\u{code:04x}"


@cache
def _regex_class(charset: Charset) -> str:
    """`[...]` listing every code point of the set (slow: for generating the schema, not for Prepare)."""
    ranges: list[tuple[int, int]] = []
    start = None
    for code in range(sys.maxunicode + 2):
        inside = code <= sys.maxunicode and charset.contains(chr(code))
        if inside and start is None:
            start = code
        elif not inside and start is not None:
            ranges.append((start, code - 1))
            start = None
    body = "".join(_escape(a) if a == b else f"{_escape(a)}-{_escape(b)}" for a, b in ranges)
    return f"[{body}]"


TAG = Charset(("L", "Z", "N"), "_.:/=+-@", doc="letters, digits, spaces and `_.:/=+-@`")
DESCRIPTION = Charset(("L", "M", "Z", "S", "N", "P"),
                      doc="letters, marks, spaces, symbols, digits and punctuation (no control or format characters)")
# Printable, no spaces: Cc control, Cf format (zero-width joiner, BOM, bidi overrides), Cs surrogates,
# Co private use, Z* separators; backslash too (S3 keys with it do not round-trip through SageMaker URIs).
VISIBLE = Charset(("Cc", "Cf", "Cs", "Co", "Z"), "\\", negate=True,
                  doc="visible characters: no spaces, control or format characters, no backslash")
NO_CONTROL = Charset(("Cc", "Cf", "Cs"), negate=True, doc="no control or format characters")
