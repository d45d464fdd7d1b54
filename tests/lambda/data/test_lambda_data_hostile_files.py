"""Data files made to spin or crash the pre-flight (issue 36, finding 3): the Parquet footer reader is bounded by
the footer's bytes and nesting, and every parser failure (csv's field limit, json's nesting, a footer of the wrong
types) becomes the pre-flight's message about the file, never an exception out of Prepare."""

from __future__ import annotations

import io
import struct
import time

import pytest

from hfsm_lambda.data import parquet_footer
from hfsm_lambda.data.preflight import read_sample


def varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte, n = n & 0x7F, n >> 7
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def parquet(meta: bytes) -> bytes:
    return b"PAR1" + meta + struct.pack("<I", len(meta)) + b"PAR1"


class S3:
    """GetObject with Range over one object in memory."""

    def __init__(self, data: bytes) -> None:
        self.data = data

    def get_object(self, Bucket: str, Key: str, Range: str) -> dict:  # noqa: N803 - the API's names
        first, last = (int(x) for x in Range.removeprefix("bytes=").split("-"))
        return {"Body": io.BytesIO(self.data[first:last + 1])}


FOOTERS = {
    # FileMetaData.schema (field 2) as a list claiming 2**60 doubles (8 bytes each, never there)
    "a list of 2**60 doubles": b"\x29\xf7" + varint(2**60),
    # a map of 2**60 boolean pairs: each element reads nothing in a reader that forgets booleans are bytes there
    "a map of 2**60 booleans": b"\x2b" + varint(2**60) + b"\x11",
    # structs nested 100,000 deep
    "structs nested 100,000 deep": b"\x2c" + b"\x1c" * 100_000,
    # a schema whose root's child count is a list
    "a child count that is a list": b"\x29\x1c" + b"\x59\x15\x02" + b"\x00" + b"\x00",
}


@pytest.mark.parametrize("name", FOOTERS)
def test_a_hostile_footer_is_a_parquet_error_at_once(name):
    started = time.process_time()
    with pytest.raises(parquet_footer.ParquetError):
        parquet_footer.parse_footer(FOOTERS[name])
    assert time.process_time() - started < 2.0  # bounded by the footer's bytes (a wall-time-free sanity bound)


@pytest.mark.parametrize("name", FOOTERS)
def test_a_hostile_parquet_file_is_the_pre_flight_s_message(name):
    data = parquet(FOOTERS[name])
    sample = read_sample(S3(data), "b", "d/train/a.parquet", len(data), "parquet")
    assert sample.problem.startswith("s3://b/d/train/a.parquet ") and sample.problem.endswith("(read as Parquet)")


@pytest.mark.parametrize(("fmt", "text"), [
    ("csv", "text,label\n" + "x" * 200_000 + ",1\n"),  # over csv's field limit (131,072): csv.Error
    ("jsonl", "[" * 100_000 + "]" * 100_000 + "\n"),  # deeper than json's recursion: RecursionError
    ("json", "[" + "[" * 100_000 + "]" * 100_000 + "]"),
])
def test_every_parser_failure_is_the_pre_flight_s_message(fmt, text):
    data = text.encode()
    sample = read_sample(S3(data), "b", f"d/train/a.{fmt}", len(data), fmt)
    assert sample.problem and sample.problem.startswith(f"s3://b/d/train/a.{fmt} "), sample
