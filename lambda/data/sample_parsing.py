"""How the data check parses a file's sample (preflight.py) the way the training code reads the file: gzip
inflated as far as the prefix goes, UTF-8, then JSON lines, JSON (SQuAD's nested format, a list of records, JSON
lines, or a dict of columns) or CSV. A sample cut at `SAMPLE_BYTES` is read up to its last whole line or record.
Pure: every function takes text (or bytes) and returns (columns, rows) or raises ValueError saying what is wrong.
"""

from __future__ import annotations

import csv
import io
import json
import zlib
from typing import Any

from contract import data_files

SAMPLE_BYTES = 256 * 1024  # read per file (JSON lines, CSV, JSON)
MAX_ROWS = 200  # rows parsed per file
MAX_INFLATED = 4 * SAMPLE_BYTES  # of a gzip-compressed sample
SQUAD_COLUMNS = ["id", "title", "context", "question", "answers"]  # hftrain.data.files.flatten_squad's rows
HEAD_CHARS = 4096  # what a .json file's start is judged on (SQuAD, a list)
SEPARATORS = " \t\r\n,"  # between the records of a JSON list

Rows = list[dict[str, Any]]


def decode(raw: bytes, whole: bool, gz: bool) -> tuple[str, bool]:
    """(decoded text, whole): a gzip prefix is inflated as far as it goes; a cut sample ends at its last line."""
    if gz:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            raw = inflater.decompress(raw, MAX_INFLATED)
        except zlib.error as err:
            raise ValueError(f"is not gzip data ({err})") from None
        whole = whole and inflater.eof
    if not whole:
        raw = raw[: raw.rfind(b"\n") + 1]  # a newline byte never occurs inside a UTF-8 sequence
    try:
        return raw.decode("utf-8"), whole
    except UnicodeDecodeError as err:
        raise ValueError(f"is not UTF-8 text (byte {err.start})") from None


def columns_of(rows: Rows) -> list[str]:
    """Every column any row has, in the order first seen."""
    return list(dict.fromkeys(name for row in rows for name in row))


def json_lines(text: str, whole: bool) -> tuple[list[str], Rows]:
    rows: Rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"line {number} is not JSON ({err.msg} at column {err.colno}); JSON lines files hold "
                             "one JSON object per line") from None
        if not isinstance(row, dict):
            raise ValueError(f"line {number} is a JSON {type(row).__name__}, not an object of column -> value")
        rows.append(row)
        if len(rows) >= MAX_ROWS:
            break
    return columns_of(rows), rows


def _is_squad(head: str) -> bool:
    return head.startswith("{") and '"data"' in head and ('"paragraphs"' in head or '"version"' in head)


def _skip_separators(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in SEPARATORS:
        pos += 1
    return pos


def _records(text: str, whole: bool) -> Rows:
    """The objects of a JSON list, decoded one at a time (at most MAX_ROWS); a cut sample stops before the record
    it ends in."""
    decoder, rows, pos = json.JSONDecoder(), [], text.index("[") + 1
    while len(rows) < MAX_ROWS:
        pos = _skip_separators(text, pos)
        if pos >= len(text) or text[pos] == "]":
            break
        try:
            row, pos = decoder.raw_decode(text, pos)
        except json.JSONDecodeError as err:
            if whole:
                raise ValueError(f"is not valid JSON ({err.msg} at line {err.lineno})") from None
            break  # the sample ends inside a record
        if not isinstance(row, dict):
            raise ValueError(f"is a JSON list of {type(row).__name__}, not of objects (records)")
        rows.append(row)
    return rows


def _starts_with_an_object_line(text: str) -> bool:
    """The first non-blank line is a whole JSON object: a .json file holding JSON lines."""
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        return isinstance(json.loads(first), dict)
    except json.JSONDecodeError:
        return False


def _dict_of_columns(text: str) -> tuple[list[str], Rows]:
    """A whole document of columns: {column: [values, ...]}."""
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"is not valid JSON ({err.msg} at line {err.lineno})") from None
    if isinstance(document, dict) and all(isinstance(v, list) for v in document.values()):
        rows = [dict(zip(document, values, strict=False)) for values in zip(*document.values(), strict=False)]
        return list(document), rows[:MAX_ROWS]
    raise ValueError("is neither records, JSON lines nor a dict of columns")


def json_document(text: str, whole: bool) -> tuple[list[str], Rows] | None:
    """A .json file: SQuAD's nested format, a list of records, JSON lines, or (whole) a dict of columns; None when
    a single document larger than the sample cannot be judged."""
    head = text[:HEAD_CHARS].lstrip()
    if _is_squad(head):
        return SQUAD_COLUMNS, []  # flattened by the training code (hftrain.data.files.flatten_squad)
    if head.startswith("["):
        rows = _records(text, whole)
        return (columns_of(rows), rows) if rows else None
    if _starts_with_an_object_line(text):
        return json_lines(text, whole)
    if not whole:
        return None
    return _dict_of_columns(text)


def csv_rows(text: str, whole: bool) -> tuple[list[str], Rows]:
    if data_files.tab_separated(text):  # said as it is, not as the CSV parse of one long column it would give
        raise ValueError(data_files.TAB_SEPARATED)
    records = list(csv.reader(io.StringIO(text)))
    if not whole and len(records) > 1:
        records = records[:-1]  # the cut may fall inside a quoted field
    if not records:
        return [], []
    header = records[0]
    rows = [dict(zip(header, record, strict=False)) for record in records[1:MAX_ROWS + 1]]
    return header, rows
