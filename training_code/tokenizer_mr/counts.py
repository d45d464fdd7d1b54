"""Word counting (the map's work) and the counts files the map writes and the reduce merges.

Counting uses `tokenizers` itself: the sequences go through `Tokenizer.train_from_iterator` with a `BpeTrainer`
that learns nothing (vocab size 0, empty alphabet), which runs exactly the normalize / pre-tokenize / count
code of the single-node trainer, on all cores (Rust threads); the counted words are then read back from the
trainer's state. If a `tokenizers` version ever stops exposing them, a slower pure-Python counter
(`normalize_str` + `pre_tokenize_str`, which produce the same words) takes over.

Counts file: Parquet (zstd), columns `word` (string) and `count` (int64), sorted by word (UTF-8 byte order),
with a JSON header in the schema metadata (key `tokenizer_mr.counts`): format and version, tokenizer type,
normalizer and pre-tokenizer as `tokenizers` serializes them, host, part, inputs and totals. The reduce
rejects files whose header does not match its own settings.
"""

from __future__ import annotations

import json
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import tokenizers
from tokenizers import trainers

from .container import JobError
from .settings import TokenizerSettings

log = logging.getLogger("tokenizer_mr")

FORMAT = "tokenizer-mr-counts"
VERSION = 1
META_KEY = b"tokenizer_mr.counts"
COUNTS_GLOB = "counts-*.parquet"


def _batches(sequences: Iterable[str], size: int = 1024) -> Iterator[list[str]]:
    batch: list[str] = []
    for s in sequences:
        batch.append(s)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


def count_words(settings: TokenizerSettings, sequences: Iterable[str]) -> dict[str, int]:
    """Word counts after the settings' normalizer and pre-tokenizer, as tokenizers' trainers count them."""
    tok = settings.pipeline()
    trainer = trainers.BpeTrainer(vocab_size=0, min_frequency=0, show_progress=False, limit_alphabet=0)
    tok.train_from_iterator(_batches(sequences), trainer=trainer)
    state = json.loads(trainer.__getstate__())
    words = state.get("BpeTrainer", {}).get("words")
    if isinstance(words, dict):
        return words
    raise RuntimeError("this tokenizers version does not expose the trainer's word counts")


def count_words_python(settings: TokenizerSettings, sequences: Iterable[str]) -> dict[str, int]:
    """The same counts computed in Python, one sequence at a time (slow; a fallback and a cross-check)."""
    tok = settings.pipeline()
    norm = tok.normalizer
    pre = tok.pre_tokenizer
    counter: Counter[str] = Counter()
    for seq in sequences:
        text = norm.normalize_str(seq) if norm is not None else seq
        counter.update(w for w, _ in pre.pre_tokenize_str(text))
    return dict(counter)


def counting_works() -> bool:
    """Whether `count_words` can read counts back from this tokenizers version."""
    try:
        state = json.loads(trainers.BpeTrainer(vocab_size=0).__getstate__())
    except Exception:  # pragma: no cover - depends on the installed version
        return False
    return isinstance(state.get("BpeTrainer", {}).get("words"), dict)


# ---- counts files -------------------------------------------------------------------------------------------
def make_header(settings: TokenizerSettings, **fields: Any) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "version": VERSION,
        "tokenizer_type": settings.tokenizer_type,
        "lowercase": settings.lowercase,
        "text_field": settings.text_field,
        "pipeline": settings.pipeline_fingerprint(),
        "tokenizers_version": tokenizers.__version__,
        **fields,
    }


def write_counts(path: Path, counts: dict[str, int], header: dict[str, Any]) -> int:
    """Write `counts` sorted by word; returns the file size. Written to a temporary name, then renamed."""
    words = pa.array(list(counts.keys()), type=pa.string())
    values = pa.array(list(counts.values()), type=pa.int64())
    table = pa.table({"word": words, "count": values})
    if table.num_rows:
        table = table.take(pc.sort_indices(table, sort_keys=[("word", "ascending")]))
    characters = int(pc.sum(pc.utf8_length(words)).as_py() or 0)  # lets the reduce size its memory up front
    header = {**header, "unique_words": table.num_rows, "characters": characters,
              "words": int(pc.sum(values).as_py() or 0)}
    table = table.replace_schema_metadata({META_KEY: json.dumps(header, sort_keys=True).encode("utf-8")})
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, tmp, compression="zstd", row_group_size=1 << 20)
    os.replace(tmp, path)
    return path.stat().st_size


def read_header(path: Path) -> dict[str, Any]:
    try:
        meta = pq.read_schema(path).metadata or {}
    except (OSError, pa.ArrowException) as exc:
        raise JobError(f"{path} is not a counts file: {exc}") from None
    raw = meta.get(META_KEY)
    if raw is None:
        raise JobError(f"{path} has no tokenizer_mr header: not written by tokenizer_map.py")
    header = json.loads(raw)
    if header.get("format") != FORMAT or header.get("version") != VERSION:
        raise JobError(f"{path}: counts format {header.get('format')} v{header.get('version')}, expected {FORMAT} v{VERSION}")
    return header


def check_header(path: Path, header: dict[str, Any], settings: TokenizerSettings) -> None:
    """The counts must come from the same normalizer and pre-tokenizer as the reduce's settings."""
    if header.get("tokenizer_type") != settings.tokenizer_type:
        raise JobError(
            f"{path.name} was counted for --tokenizer-type {header.get('tokenizer_type')}, this reduce has "
            f"{settings.tokenizer_type}: run map and reduce with the same settings"
        )
    if header.get("lowercase") != settings.lowercase:
        raise JobError(
            f"{path.name} was counted with --lowercase {str(header.get('lowercase')).lower()}, this reduce has "
            f"{str(settings.lowercase).lower()}: run map and reduce with the same settings"
        )
    if header.get("pipeline") != settings.pipeline_fingerprint():
        raise JobError(
            f"{path.name} was counted with another normalizer/pre-tokenizer (tokenizers "
            f"{header.get('tokenizers_version')} vs {tokenizers.__version__}): re-run the map with this version"
        )


@dataclass
class MergedCounts:
    words: pa.Array  # unique words (string), in no particular order
    counts: Any  # numpy int64 array, one count per word
    files: int
    hosts: list[str]
    total_words: int
    input_bytes: int
    sequences: int

    @property
    def characters(self) -> int:
        return int(pc.sum(pc.utf8_length(self.words)).as_py() or 0)


def find_counts_files(input_dir: Path) -> list[Path]:
    return sorted(p for p in input_dir.rglob(COUNTS_GLOB) if p.is_file()) if input_dir.exists() else []


def check_complete(headers: list[tuple[Path, dict[str, Any]]]) -> list[str]:
    """Every host named by the map wrote all its parts; returns the hosts."""
    expected: set[str] = set()
    parts: dict[str, list[int]] = {}
    final: dict[str, int] = {}
    for path, h in headers:
        host = str(h.get("host"))
        expected.update(h.get("hosts") or [host])
        if host in parts and h.get("part") in parts[host]:
            raise JobError(f"{path.name}: host {host} part {h.get('part')} appears twice; clear the counts prefix")
        parts.setdefault(host, []).append(h.get("part"))
        if h.get("final_part"):
            final[host] = int(h.get("part"))
    missing = sorted(expected - set(parts))
    if missing:
        raise JobError(
            f"no counts from host(s) {', '.join(missing)}: the map job did not finish on every host, or the counts "
            "prefix mixes several map runs (give each map run its own prefix)"
        )
    for host, got in parts.items():
        if host not in final or sorted(got) != list(range(final[host] + 1)):
            raise JobError(
                f"counts of host {host} are incomplete or mixed (parts {sorted(got)}, last part "
                f"{final.get(host, 'missing')}): re-run the map into an empty prefix"
            )
    return sorted(parts)


def merge_counts(
    files: list[Path],
    settings: TokenizerSettings,
    row_budget: int = 8_000_000,
    *,
    check: Callable[[int, int, str], None] | None = None,
) -> MergedCounts:
    """Sum the counts of all files (streaming: holds the running table plus about `row_budget` rows).

    `check(unique_words, characters, what)` sees lower bounds of the final table as they become known, before
    memory is spent on them: first from the files' headers (the largest file), then after each aggregation
    round (the words merged so far); it may raise to stop (the reduce's memory check)."""
    headers = [(f, read_header(f)) for f in files]
    for f, h in headers:
        check_header(f, h, settings)
    hosts = check_complete(headers)
    if check is not None and headers:
        largest = max(headers, key=lambda fh: int(fh[1].get("unique_words", 0)))
        if "characters" in largest[1]:
            check(int(largest[1]["unique_words"]), int(largest[1]["characters"]), f"counts file {largest[0].name}")
    running: pa.Table | None = None
    pending: list[pa.Table] = []
    pending_rows = 0
    for i, (f, _header) in enumerate(headers, 1):
        table = pq.read_table(f, columns=["word", "count"])
        log.info("read %s (%d/%d): %d unique words", f.name, i, len(headers), table.num_rows)
        pending.append(table)
        pending_rows += table.num_rows
        if pending_rows >= max(row_budget, running.num_rows if running is not None else 0) or i == len(headers):
            parts = ([running] if running is not None else []) + pending
            combined = pa.concat_tables(parts)
            pending, pending_rows, parts = [], 0, []
            # one thread: as fast here as several, and less CPU (the reduce is a one-core job)
            summed = combined.group_by("word", use_threads=False).aggregate([("count", "sum")])
            del combined
            pa.default_memory_pool().release_unused()  # the allocator keeps freed blocks otherwise
            running = summed.select(["word", "count_sum"]).rename_columns(["word", "count"])
            if check is not None and i < len(headers):
                words = running.column("word")
                check(running.num_rows, int(pc.sum(pc.utf8_length(words)).as_py() or 0), f"the first {i} files")
    if running is None:
        running = pa.table({"word": pa.array([], pa.string()), "count": pa.array([], pa.int64())})
    return MergedCounts(
        words=running.column("word").combine_chunks(),
        counts=running.column("count").to_numpy(),
        files=len(files),
        hosts=hosts,
        total_words=int(pc.sum(running.column("count")).as_py() or 0),
        input_bytes=sum(int(h.get("input_bytes", 0)) for _, h in headers),
        sequences=sum(int(h.get("sequences", 0)) for _, h in headers),
    )
