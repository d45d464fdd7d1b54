"""The map and reduce jobs: what `tokenizer_map.py` and `tokenizer_reduce.py` run."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from . import native_merge
from .bpe import learn_bpe, memory_estimate
from .container import (
    HostInfo,
    JobError,
    available_memory_bytes,
    human_bytes,
    peak_rss_bytes,
    read_host_info,
)
from .counts import (
    count_words,
    count_words_python,
    counting_works,
    find_counts_files,
    make_header,
    merge_counts,
    write_counts,
)
from .reader import ReadStats, iter_sequences, list_input_files
from .settings import TokenizerSettings
from .vocab import BpeConfig

log = logging.getLogger("tokenizer_mr")

DEFAULT_CHUNK_CHARS = 1_000_000_000  # the map counts at most this many characters per counts part


@dataclass
class MapSummary:
    host: str
    files: int
    input_bytes: int
    sequences: int
    words: int
    unique_words: int
    parts: int
    seconds: float
    cpu_seconds: float
    peak_rss: int

    def line(self) -> str:
        rate = self.input_bytes / self.seconds if self.seconds > 0 else 0.0
        busy = self.cpu_seconds / self.seconds if self.seconds > 0 else 0.0
        return (
            f"host {self.host}: {self.files} files, {human_bytes(self.input_bytes)}, {self.sequences} sequences, "
            f"{self.words} words ({self.unique_words} unique in {self.parts} part(s)), {human_bytes(rate)}/s, "
            f"{self.cpu_seconds:.0f} CPU s ({busy:.1f} of {os.cpu_count() or 1} cores busy), "
            f"peak memory {human_bytes(self.peak_rss)}"
        )


class _Chunk:
    """Yields sequences from `source` until about `max_chars` characters have been yielded."""

    def __init__(self, source: Iterator[str], max_chars: int):
        self.source = source
        self.max_chars = max_chars
        self.exhausted = False

    def __iter__(self) -> Iterator[str]:
        chars = 0
        for seq in self.source:
            yield seq
            chars += len(seq)
            if chars >= self.max_chars:
                return
        self.exhausted = True


def run_map(
    settings: TokenizerSettings,
    input_dir: Path,
    output_dir: Path,
    *,
    input_format: str = "auto",
    chunk_chars: int = DEFAULT_CHUNK_CHARS,
    host: HostInfo | None = None,
) -> MapSummary:
    """Count the words of this host's shard into `output_dir/counts-<host>.partNNNNN.parquet`."""
    t0 = time.perf_counter()
    cpu0 = sum(os.times()[:2])  # user + system, all threads
    settings.validate(for_reduce=False)
    host = host or read_host_info()
    files = list_input_files(input_dir)
    total = sum(f.stat().st_size for f in files)
    log.info(
        "host %s (%d of %d): %d file(s), %s under %s; settings %s",
        host.current_host, host.index + 1, len(host.hosts), len(files), human_bytes(total), input_dir, settings.describe(),
    )
    if not files:
        log.warning("no input files under %s: this host's shard is empty (fine with more hosts than objects)", input_dir)
    count = count_words if counting_works() else count_words_python
    if count is count_words_python:
        log.warning("this tokenizers version hides the trainer's counts: counting in Python (slower)")
    log.info("counting with %s on %d CPU(s)", count.__name__, os.cpu_count() or 1)
    stats = ReadStats()
    source = iter(iter_sequences(files, input_format, settings.text_field, stats, label=f"map {host.current_host}"))
    words = unique = 0
    part = 0
    while True:
        chunk = _Chunk(source, chunk_chars)
        counts = count(settings, iter(chunk))
        final = chunk.exhausted
        header = make_header(
            settings, host=host.current_host, hosts=list(host.hosts), part=part, final_part=final,
            files=stats.names[-1000:], input_bytes=stats.bytes, sequences=stats.sequences,
        )
        path = output_dir / f"counts-{host.current_host}.part{part:05d}.parquet"
        size = write_counts(path, counts, header)
        n_words = sum(counts.values())
        words += n_words
        unique += len(counts)
        log.info("wrote %s: %d unique words, %d words, %s", path.name, len(counts), n_words, human_bytes(size))
        del counts
        part += 1
        if final:
            break
    summary = MapSummary(
        host=host.current_host, files=stats.files, input_bytes=stats.bytes, sequences=stats.sequences,
        words=words, unique_words=unique, parts=part, seconds=time.perf_counter() - t0,
        cpu_seconds=sum(os.times()[:2]) - cpu0, peak_rss=peak_rss_bytes(),
    )
    if stats.skipped_nulls:
        log.warning("skipped %d null %r values", stats.skipped_nulls, settings.text_field)
    return summary


@dataclass
class ReduceSummary:
    files: int
    hosts: int
    unique_words: int
    words: int
    vocab_size: int
    merges: int
    seconds_merge_counts: float
    seconds_learn: float
    seconds_total: float
    peak_rss: int
    outputs: list[str]

    def line(self) -> str:
        return (
            f"{self.files} counts file(s) from {self.hosts} host(s), {self.words} words ({self.unique_words} unique) "
            f"-> vocabulary {self.vocab_size} ({self.merges} merges); counts {self.seconds_merge_counts:.1f} s, "
            f"learning {self.seconds_learn:.1f} s, peak memory {human_bytes(self.peak_rss)}"
        )


def check_memory(n_words: int, n_chars: int, *, skip: bool, what: str = "") -> None:
    """Refuse (JobError) when learning from `n_words` unique words of `n_chars` characters cannot fit in the memory
    available. `what`: where a lower bound came from, when the numbers are one (the final table is larger)."""
    need = memory_estimate(n_words, n_chars, native=native_merge.available())
    avail = available_memory_bytes()
    if not what:
        log.info("memory: the vocabulary learning needs about %s, %s available", human_bytes(need),
                 human_bytes(avail) if avail is not None else "unknown")
    if avail is not None and need > avail and not skip:
        held = f"{what} already hold(s) {n_words} unique words ({n_chars} characters), which" if what else \
            f"{n_words} unique words ({n_chars} characters)"
        raise JobError(
            f"{held} need about {human_bytes(need)} of memory but only {human_bytes(avail)} is available: use a "
            "reduce instance type with more memory (run spec: tokenizer.instance_type; docs/tokenizer.md, Memory) "
            "or --skip-memory-check to try anyway"
        )


def bpe_config(settings: TokenizerSettings) -> BpeConfig:
    """The trainer settings that tokenizers' BpeTrainer / WordPieceTrainer get for these settings."""
    return BpeConfig(
        vocab_size=int(settings.vocab_size or 0),
        min_frequency=settings.min_frequency,
        special_tokens=settings.specials,
        limit_alphabet=settings.limit_alphabet,
        initial_alphabet=settings.initial_alphabet(),
        continuing_subword_prefix=settings.continuing_subword_prefix(),
    )


def learn(settings: TokenizerSettings, words: list[str], counts, *, prefixed_order=None):
    """Learn the vocabulary from merged counts (errors on settings that cannot fit the vocabulary)."""
    cfg = bpe_config(settings)

    def check_initial(initial: int) -> None:
        if settings.vocab_size < initial:
            raise JobError(
                f"--vocab-size {settings.vocab_size} is smaller than the {initial} tokens the vocabulary starts with "
                f"(special tokens, alphabet{' and ##-continuations' if settings.tokenizer_type == 'wordpiece' else ''}); "
                f"use at least {initial}"
                + (" or set --limit-alphabet" if settings.tokenizer_type == "wordpiece" else "")
            )

    def progress(done: int, want: int) -> None:
        log.info("learning: %d / %d merges (%.0f%%)", done, want, 100.0 * done / want if want else 100.0)

    return learn_bpe(words, counts, cfg, prefixed_order=prefixed_order, progress=progress, check_initial=check_initial)


def run_reduce(
    settings: TokenizerSettings, input_dir: Path, output_dir: Path, *, skip_memory_check: bool = False
) -> ReduceSummary:
    from .export import build_tokenizer, save_tokenizer

    t0 = time.perf_counter()
    settings.validate(for_reduce=True)
    files = find_counts_files(input_dir)
    if not files:
        raise JobError(
            f"no counts files (counts-*.parquet) under {input_dir}: point the reduce's input at the map job's output"
        )
    log.info("merging %d counts file(s) from %s; settings %s", len(files), input_dir, settings.describe())
    merged = merge_counts(
        files, settings, check=lambda n, c, what: check_memory(n, c, skip=skip_memory_check, what=what)
    )
    t_merge = time.perf_counter() - t0
    if merged.total_words == 0:
        raise JobError(
            f"no text at all: {merged.files} counts file(s) from {len(merged.hosts)} host(s) hold no words "
            f"({merged.sequences} sequences read); check the input prefix, the file formats and --text-field"
        )
    n_chars = merged.characters
    log.info(
        "%d words, %d unique (%d characters) from %s of input in %.1f s",
        merged.total_words, len(merged.words), n_chars, human_bytes(merged.input_bytes), t_merge,
    )
    check_memory(len(merged.words), n_chars, skip=skip_memory_check)
    t1 = time.perf_counter()
    result = learn(settings, merged.words, merged.counts)
    t_learn = time.perf_counter() - t1
    log.info("learned %d tokens (%d merges) in %.1f s: %s", len(result.vocab), len(result.merges), t_learn, result.stats)
    tok = build_tokenizer(settings, result)
    stats = {
        "counts_files": merged.files,
        "hosts": merged.hosts,
        "input_bytes": merged.input_bytes,
        "sequences": merged.sequences,
        "words": merged.total_words,
        "unique_words": len(merged.words),
        "vocab_size": len(result.vocab),
        "merges": len(result.merges),
        "learning": result.stats,
        "seconds_merge_counts": round(t_merge, 3),
        "seconds_learn": round(t_learn, 3),
    }
    outputs = save_tokenizer(settings, tok, output_dir, stats)
    log.info("wrote %s to %s", ", ".join(outputs), output_dir)
    return ReduceSummary(
        files=merged.files, hosts=len(merged.hosts), unique_words=len(merged.words), words=merged.total_words,
        vocab_size=len(result.vocab), merges=len(result.merges), seconds_merge_counts=t_merge, seconds_learn=t_learn,
        seconds_total=time.perf_counter() - t0, peak_rss=peak_rss_bytes(), outputs=outputs,
    )
