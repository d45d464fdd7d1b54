"""Reading the map's input shard: text, JSON lines and Parquet files, as the single-node trainer would see them.

- text (`.txt`, `.text`, anything with `--input-format text`): one sequence per line, the line ending kept,
  exactly as `tokenizers`' `Tokenizer.train(files)` reads files;
- JSON lines (`.jsonl`, `.json`, `.ndjson`): one sequence per record, the value of the text field;
- Parquet (`.parquet`): one sequence per row of the text-field column.
`.gz` text and JSON lines files are read transparently. Null values are skipped; a missing field, a value
that is not a string, or bytes that are not UTF-8 are errors naming the file and the line or row.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from .container import JobError, human_bytes

log = logging.getLogger("tokenizer_mr")

FORMATS = ("auto", "text", "jsonl", "parquet")
_EXT = {".txt": "text", ".text": "text", ".jsonl": "jsonl", ".json": "jsonl", ".ndjson": "jsonl", ".parquet": "parquet"}
_IGNORED_NAMES = {"_SUCCESS", "manifest", ".DS_Store"}


def file_format(path: Path, fmt: str) -> str:
    if fmt != "auto":
        return fmt
    name = path.name[:-3] if path.name.endswith(".gz") else path.name
    ext = os.path.splitext(name)[1].lower()
    if ext in _EXT:
        return _EXT[ext]
    raise JobError(
        f"cannot tell the format of {path} from its extension; use .txt/.jsonl/.parquet names or "
        "--input-format text|jsonl|parquet"
    )


def list_input_files(input_dir: Path) -> list[Path]:
    """All data files under `input_dir` (recursively, sorted); a missing or empty directory gives []."""
    if not input_dir.exists():
        return []
    files = []
    for root, dirs, names in os.walk(input_dir):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for n in sorted(names):
            if n.startswith(".") or n in _IGNORED_NAMES:
                continue
            files.append(Path(root) / n)
    return sorted(files)


@dataclass
class ReadStats:
    files: int = 0
    sequences: int = 0
    skipped_nulls: int = 0
    bytes: int = 0  # bytes of the input files read so far (compressed size for .gz)
    names: list[str] = field(default_factory=list)


class ProgressLog:
    """Logs throughput and ETA every `every` seconds."""

    def __init__(self, total_bytes: int, label: str, every: float = 15.0):
        self.total = total_bytes
        self.label = label
        self.every = every
        self.t0 = time.monotonic()
        self.next = self.t0 + every

    def maybe(self, done_bytes: int, extra: str = "") -> None:
        now = time.monotonic()
        if now < self.next:
            return
        self.next = now + self.every
        elapsed = now - self.t0
        rate = done_bytes / elapsed if elapsed > 0 else 0.0
        pct = 100.0 * done_bytes / self.total if self.total else 100.0
        eta = (self.total - done_bytes) / rate if rate > 0 else float("nan")
        log.info(
            "%s: %s / %s (%.0f%%), %s/s, ETA %.0f s%s",
            self.label, human_bytes(done_bytes), human_bytes(self.total), pct, human_bytes(rate), eta,
            f" {extra}" if extra else "",
        )


def _open_binary(path: Path):
    fh = open(path, "rb")  # noqa: SIM115 - closed by the caller's context
    if path.name.endswith(".gz"):
        return gzip.GzipFile(fileobj=fh), fh
    return fh, fh


def _decode(raw: bytes, path: Path, lineno: int) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JobError(f"{path} line {lineno} is not UTF-8 ({exc.reason} at byte {exc.start})") from None


def _text_sequences(path: Path, stats: ReadStats, stream) -> Iterator[str]:
    # Binary lines end at b"\n" only and keep it, like tokenizers' `lines_with_ending`.
    for lineno, raw in enumerate(stream, 1):
        stats.sequences += 1
        yield _decode(raw, path, lineno)


def _jsonl_sequences(path: Path, text_field: str, stats: ReadStats, stream) -> Iterator[str]:
    for lineno, raw in enumerate(stream, 1):
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except ValueError as exc:
            raise JobError(f"{path} line {lineno} is not JSON: {exc}") from None
        if not isinstance(record, dict) or text_field not in record:
            raise JobError(f"{path} line {lineno} has no field {text_field!r} (set --text-field)")
        value = record[text_field]
        if value is None:
            stats.skipped_nulls += 1
            continue
        if not isinstance(value, str):
            raise JobError(f"{path} line {lineno}: field {text_field!r} is {type(value).__name__}, not text")
        stats.sequences += 1
        yield value


def _parquet_sequences(path: Path, text_field: str, stats: ReadStats) -> Iterator[str]:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise JobError(f"cannot read {path} as Parquet: {exc}") from None
    schema = pf.schema_arrow
    if text_field not in schema.names:
        raise JobError(f"{path} has no column {text_field!r} (columns: {', '.join(schema.names)}; set --text-field)")
    col_type = schema.field(text_field).type
    if not (pa.types.is_string(col_type) or pa.types.is_large_string(col_type)):
        raise JobError(f"{path}: column {text_field!r} is {col_type}, not a string column")
    for batch in pf.iter_batches(batch_size=8192, columns=[text_field]):
        for value in batch.column(0).to_pylist():
            if value is None:
                stats.skipped_nulls += 1
                continue
            stats.sequences += 1
            yield value


def iter_sequences(files: list[Path], fmt: str, text_field: str, stats: ReadStats, label: str) -> Iterator[str]:
    """The sequences of `files` in order, logging progress; `stats` is updated as they are read."""
    sizes = [f.stat().st_size for f in files]
    progress = ProgressLog(sum(sizes), label)
    done_before = 0
    for i, (path, size) in enumerate(zip(files, sizes, strict=True), 1):
        kind = file_format(path, fmt)
        log.info("%s: file %d/%d %s (%s, %s)", label, i, len(files), path.name, kind, human_bytes(size))
        stats.files += 1
        stats.names.append(path.name)
        if kind == "parquet":
            for seq in _parquet_sequences(path, text_field, stats):
                yield seq
                if stats.sequences % 4096 == 0:
                    progress.maybe(done_before + size // 2)
        else:
            stream, raw = _open_binary(path)
            with raw:
                if kind == "text":
                    gen = _text_sequences(path, stats, stream)
                else:
                    gen = _jsonl_sequences(path, text_field, stats, stream)
                for seq in gen:
                    yield seq
                    if stats.sequences % 4096 == 0:
                        progress.maybe(done_before + raw.tell())
        done_before += size
        stats.bytes = done_before
        progress.maybe(done_before)
