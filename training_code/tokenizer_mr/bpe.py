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
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from heapq import heappop, heappush

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import native_merge

log = logging.getLogger("tokenizer_mr.bpe")

_SHIFT = 32
_LOW32 = (1 << 32) - 1
_U64 = (1 << 64) - 1
_I32_END = 1 << 31  # the first count tokenizers' i32 pair counters cannot hold
_KEY_SHIFT = 96  # queue key = -count * 2**96 + (pair << 32) + entry id: a min-heap pops (count desc, pair asc)
_VECTOR_MIN_WORDS = 48  # entries listing at least this many words are merged with NumPy


@dataclass(frozen=True)
class BpeConfig:
    vocab_size: int
    min_frequency: int = 0
    special_tokens: Sequence[str] = ()
    limit_alphabet: int | None = None
    initial_alphabet: Sequence[str] = ()
    continuing_subword_prefix: str | None = None
    end_of_word_suffix: str | None = None


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


def _wrap_i32(value: int) -> int:
    return ((value + (1 << 31)) & _LOW32) - (1 << 31)


def _warn_wrap(count: int) -> None:
    log.warning(
        "a pair occurs %d times: counts past 2**31 - 1 wrap around as tokenizers' i32 counters do (such a pair "
        "merges late or never, as in tokenizers)",
        count,
    )


def _rust_u64(value: int) -> int:
    """`pair_counts[p] as u64` for an i32 count kept here as an exact integer."""
    return _wrap_i32(value) & _U64


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


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated `arange(start, start + length)` for each pair (vectorized)."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(total, dtype=np.int64)


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
    tokens = _Tokens()
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
class _Tokens:
    """Token strings by id, and ids by string: adding an existing string returns its id (as tokenizers does)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.strings: list[str] = []

    def __len__(self) -> int:
        return len(self.strings)

    def add(self, tok: str) -> int:
        idx = self.ids.get(tok)
        if idx is None:
            idx = len(self.strings)
            self.ids[tok] = idx
            self.strings.append(tok)
        return idx


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
    tokens: _Tokens,
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
    tokens: _Tokens,
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


# ---- steps 4-5, compiled (native/bpe_merge.c) ---------------------------------------------------------------------
def _merge_native(
    cfg: BpeConfig,
    tokens: _Tokens,
    ids: np.ndarray,
    word_start: np.ndarray,
    counts: np.ndarray,
    progress: Callable[[int], None],
) -> tuple[list[tuple[int, int]], int, dict]:
    """The merges (id pairs, in order), how many reused a token, and statistics, from the compiled loop. The
    characters outside the alphabet are dropped first (the Python loop skips them the same way)."""
    t0 = time.perf_counter()
    known = ids >= 0
    if not known.all():
        kept = np.add.reduceat(known.astype(np.int64), word_start[:-1]) if ids.size else np.zeros(0, np.int64)
        ids = ids[known]
        word_start = np.zeros(kept.size + 1, dtype=np.int64)
        np.cumsum(kept, out=word_start[1:])
    del known
    prefix = cfg.continuing_subword_prefix or None
    strings, add = tokens.strings, tokens.add
    merges: list[tuple[int, int]] = []
    reused = [0]

    def new_token(a: int, b: int) -> int:
        part_b = strings[b]
        if prefix is not None and part_b.startswith(prefix):
            part_b = part_b[len(prefix) :]
        n_before = len(strings)
        merges.append((a, b))
        new = add(strings[a] + part_b)
        reused[0] += len(strings) == n_before
        return new

    stats = native_merge.merge(ids, word_start, counts, len(strings), cfg.vocab_size, cfg.min_frequency, new_token,
                               lambda: progress(len(merges)))
    if stats["i32_wrap"]:
        _warn_wrap(stats["wrap_count"])
    run_stats = {k: stats[k] for k in ("initial_pairs", "word_merges", "queue_entries_pushed", "pairs", "native_bytes")}
    run_stats["i32_wrap"] = bool(stats["i32_wrap"])
    run_stats["merge_seconds"] = round(time.perf_counter() - t0, 3)
    return merges, reused[0], run_stats


# ---- steps 4-5 in Python/NumPy (where the compiled loop is not installed; the tests compare both) -----------------
def _merge_python(
    cfg: BpeConfig,
    tokens: _Tokens,
    ids: np.ndarray,
    word_start: np.ndarray,
    counts: np.ndarray,
    progress: Callable[[int], None],
) -> tuple[list[tuple[int, int]], int, dict]:
    t0 = time.perf_counter()
    sym, word_of_slot, slot_start, slot_len = _word_symbols(ids, word_start)
    pairs = _count_pairs(sym, word_of_slot, slot_start, slot_len, counts)
    del word_of_slot
    symbols = _Symbols(sym, slot_start, slot_len, counts, pairs.counts)
    del sym  # the symbols live on in `symbols` only
    queue = _MergeQueue(pairs)
    del pairs
    merges, n_reused = _merge_loop(cfg, tokens, symbols, queue, progress)
    return merges, n_reused, {
        "initial_pairs": queue.n_static,
        "word_merges": symbols.word_merges,
        "numpy_steps": symbols.numpy_steps,
        "i32_wrap": queue.wrap,  # some pair count reached 2**31 (see _MergeQueue)
        "queue_entries_pushed": len(queue.dyn_pos),
        "merge_seconds": round(time.perf_counter() - t0, 3),
    }


def _word_symbols(ids: np.ndarray, word_start: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The symbols the merges work on: the ids of all symbols of the words that have >= 2 of them, word after
    word (int32), the word of each symbol, and each word's first slot and symbol count (0: the word holds no
    pair). Characters outside the alphabet are dropped."""
    n_words = word_start.size - 1
    lengths = np.diff(word_start)
    known = ids >= 0
    kept_len = np.add.reduceat(known.astype(np.int64), word_start[:-1]) if ids.size else np.zeros(n_words, np.int64)
    word_of_char = np.repeat(np.arange(n_words, dtype=np.int64), lengths)
    live = known & (kept_len[word_of_char] >= 2)
    sym = ids[live].astype(np.int32)
    word_of_slot = word_of_char[live]
    del known, word_of_char, live
    slot_len = np.where(kept_len >= 2, kept_len, 0)
    slot_start = np.zeros(n_words + 1, dtype=np.int64)
    np.cumsum(slot_len, out=slot_start[1:])
    return sym, word_of_slot, slot_start, slot_len


# ---- step 4: pair counts ------------------------------------------------------------------------------------------
@dataclass
class _Pairs:
    keys: np.ndarray  # distinct pairs, (left id << 32) | right id, ascending
    totals: np.ndarray  # each pair's count (exact; see _MergeQueue for the i32 view of it)
    csr_words: np.ndarray  # per pair, the words that hold it (ascending, unique): csr_words[csr_start[j]:csr_start[j + 1]]
    csr_start: np.ndarray
    counts: dict[int, int]  # pair -> count, updated by the merges


def _count_pairs(
    ids: np.ndarray, word_of_slot: np.ndarray, slot_start: np.ndarray, slot_len: np.ndarray, counts_arr: np.ndarray
) -> _Pairs:
    """Step 4: every pair of adjacent symbols, weighted by its word's count, and the words holding each pair."""
    if not ids.size:
        return _Pairs(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(1, np.int64), {})
    link = np.ones(ids.size, dtype=bool)  # the symbol has a right neighbour in its word
    link[slot_start[1:][slot_len > 0] - 1] = False
    left = ids[link].astype(np.int64)
    right = ids[np.flatnonzero(link) + 1].astype(np.int64)
    pair_word = word_of_slot[link]
    pair_keys = (left << _SHIFT) | right
    del left, right, link
    order = np.lexsort((pair_word, pair_keys))
    pair_keys = pair_keys[order]
    pair_word = pair_word[order]
    weights = counts_arr[pair_word]
    del order
    new_pair = np.r_[True, pair_keys[1:] != pair_keys[:-1]]
    first = np.flatnonzero(new_pair)
    uniq_pairs = pair_keys[first]
    pair_totals = np.add.reduceat(weights, first)
    new_incidence = new_pair | np.r_[True, pair_word[1:] != pair_word[:-1]]
    csr_words = pair_word[new_incidence].astype(np.int32)
    csr_pair = np.cumsum(new_pair)[new_incidence] - 1
    csr_start = np.searchsorted(csr_pair, np.arange(uniq_pairs.size + 1))
    del pair_keys, pair_word, weights, new_pair, first, new_incidence, csr_pair
    counts = dict(zip(uniq_pairs.tolist(), pair_totals.tolist(), strict=True))
    return _Pairs(uniq_pairs, pair_totals, csr_words, csr_start, counts)


# ---- step 5: the queue: the best pair, its tie-break, counts as tokenizers' i32 --------------------------------
class _MergeQueue:
    """The pairs to merge, best first: highest count, ties broken by the smaller `(left id, right id)`, then the
    older entry. Initial entries, one per pair, never change, so they stay in a sorted list; entries pushed later
    (re-pushed or new) go to a heap; a pop takes the better of the two heads.

    Counts as tokenizers reads them: it keeps pair counts in i32 (`counts[i] as i32` added per occurrence,
    wrapping) and compares them `as u64`, so a count wraps once one pair occurs 2**31 times, however few words the
    corpus has (a long word repeated). Below that the exact counts kept here are the i32 ones; the (slower)
    wrap-around arithmetic starts when a count first reaches 2**31. Every occurrence of a later pair sits on the
    boundary of one initial pair occurrence, so that is normally at the start; counts read later are checked too,
    so the result does not rely on it. Starting late gives the same result as wrapping every update (wrapping is
    arithmetic modulo 2**32, and every count used below 2**31 is the same either way).
    """

    def __init__(self, pairs: _Pairs) -> None:
        self.pair_counts = pairs.counts
        self.wrap = bool(pairs.totals.size) and int(pairs.totals.max()) >= _I32_END
        if self.wrap:
            _warn_wrap(int(pairs.totals.max()))
        self.s_count, self.s_pair, self.s_csr = _initial_entries(pairs.keys, pairs.totals, self.wrap)
        self.n_static = len(self.s_pair)
        self.sp = 0  # the next initial entry
        self.csr_words = pairs.csr_words
        self.csr_start = pairs.csr_start.tolist()
        self.heap: list[int] = []  # keys: -count * 2**96 + (pair << 32) + entry id (a min-heap pops the best)
        self.dyn_pos: list = []  # entry id - n_static -> its words: an int, a tuple, or a NumPy int32 array
        # what pop and push read on every call, in one attribute (one load instead of five per merge)
        self._hot = (self.heap, self.dyn_pos, self.s_count, self.s_pair, self.n_static, self.pair_counts)

    def pop(self) -> tuple[int, int, object] | None:
        """(count, pair, its entry's words) of the best entry whose count is current (an out-of-date entry is
        pushed back with the current count, as tokenizers does); None when the queue is empty."""
        heap, _, s_count, s_pair, n_static, pair_counts = self._hot
        sp, wrap = self.sp, self.wrap
        while True:
            if sp < n_static:
                skey = -s_count[sp] * (1 << _KEY_SHIFT) + (s_pair[sp] << 32)
                if heap and heap[0] < skey:
                    key = heappop(heap)
                else:
                    key = skey + sp
                    sp += 1
            elif heap:
                key = heappop(heap)
            else:
                self.sp = sp
                return None
            # key = -count * 2**96 + low with 0 <= low < 2**96: the shifts recover each part exactly
            count, pair, eid = -(key >> _KEY_SHIFT), (key >> 32) & _U64, key & _LOW32
            current = pair_counts[pair]
            if wrap or current >= _I32_END:
                current, wrap = self._as_u64(current), True
            if count == current:
                self.sp = sp
                return count, pair, self._words_of(eid)
            heappush(heap, -current * (1 << _KEY_SHIFT) + (pair << 32) + eid)

    def push(self, pushes: list[tuple[int, object]]) -> None:
        """A new entry for each (pair, words) whose pair count (as i32) is positive."""
        heap, dyn_pos, _, _, n_static, pair_counts = self._hot
        wrap = self.wrap
        for k, w in pushes:
            cnt = pair_counts[k]
            if wrap or cnt >= _I32_END:
                cnt, wrap = self._as_u64(cnt), True
            if 0 < cnt < _I32_END:  # a positive i32 (as u64, a non-positive one is 0 or >= 2**63)
                heappush(heap, -cnt * (1 << _KEY_SHIFT) + (k << 32) + n_static + len(dyn_pos))
                dyn_pos.append(w)

    def _words_of(self, eid: int):
        """The words an entry lists (ascending): a NumPy slice or a tuple."""
        if eid < self.n_static:
            j = self.s_csr[eid]
            return self.csr_words[self.csr_start[j] : self.csr_start[j + 1]]
        pos = self.dyn_pos[eid - self.n_static]
        return (pos,) if type(pos) is int else pos

    def _as_u64(self, count: int) -> int:
        """`count as u64` for the i32 tokenizers holds; turns the wrap-around on at the first count >= 2**31."""
        if not self.wrap:
            self.wrap = True
            _warn_wrap(count)
        return _rust_u64(count)


def _initial_entries(keys: np.ndarray, totals: np.ndarray, wrap: bool) -> tuple[list[int], list[int], list[int]]:
    """The initial entries in pop order: counts, pairs, and each one's pair index (for its words)."""
    if wrap:
        pairs_l = keys.tolist()
        init = [(_rust_u64(c), pairs_l[j], j) for j, c in enumerate(totals.tolist()) if _wrap_i32(c) > 0]
        init.sort(key=lambda e: (-e[0], e[1]))
        return [e[0] for e in init], [e[1] for e in init], [e[2] for e in init]
    order = np.lexsort((keys, -totals))
    return totals[order].tolist(), keys[order].tolist(), order.tolist()


# ---- step 5: the merge loop -------------------------------------------------------------------------------------
def _merge_loop(
    cfg: BpeConfig,
    tokens: _Tokens,
    symbols: _Symbols,
    queue: _MergeQueue,
    progress: Callable[[int], None],
) -> tuple[list[tuple[int, int]], int]:
    """Merge the best pair until `vocab_size` tokens, an empty queue, or a count under `min_frequency`; the new
    token is `left + right` (the right part without its continuing prefix), reusing the id of an existing equal
    string. Returns the merges (id pairs, in order) and how many reused a token."""
    prefix = cfg.continuing_subword_prefix or None
    strings, add, pop, push, merge = tokens.strings, tokens.add, queue.pop, queue.push, symbols.merge
    merges: list[tuple[int, int]] = []
    n_reused = 0
    next_report = time.monotonic() + 10.0
    while len(strings) < cfg.vocab_size:
        top = pop()
        if top is None:
            break
        count, pair, pos = top
        if count < 1 or cfg.min_frequency > count:
            break
        a = pair >> _SHIFT
        b = pair & _LOW32
        part_b = strings[b]
        if prefix is not None and part_b.startswith(prefix):
            part_b = part_b[len(prefix) :]
        n_before = len(strings)
        new = add(strings[a] + part_b)
        n_reused += len(strings) == n_before
        merges.append((a, b))
        push(merge(pos, a, b, new, len(strings)))
        if time.monotonic() >= next_report:
            progress(len(merges))
            next_report = time.monotonic() + 10.0
    return merges, n_reused


def _ranked_merges(strings: list[str], merges: list[tuple[int, int]]) -> list[tuple[str, str]]:
    """The merges as strings; a repeated pair keeps its last rank (tokenizers keeps merges in a map pair ->
    (rank, new id))."""
    last_rank = {p: r for r, p in enumerate(merges)}
    return [(strings[a], strings[b]) for r, (a, b) in enumerate(merges) if last_rank[(a, b)] == r]


# ---- step 5: applying a merge to the words and updating the pair counts -----------------------------------------
class _Symbols:
    """The words' symbols as int32 linked lists (`sym`, `nxt`, `prv`; -1 at the ends, a merged-away slot holds
    -1) in array.array (fast from Python) viewed by NumPy, shared by the two merge implementations."""

    def __init__(
        self, ids: np.ndarray, slot_start: np.ndarray, slot_len: np.ndarray, counts_arr: np.ndarray, pair_counts: dict
    ) -> None:
        n_slots = int(ids.size)
        nxt_np = np.arange(1, n_slots + 1, dtype=np.int32)
        prv_np = np.arange(-1, n_slots - 1, dtype=np.int32)
        if n_slots:
            nxt_np[slot_start[1:][slot_len > 0] - 1] = -1
            prv_np[slot_start[:-1][slot_len > 0]] = -1
        self.sym, self.nxt, self.prv = array("i"), array("i"), array("i")
        self.sym.frombytes(ids.tobytes())
        self.nxt.frombytes(nxt_np.tobytes())
        self.prv.frombytes(prv_np.tobytes())
        del nxt_np, prv_np
        self.sym_v = np.frombuffer(self.sym, dtype=np.int32)
        self.nxt_v = np.frombuffer(self.nxt, dtype=np.int32)
        self.prv_v = np.frombuffer(self.prv, dtype=np.int32)
        self.mark = np.zeros(n_slots, dtype=bool)  # scratch: slots merged away in the current step
        self.ws = slot_start.tolist()
        self.ws_start = slot_start[:-1]
        self.ws_len = slot_len
        self.counts = counts_arr
        self.wcounts = counts_arr.tolist()
        self.pair_counts = pair_counts
        self.word_merges = 0
        self.numpy_steps = 0
        self._hot = (self.sym, self.nxt, self.prv, self.ws, self.wcounts, pair_counts, pair_counts.get)

    def merge(self, pos, a: int, b: int, new: int, n_ids: int) -> list[tuple[int, object]]:
        """Merge (a, b) into `new` in the words `pos` (ascending), left to right and without overlaps; update the
        pair counts; return (pair, words) for every pair that gained occurrences. Entries listing many words are
        merged with NumPy, the others in a Python loop (the same effects)."""
        pushes: list[tuple[int, object]] = []
        if len(pos) >= _VECTOR_MIN_WORDS:
            self.numpy_steps += 1
            self.word_merges += _merge_numpy(
                np.asarray(pos, dtype=np.int64), a, b, new, n_ids, self.sym_v, self.nxt_v, self.prv_v, self.mark,
                self.ws_start, self.ws_len, self.counts, self.pair_counts, pushes,
            )
            return pushes
        if type(pos) is not tuple:
            pos = pos.tolist()
        where = self._merge_python(pos, a, b, new)
        for k, w in where.items():
            pushes.append((k, w if type(w) is int else tuple(sorted(w))))
        return pushes

    def _merge_python(self, pos, a: int, b: int, new: int) -> dict[int, list[int]]:
        """The merge step in Python; returns, per pair that gained occurrences, the words (ascending, unique: the
        words are visited in ascending order)."""
        sym, nxt, prv, ws, wcounts, pair_counts, pcget = self._hot
        where: dict[int, list[int]] = {}
        new_hi, b_hi, merged = new << _SHIFT, b << _SHIFT, 0
        for wi in pos:
            i, end, c = ws[wi], ws[wi + 1], wcounts[wi]
            while True:
                try:
                    s = sym.index(a, i, end)
                except ValueError:
                    break
                i = s + 1
                r = nxt[s]
                if r < 0 or sym[r] != b:
                    continue
                merged += 1
                p, q = prv[s], nxt[r]
                if p >= 0:  # (L, a) loses the occurrence, (L, new) gains it
                    lhi = sym[p] << _SHIFT
                    k = lhi | a
                    pair_counts[k] = pcget(k, 0) - c
                    k = lhi | new
                    pair_counts[k] = pcget(k, 0) + c
                    w = where.get(k)
                    if w is None:
                        where[k] = wi
                    elif type(w) is int:
                        if w != wi:
                            where[k] = {w, wi}
                    else:
                        w.add(wi)
                sym[s], sym[r], nxt[s] = new, -1, q
                if q >= 0:  # (b, R) loses it, (new, R) gains it
                    prv[q] = s
                    rid = sym[q]
                    k = b_hi | rid
                    pair_counts[k] = pcget(k, 0) - c
                    k = new_hi | rid
                    pair_counts[k] = pcget(k, 0) + c
                    w = where.get(k)
                    if w is None:
                        where[k] = wi
                    elif type(w) is int:
                        if w != wi:
                            where[k] = {w, wi}
                    else:
                        w.add(wi)
        self.word_merges += merged
        return where


def _merge_numpy(
    pos: np.ndarray,
    a: int,
    b: int,
    new: int,
    n_ids: int,
    sym: np.ndarray,
    nxt: np.ndarray,
    prv: np.ndarray,
    mark: np.ndarray,
    ws_start: np.ndarray,
    ws_len: np.ndarray,
    counts: np.ndarray,
    pair_counts: dict[int, int],
    pushes: list,
) -> int:
    """One merge step over the words `pos` (ascending, unique), vectorized; the same effects as
    `_Symbols._merge_python`. Returns the number of merged occurrences; appends (pair, words) for every pair that
    gained occurrences."""
    s, r, s_word = _occurrences(pos, a, b, sym, nxt, prv, ws_start, ws_len)
    if s.size == 0:
        return 0
    p = prv[s]
    q = nxt[r]
    c = counts[s_word]
    # Left neighbour as the sequential loop sees it: the new token if the previous occurrence just merged;
    # right neighbour: the symbol as it was (a following occurrence merges after this one).
    has_p = p >= 0
    pp = p[has_p]
    mark[r] = True
    left = sym[pp].astype(np.int64)
    left[mark[pp]] = new
    mark[r] = False
    has_q = q >= 0
    qq = q[has_q]
    right = sym[qq].astype(np.int64)
    # apply to the words
    sym[s] = new
    sym[r] = -1
    nxt[s] = q
    prv[qq] = s[has_q]
    # (L, a) -c and (L, new) +c for each left neighbour L; (b, R) -c and (new, R) +c for each right neighbour R.
    _add_counts(pair_counts, left, c[has_p], n_ids, _SHIFT, a, new)
    _add_counts(pair_counts, right, c[has_q], n_ids, 0, b << _SHIFT, new << _SHIFT)
    gained_keys = np.concatenate(((left << _SHIFT) | new, (np.int64(new) << _SHIFT) | right))
    if gained_keys.size:
        pushes.extend(_gained_words(gained_keys, np.concatenate((s_word[has_p], s_word[has_q]))))
    return int(s.size)


def _occurrences(pos, a, b, sym, nxt, prv, ws_start, ws_len) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The occurrences of (a, b) in the words `pos` that a left-to-right merge takes: left slots, right slots,
    and their words."""
    lens = ws_len[pos]
    slot = _ranges(ws_start[pos], lens)
    hit = sym[slot] == a
    s = slot[hit]
    s_word = np.repeat(pos, lens)[hit]
    r = nxt[s]
    ok = r >= 0
    s, r, s_word = s[ok], r[ok], s_word[ok]
    ok = sym[r] == b
    s, r, s_word = s[ok], r[ok], s_word[ok]
    if a == b and s.size > 1:
        # In a run of equal symbols, left-to-right merging takes every other occurrence.
        chained = np.r_[False, prv[s[1:]] == s[:-1]]
        start_idx = np.flatnonzero(~chained)
        run_id = np.cumsum(~chained) - 1
        keep = ((np.arange(s.size) - start_idx[run_id]) % 2) == 0
        s, r, s_word = s[keep], r[keep], s_word[keep]
    return s, r, s_word


def _add_counts(
    pair_counts: dict[int, int],
    ids_: np.ndarray,
    w: np.ndarray,
    n_ids: int,
    shift: int,
    lost: int,
    gained: int,
) -> None:
    """For the neighbours `ids_` with weights `w`: sum the weights per neighbour id x (no sorting), then subtract
    each sum from the pair `(x << shift) | lost` and add it to `(x << shift) | gained`, touching each pair once."""
    if ids_.size == 0:
        return
    if n_ids <= 4 * ids_.size + 4096:
        sums = np.bincount(ids_, weights=w.astype(np.float64), minlength=n_ids)  # exact below 2**53
        nz = np.flatnonzero(sums)
        vals = np.rint(sums[nz]).astype(np.int64).tolist()
        nz = nz.tolist()
    else:
        uniq, inv = np.unique(ids_, return_inverse=True)
        vals = np.rint(np.bincount(inv, weights=w.astype(np.float64))).astype(np.int64).tolist()
        nz = uniq.tolist()
    get = pair_counts.get
    for k, d in zip([(x << shift) | lost for x in nz], vals, strict=True):
        pair_counts[k] = get(k, 0) - d
    for k, d in zip([(x << shift) | gained for x in nz], vals, strict=True):
        pair_counts[k] = get(k, 0) + d


def _gained_words(gained_keys: np.ndarray, gained_words: np.ndarray) -> list[tuple[int, object]]:
    """(pair, words) per distinct pair, words ascending and unique: one word as an int, a few as a tuple, many
    as an int32 array."""
    order = np.argsort(gained_keys, kind="stable")  # stable: words stay ascending within a pair
    gk = gained_keys[order]
    gw = gained_words[order]
    first = np.r_[True, (gk[1:] != gk[:-1]) | (gw[1:] != gw[:-1])]
    gk = gk[first]
    gw = gw[first].astype(np.int32)
    bounds = np.flatnonzero(np.r_[True, gk[1:] != gk[:-1], True]).tolist()
    gw_list = gw.tolist()
    small = _VECTOR_MIN_WORDS
    out: list[tuple[int, object]] = []
    for j, k in enumerate(gk[bounds[:-1]].tolist()):
        lo = bounds[j]
        hi = bounds[j + 1]
        if hi - lo == 1:
            out.append((k, gw_list[lo]))
        elif hi - lo < small:
            out.append((k, tuple(gw_list[lo:hi])))
        else:
            out.append((k, gw[lo:hi].copy()))
    return out
