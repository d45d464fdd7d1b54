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
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Any

MAGIC = b"PAR1"
TAIL_BYTES = 64 * 1024  # one ranged read covers the footer of most files
MAX_FOOTER_BYTES = 8 * 1024 * 1024

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
        self.data, self.pos = data, 0

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
            self.pos += 8
            return None
        if kind == _BINARY:
            return self.binary()
        if kind in (_LIST, _SET):
            head = self.byte()
            size, item = head >> 4, head & 0x0F
            if size == 15:
                size = self.varint()
            return [self.byte() == 1 if item in (_TRUE, _FALSE) else self.value(item) for _ in range(size)]
        if kind == _MAP:
            size = self.varint()
            if size:
                types = self.byte()
                for _ in range(size):
                    self.value(types >> 4)
                    self.value(types & 0x0F)
            return None
        if kind == _STRUCT:
            return self.struct()
        raise ParquetError(f"an unknown Thrift type {kind} in the footer")

    def struct(self, stop_after: int | None = None) -> dict[int, Any]:
        fields: dict[int, Any] = {}
        last = 0
        while True:
            fid, kind = self.field_header(last)
            if kind == _STOP:
                return fields
            fields[fid] = self.value(kind)
            last = fid
            if stop_after is not None and fid >= stop_after:
                return fields  # the rest (row groups, ...) is not needed


def parse_footer(metadata: bytes) -> Footer:
    """The top-level columns and row count of a FileMetaData (the bytes before length and magic)."""
    fields = _Reader(metadata).struct(stop_after=_NUM_ROWS)
    schema = fields.get(_SCHEMA)
    if not isinstance(schema, list) or not schema or not isinstance(schema[0], dict):
        raise ParquetError("the footer has no schema")
    columns, pos = [], 1
    for _ in range(int(schema[0].get(_NUM_CHILDREN) or 0)):
        if pos >= len(schema):
            raise ParquetError("the footer's schema is shorter than its root says")
        columns.append(bytes(schema[pos].get(_NAME) or b"").decode("utf-8", "replace"))
        pos = _skip_subtree(schema, pos)
    return Footer(columns=columns, num_rows=int(fields.get(_NUM_ROWS) or 0))


def _skip_subtree(schema: list[dict[int, Any]], pos: int) -> int:
    """The index after the element at `pos` and all its descendants (depth-first order)."""
    pending = 1
    while pending:
        if pos >= len(schema):
            raise ParquetError("the footer's schema is shorter than its elements say")
        pending += int(schema[pos].get(_NUM_CHILDREN) or 0) - 1
        pos += 1
    return pos
