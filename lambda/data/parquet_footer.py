"""What a Parquet file's footer says about its columns and rows, read with the standard library. Pure.

A Parquet file ends with its metadata (`FileMetaData`, Thrift compact protocol), a 4-byte little-endian length
and the magic `PAR1` (apache/parquet-format: README "File format", parquet.thrift). Prepare reads the last
`TAIL_BYTES` of an object with one ranged GET (a second one when the footer is longer) and gets here:
- the top-level column names (the root schema element's children, in order; nested columns count as one),
- the row count (`num_rows`).
Values (labels, answers) live in the data pages (compressed, encoded per column): they are not read here, so the
data check cannot judge Parquet values; the training code does when it loads the data.

Only the fields before `row_groups` are decoded (version, schema, num_rows; Thrift writers emit fields in id
order), so a footer of many row groups costs no more to read than a small one.

The footer is data anyone who can upload a dataset chose, so decoding it is bounded by its bytes: every element of
a list or map takes at least one byte (a container claiming more elements than bytes are left is refused before
any is read), structs nest at most MAX_DEPTH deep, and every failure is a ParquetError (never a RecursionError,
TypeError or a loop of 2**60 iterations).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

MAGIC = b"PAR1"
TAIL_BYTES = 64 * 1024  # one ranged read covers the footer of most files
MAX_FOOTER_BYTES = 8 * 1024 * 1024
MAX_DEPTH = 32  # nested structs/containers; parquet.thrift's FileMetaData needs fewer than 8

# Thrift compact protocol type ids
_STOP, _TRUE, _FALSE, _BYTE, _I16, _I32, _I64, _DOUBLE, _BINARY, _LIST, _SET, _MAP, _STRUCT = range(13)
# FileMetaData field ids (parquet.thrift)
_SCHEMA, _NUM_ROWS = 2, 3
# SchemaElement field ids
_NAME, _NUM_CHILDREN = 4, 5


class ParquetError(ValueError):
    """Not a Parquet file, or a footer this reader cannot decode; the message says which."""


@dataclass(frozen=True)
class Footer:
    columns: list[str]
    num_rows: int


def footer_length(tail: bytes) -> int:
    """The metadata's length from the file's last 8 bytes (ParquetError when the magic is missing)."""
    if len(tail) < 8 or tail[-4:] != MAGIC:
        raise ParquetError("does not end with the Parquet magic bytes PAR1 (not a Parquet file, or cut short)")
    (length,) = struct.unpack("<I", tail[-8:-4])
    return length


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos, self.depth = data, 0, 0

    def elements(self, size: int) -> int:
        """`size` when that many elements (at least one byte each) can fit in what is left."""
        if size > len(self.data) - self.pos:
            raise ParquetError(f"a list of {size} elements in a footer with {len(self.data) - self.pos} bytes left")
        return size

    def nested(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ParquetError(f"the footer nests deeper than {MAX_DEPTH} levels")

    def byte(self) -> int:
        if self.pos >= len(self.data):
            raise ParquetError("the footer ends too early")
        value = self.data[self.pos]
        self.pos += 1
        return value

    def varint(self) -> int:
        shift = result = 0
        while True:
            b = self.byte()
            result |= (b & 0x7F) << shift
            if not b & 0x80:
                return result
            shift += 7
            if shift > 70:
                raise ParquetError("a malformed integer in the footer")

    def zigzag(self) -> int:
        n = self.varint()
        return (n >> 1) ^ -(n & 1)

    def binary(self) -> bytes:
        size = self.varint()
        if self.pos + size > len(self.data):
            raise ParquetError("the footer ends too early")
        value = self.data[self.pos:self.pos + size]
        self.pos += size
        return value

    def field_header(self, last: int) -> tuple[int, int]:
        """(field id, type); type _STOP ends the struct."""
        b = self.byte()
        kind = b & 0x0F
        if kind == _STOP:
            return 0, _STOP
        delta = b >> 4
        return (last + delta if delta else self.zigzag()), kind

    def value(self, kind: int) -> Any:
        if kind in (_TRUE, _FALSE):
            return kind == _TRUE
        if kind == _BYTE:
            return self.byte()
        if kind in (_I16, _I32, _I64):
            return self.zigzag()
        if kind == _DOUBLE:
            if self.pos + 8 > len(self.data):
                raise ParquetError("the footer ends too early")
            self.pos += 8
            return None
        if kind == _BINARY:
            return self.binary()
        if kind in (_LIST, _SET):
            head = self.byte()
            size, item = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            self.nested()
            items = [self.element(item) for _ in range(self.elements(size))]
            self.depth -= 1
            return items
        if kind == _MAP:
            size = self.varint()
            if size:
                types = self.byte()
                self.nested()
                for _ in range(self.elements(size)):
                    self.element(types >> 4)
                    self.element(types & 0x0F)
                self.depth -= 1
            return None
        if kind == _STRUCT:
            return self.struct()
        raise ParquetError(f"an unknown Thrift type {kind} in the footer")

    def element(self, kind: int) -> Any:
        """A container's element: in the compact protocol a boolean element is a byte of its own."""
        return self.byte() == 1 if kind in (_TRUE, _FALSE) else self.value(kind)

    def struct(self, stop_after: int | None = None) -> dict[int, Any]:
        self.nested()
        fields: dict[int, Any] = {}
        last = 0
        while True:
            fid, kind = self.field_header(last)
            if kind == _STOP:
                self.depth -= 1
                return fields
            fields[fid] = self.value(kind)
            last = fid
            if stop_after is not None and fid >= stop_after:
                self.depth -= 1
                return fields  # the rest (row groups, ...) is not needed


def parse_footer(metadata: bytes) -> Footer:
    """The top-level columns and row count of a FileMetaData (the bytes before length and magic)."""
    fields = _Reader(metadata).struct(stop_after=_NUM_ROWS)
    schema = fields.get(_SCHEMA)
    if not isinstance(schema, list) or not schema or not all(isinstance(e, dict) for e in schema):
        raise ParquetError("the footer has no schema")
    columns, pos = [], 1
    for _ in range(_count(schema[0])):
        if pos >= len(schema):
            raise ParquetError("the footer's schema is shorter than its root says")
        name = schema[pos].get(_NAME) or b""
        if not isinstance(name, bytes):
            raise ParquetError("a column of the footer's schema has a name that is not text")
        columns.append(name.decode("utf-8", "replace"))
        pos = _skip_subtree(schema, pos)
    rows = fields.get(_NUM_ROWS) or 0
    if not isinstance(rows, int) or isinstance(rows, bool):
        raise ParquetError("the footer's row count is not a number")
    return Footer(columns=columns, num_rows=rows)


def _count(element: dict[int, Any]) -> int:
    """A schema element's number of children (ParquetError when it is not a number >= 0)."""
    children = element.get(_NUM_CHILDREN) or 0
    if not isinstance(children, int) or isinstance(children, bool) or children < 0:
        raise ParquetError("a schema element of the footer has a child count that is not a number >= 0")
    return children


def _skip_subtree(schema: list[dict[int, Any]], pos: int) -> int:
    """The index after the element at `pos` and all its descendants (depth-first order)."""
    pending = 1
    while pending:
        if pos >= len(schema):
            raise ParquetError("the footer's schema is shorter than its elements say")
        pending += _count(schema[pos]) - 1
        pos += 1
    return pos
