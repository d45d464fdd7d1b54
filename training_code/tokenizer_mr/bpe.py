"""BPE merge learning from word counts, replicating `tokenizers`' `BpeTrainer::do_train` (0.22.x).

The single-node trainer in Hugging Face `tokenizers` works in two phases: `feed` (normalize, pre-tokenize and
count the words of the corpus) and `do_train` (learn the vocabulary and merges from that word-count map). The
Python bindings offer no way to run the second phase on a given map (`feed` always replaces it), so this
module re-implements `do_train` step for step:

1. special tokens get the first ids, in the given order (duplicates once);
2. the alphabet: every character of the words, weighted by the word counts, plus `initial_alphabet` (counted
   as "infinite"); with `limit_alphabet`, the least frequent characters are dropped; the kept characters get
   the next ids in code-point order;
3. words become id sequences; characters outside the alphabet are skipped; with a `continuing_subword_prefix`
   every non-first character becomes `prefix + char` (a new id the first time it is seen), with an
   `end_of_word_suffix` the last one `char + suffix`;
4. pair counts (signed 32-bit in Rust) and, per pair, the set of words that hold it; one queue entry per pair;
5. the merge loop: pop the entry with the highest count, ties broken by the smaller `(left id, right id)`;
   an entry whose count is out of date is pushed back with the current count; stop at `vocab_size` tokens,
   an empty queue, or a count under `min_frequency`; the new token is `left + right` (the right part
   without its continuing prefix), reusing the id of an existing equal string; the merge is applied, left to
   right and without overlaps, to the words listed in *that entry*; every pair that gained an occurrence
   (those with the new id) gets a new entry holding the words where it appeared, with its total count.

Everything that decides the result is reproduced, including the quirks (the merged pair's own count is not
reset; a pair can hold several queue entries, each merging only its own words; a repeated merge keeps its last
rank; pair counts wrap like Rust's `i32`). Two choices in `tokenizers` depend on its random hash seed and
so differ from run to run of `tokenizers` itself; here they are deterministic:
- the ids of `prefix + char` tokens follow the order in which the (hash-ordered) words are visited; here the
  words are visited in sorted order (what tokenizers would do if its map iterated sorted), unless
  `prefixed_order` gives an explicit order (the tests use it to replay a particular run of `tokenizers`);
- with `limit_alphabet`, characters with equal counts at the cut are dropped in an unspecified order; here
  the higher code point is dropped first (a warning is logged when this happens).
Queue entries with equal count and pair (possible only when a merge re-creates an existing token) pop in an
unspecified order in Rust; here the older entry pops first.

Data layout (memory is what bounds the reduce): all symbols of all words with >= 2 symbols live in three
int32 arrays (`sym`, `nxt`, `prv`: a linked list per word, a merged-away slot holds -1), shared by two
equivalent implementations of a merge step: a Python loop (entries listing few words) and a NumPy one
(entries listing many words). See `memory_estimate` for the bound.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import native_merge
from .bpe_merge import _merge_native, _merge_python, _ranked_merges
from .vocab import BpeConfig, Tokens

log = logging.getLogger("tokenizer_mr.bpe")

@dataclass
class BpeResult:
    vocab: list[str]  # token strings in id order
    merges: list[tuple[str, str]]  # in rank order, as tokenizers serializes them (a repeated pair: last rank)
    initial_size: int = 0  # tokens before the first merge: specials, alphabet, prefixed/suffixed characters
    stats: dict = field(default_factory=dict)

    @property
    def vocab_dict(self) -> dict[str, int]:
        return {tok: i for i, tok in enumerate(self.vocab)}


def memory_estimate(n_words: int, n_chars: int, *, native: bool = True) -> int:
    """Upper estimate in bytes of the reduce's peak memory for `n_words` unique words of `n_chars` characters.

    Compiled merge loop (`native`): int32 token ids per character, the loop's per-word record (24 bytes), word
    lists per pair (int32), pair-count hash table and queue; with the interpreter, the libraries and the merged
    Arrow table. Measured (byte-level BPE, 32 k vocabulary): 0.78 GB peak for 1.82 M words of 16.7 M characters,
    and the cost curve of benchmarks/bench_tokenizer.py (docs/tokenizer.md); the estimate keeps 25% or more above
    every measured peak. Python/NumPy loop: 66 bytes per character measured for the learner alone (0.97 M words),
    plus 40% headroom.
    """
    if native:
        return 24 * n_chars + 200 * n_words + (320 << 20)
    return 90 * n_chars + 100 * n_words + (64 << 20)


def _initial_alphabet(cfg: BpeConfig, uniq_cps: np.ndarray, char_weights: np.ndarray) -> list[str]:
    """Step 2: the kept alphabet characters, in code-point order (`char_weights`: count of each char)."""
    char_counts = dict(zip(uniq_cps.tolist(), char_weights.tolist(), strict=True))
    for ch in cfg.initial_alphabet:
        char_counts[ord(ch)] = 1 << 64  # usize::MAX: above any real count
    kept = list(char_counts.items())
    if cfg.limit_alphabet is not None and len(kept) > cfg.limit_alphabet:
        to_remove = len(kept) - cfg.limit_alphabet
        kept.sort(key=lambda kv: (kv[1], -kv[0]))  # least frequent first; ties: higher code point first
        if cfg.limit_alphabet > 0 and kept[to_remove - 1][1] == kept[to_remove][1]:
            log.warning(
                "limit_alphabet=%d cuts between characters of equal count %d: tokenizers drops an arbitrary "
                "one of them (it depends on its hash seed); this run drops the higher code points",
                cfg.limit_alphabet,
                kept[to_remove][1],
            )
        kept = kept[to_remove:]
    return [chr(cp) for cp in sorted(cp for cp, _ in kept)]


def _char_weights(cps: np.ndarray, lengths: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct code points (ascending) and each one's count over the corpus (its occurrences in each word
    times the word's count). Counted by code point (no sort), a few million characters at a time."""
    if cps.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    top = int(cps.max()) + 1
    exact_float = float(counts.astype(np.float64) @ lengths.astype(np.float64)) < 2**53  # float64 sums exact
    sums = np.zeros(top, dtype=np.float64 if exact_float else np.int64)
    ends = np.cumsum(lengths)
    w0 = 0
    while w0 < lengths.size:  # chunks of about 4 M characters (whole words) bound the temporary arrays
        w1 = max(w0 + 1, int(np.searchsorted(ends, ends[w0] - lengths[w0] + (1 << 22), side="right")))
        c0, c1 = int(ends[w0] - lengths[w0]), int(ends[w1 - 1])
        weights = np.repeat(counts[w0:w1], lengths[w0:w1])
        if exact_float:
            sums += np.bincount(cps[c0:c1], weights=weights.astype(np.float64), minlength=top)
        else:
            np.add.at(sums, cps[c0:c1].astype(np.int64), weights)
        w0 = w1
    uniq = np.flatnonzero(sums)
    return uniq, np.rint(sums[uniq]).astype(np.int64) if exact_float else sums[uniq]


def _first_appearance(
    sorted_order: np.ndarray,
    lengths: np.ndarray,
    word_start: np.ndarray,
    decorated: np.ndarray,
    combo_idx: np.ndarray,
    n_combos: int,
) -> list[int]:
    """For each decorated-character kind, the position of its first occurrence when the words are visited in
    sorted order (characters left to right): the order tokenizers would give if its word map iterated sorted."""
    order = sorted_order
    start_when_sorted = np.empty(lengths.size, dtype=np.int64)
    start_when_sorted[order] = np.cumsum(lengths[order]) - lengths[order]
    char_pos = np.flatnonzero(decorated)
    word_of = np.searchsorted(word_start, char_pos, side="right") - 1
    visit = start_when_sorted[word_of] + (char_pos - word_start[word_of])
    first = np.full(n_combos, np.iinfo(np.int64).max, dtype=np.int64)
    np.minimum.at(first, combo_idx, visit)
    return first.tolist()


Words = Sequence[str] | pa.Array | pa.ChunkedArray


def learn_bpe(
    words: Words,
    counts: Sequence[int] | np.ndarray,
    cfg: BpeConfig,
    *,
    prefixed_order: Sequence[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    check_initial: Callable[[int], None] | None = None,
    native: bool | None = None,
) -> BpeResult:
    """Learn a BPE vocabulary and merges from unique `words` (strings, or an Arrow string array) with their
    `counts` (see the module docstring).

    `progress(merges_done, merges_wanted)` is called every 10 seconds or so from the merge loop;
    `check_initial(n)` with the number of tokens before any merge, before the pair counting (it may raise).
    `native`: run the compiled merge loop (True), the Python/NumPy one (False), or the compiled one where it is
    installed (None); both give the same result.
    """
    t0 = time.perf_counter()
    table = _WordTable.build(words, counts)
    tokens = Tokens()
    ids, word_start = _char_ids(table, cfg, tokens, prefixed_order)
    if check_initial is not None:
        check_initial(len(tokens))
    initial_size = len(tokens)
    use_native = native_merge.available() if native is None else native
    if native is None and not use_native:
        log.warning("the native merge loop (tokenizer-mr-native) is not installed: learning in Python/NumPy (slower)")
    want = max(0, cfg.vocab_size - initial_size)
    merges, n_reused, run_stats = (_merge_native if use_native else _merge_python)(
        cfg, tokens, ids, word_start, table.counts, lambda done: progress(done, want) if progress else None
    )
    merge_strings = _ranked_merges(tokens.strings, merges)
    stats = {
        "implementation": "native" if use_native else "python",
        "words": table.n_words,
        "characters": int(table.lengths.sum()),
        "tokens": int(table.counts.sum()) if table.n_words else 0,
        "initial_vocab": initial_size,
        "merges": len(merges),
        "merges_reusing_a_token": n_reused,
        "repeated_merges": len(merges) - len(merge_strings),
        **run_stats,
        "seconds": round(time.perf_counter() - t0, 3),
    }
    return BpeResult(vocab=tokens.strings, merges=merge_strings, initial_size=initial_size, stats=stats)


# ---- steps 1-3: the vocabulary before any merge, the words as token ids -------------------------------------------
@dataclass
class _WordTable:
    """The non-empty words as code points (all words concatenated, uint32), their lengths and counts; their
    sorted order on demand (only WordPiece needs it). Empty words hold no character and no pair: dropped."""

    cps: np.ndarray
    lengths: np.ndarray  # int64, > 0
    counts: np.ndarray  # int64, >= 1
    words: pa.Array  # the same words, for sorting

    @property
    def n_words(self) -> int:
        return int(self.lengths.size)

    @classmethod
    def build(cls, words: Words, counts: Sequence[int] | np.ndarray) -> _WordTable:
        arr = words if isinstance(words, pa.Array | pa.ChunkedArray) else pa.array(list(words), type=pa.string())
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks() if arr.num_chunks else pa.array([], pa.string())
        if not pa.types.is_string(arr.type) and not pa.types.is_large_string(arr.type):
            raise ValueError(f"words must be strings, got {arr.type}")
        counts_arr = np.asarray(counts, dtype=np.int64).reshape(-1)
        if counts_arr.shape[0] != len(arr):
            raise ValueError("words and counts differ in length")
        if arr.null_count:
            raise ValueError("words must not be null")
        lengths = pc.utf8_length(arr).to_numpy(zero_copy_only=False).astype(np.int64)
        if lengths.size and not lengths.all():
            keep = np.flatnonzero(lengths)
            arr, counts_arr, lengths = arr.take(pa.array(keep)), counts_arr[keep], lengths[keep]
        if lengths.size and int(counts_arr.min()) < 1:
            raise ValueError("word counts must be >= 1")
        return cls(cps=_code_points(arr), lengths=lengths, counts=counts_arr, words=arr)

    def sorted_order(self) -> np.ndarray:
        """Word indices in sorted order (UTF-8 byte order, which is code-point order, as Python sorts str)."""
        return pc.sort_indices(self.words).to_numpy(zero_copy_only=False).astype(np.int64)


def _code_points(arr: pa.Array) -> np.ndarray:
    """All characters of a string array, concatenated, as uint32 code points."""
    if len(arr) == 0:
        return np.zeros(0, np.uint32)
    offsets_type = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    offsets = np.frombuffer(arr.buffers()[1], dtype=offsets_type)[arr.offset : arr.offset + len(arr) + 1]
    data = arr.buffers()[2]
    text = str(memoryview(data)[int(offsets[0]) : int(offsets[-1])], "utf-8") if data is not None else ""
    return np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)


def _char_ids(
    table: _WordTable,
    cfg: BpeConfig,
    tokens: Tokens,
    prefixed_order: Sequence[str] | None,
) -> tuple[np.ndarray, np.ndarray]:
    """Steps 1-3: the special tokens, the alphabet and the decorated characters get their ids; returns the id of
    every character of every word (int32; -1: outside the alphabet) and the words' offsets (int64). A character
    belongs to the alphabet when its one-char string is a token (a one-char special token counts too, as in
    tokenizers)."""
    for tok in cfg.special_tokens:
        tokens.add(tok)
    uniq_cps, char_weights = _char_weights(table.cps, table.lengths, table.counts)
    for ch in _initial_alphabet(cfg, uniq_cps, char_weights):
        tokens.add(ch)
    del char_weights
    word_start = np.zeros(table.n_words + 1, dtype=np.int64)
    np.cumsum(table.lengths, out=word_start[1:])
    lut = np.full(int(uniq_cps[-1]) + 1 if uniq_cps.size else 0, -1, dtype=np.int32)
    lut[uniq_cps] = [tokens.ids.get(chr(cp), -1) for cp in uniq_cps.tolist()]
    ids = np.empty(table.cps.size, dtype=np.int32)
    for c0 in range(0, ids.size, 1 << 22):  # in slices: indexing makes an int64 copy of the index
        ids[c0 : c0 + (1 << 22)] = lut[table.cps[c0 : c0 + (1 << 22)]]
    prefix = cfg.continuing_subword_prefix or None
    suffix = cfg.end_of_word_suffix or None
    if prefix is not None or suffix is not None:
        _decorate(ids, table, word_start, prefix, suffix, tokens, prefixed_order)
    table.cps = np.zeros(0, np.uint32)  # not needed any more: memory for the merges
    return ids, word_start


def _decorate(
    ids: np.ndarray,
    table: _WordTable,
    word_start: np.ndarray,
    prefix: str | None,
    suffix: str | None,
    tokens: Tokens,
    prefixed_order: Sequence[str] | None,
) -> None:
    """Step 3's `prefix + char` (every non-first character) and `char + suffix` (the last one): new tokens, in
    the order of first appearance (or `prefixed_order`), written into `ids` in place."""
    lengths = table.lengths
    variant = np.zeros(ids.size, dtype=np.int8)  # 1: prefixed (not first), 2: suffixed (last), 3: both
    if prefix is not None:
        variant[:] = 1
        variant[word_start[:-1]] = 0
    if suffix is not None:
        variant[word_start[1:] - 1] += 2
    decorated = (ids >= 0) & (variant != 0)
    if not decorated.any():
        return
    combo = table.cps[decorated].astype(np.int64) * 4 + variant[decorated]
    del variant
    uniq_combo, combo_idx = np.unique(combo, return_inverse=True)
    strings = [_decorated(chr(code // 4), code, prefix, suffix) for code in uniq_combo.tolist()]
    if prefixed_order is not None:  # replay a given order (e.g. the one a tokenizers run used)
        rank = {s: i for i, s in enumerate(prefixed_order)}
        first_seen = [rank.get(s, len(rank) + i) for i, s in enumerate(strings)]
    else:  # first appearance, visiting the words in sorted order and each word left to right
        first_seen = _first_appearance(table.sorted_order(), lengths, word_start, decorated, combo_idx, len(strings))
    new_ids = np.empty(len(strings), dtype=np.int32)
    for i in sorted(range(len(strings)), key=first_seen.__getitem__):
        new_ids[i] = tokens.add(strings[i])
    ids[decorated] = new_ids[combo_idx]


def _decorated(ch: str, code: int, prefix: str | None, suffix: str | None) -> str:
    if code & 1:
        ch = prefix + ch
    if code & 2:
        ch = ch + suffix
    return ch
