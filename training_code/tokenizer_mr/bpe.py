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

import heapq
import logging
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

log = logging.getLogger("tokenizer_mr.bpe")

_SHIFT = 32
_LOW32 = (1 << 32) - 1
_U64 = (1 << 64) - 1
_I32_END = 1 << 31  # the first count tokenizers' i32 pair counters cannot hold
_KEY_SHIFT = 96  # queue key = -count * 2**96 + (pair << 32) + entry id: a min-heap pops (count desc, pair asc)
_VECTOR_MIN_WORDS = 48  # entries listing at least this many words are merged with NumPy


class BpeSettingsError(ValueError):
    """Settings that cannot produce the requested vocabulary."""


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


def memory_estimate(n_words: int, n_chars: int) -> int:
    """Upper estimate in bytes of `learn_bpe`'s peak memory for `n_words` unique words of `n_chars` characters.

    Measured peak (byte-level BPE, 32k vocabulary, 0.97 M words of 9.0 M characters): 66 bytes per character
    (int32 symbol arrays and NumPy set-up, 12-60 bytes per character; word offsets and counts; the pair-count
    dictionary and queue, about 150 bytes per pair created while merging). The estimate adds 40% headroom.
    """
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


def _char_table(cps: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Distinct code points (ascending), the index of each character among them, and each one's total weight.
    Counting by code point (no sort); `weights` per character (its word's count)."""
    if cps.size == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64)
    top = int(cps.max()) + 1
    present = np.bincount(cps, minlength=top) > 0
    uniq = np.flatnonzero(present)
    lut = np.zeros(top, dtype=np.int64)
    lut[uniq] = np.arange(uniq.size)
    inverse = lut[cps]
    if float(weights.sum(dtype=np.float64)) < 2**53:  # float64 sums are exact below 2**53
        sums = np.rint(np.bincount(inverse, weights=weights.astype(np.float64), minlength=uniq.size)).astype(np.int64)
    else:
        sums = np.zeros(uniq.size, dtype=np.int64)
        np.add.at(sums, inverse, weights)
    return uniq, inverse, sums


def _first_appearance(
    words: Sequence[str],
    lengths: np.ndarray,
    word_start: np.ndarray,
    decorated: np.ndarray,
    combo_idx: np.ndarray,
    n_combos: int,
) -> list[int]:
    """For each decorated-character kind, the position of its first occurrence when the words are visited in
    sorted order (characters left to right): the order tokenizers would give if its word map iterated sorted."""
    order = np.array(sorted(range(len(words)), key=words.__getitem__), dtype=np.int64)
    start_when_sorted = np.empty(len(words), dtype=np.int64)
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


def learn_bpe(
    words: Sequence[str],
    counts: Sequence[int] | np.ndarray,
    cfg: BpeConfig,
    *,
    prefixed_order: Sequence[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    check_initial: Callable[[int], None] | None = None,
) -> BpeResult:
    """Learn a BPE vocabulary and merges from unique `words` with their `counts` (see the module docstring).

    `progress(merges_done, merges_wanted)` is called every 10 seconds or so from the merge loop;
    `check_initial(n)` with the number of tokens before any merge, before the pair counting (it may raise).
    """
    t0 = time.perf_counter()
    counts_arr = np.asarray(counts, dtype=np.int64).reshape(-1)
    if counts_arr.shape[0] != len(words):
        raise ValueError("words and counts differ in length")
    lengths = np.fromiter(map(len, words), dtype=np.int64, count=len(words))
    if lengths.size and not lengths.all():  # an empty word holds no character and no pair
        nonempty = np.flatnonzero(lengths)
        words = [words[i] for i in nonempty.tolist()]
        counts_arr = counts_arr[nonempty]
        lengths = lengths[nonempty]
    n_words = len(words)
    if n_words and int(counts_arr.min()) < 1:
        raise ValueError("word counts must be >= 1")
    prefix = cfg.continuing_subword_prefix or None
    suffix = cfg.end_of_word_suffix or None

    w2id: dict[str, int] = {}
    id2w: list[str] = []

    def add(tok: str) -> int:
        idx = w2id.get(tok)
        if idx is None:
            idx = len(id2w)
            w2id[tok] = idx
            id2w.append(tok)
        return idx

    # 1. special tokens
    for tok in cfg.special_tokens:
        add(tok)

    # All characters as code points; the distinct ones with their counts (weighted by the word counts).
    joined = "".join(words)
    cps = np.frombuffer(joined.encode("utf-32-le"), dtype=np.uint32).astype(np.int64) if joined else np.zeros(0, np.int64)
    del joined
    uniq_cps, inverse, char_weights = _char_table(cps, np.repeat(counts_arr, lengths))

    # 2. alphabet
    for ch in _initial_alphabet(cfg, uniq_cps, char_weights):
        add(ch)

    # 3. words as token ids. A character belongs to the alphabet when its one-char string is a token (a
    #    one-char special token counts too, as in tokenizers).
    n_chars = int(cps.size)
    word_start = np.zeros(n_words + 1, dtype=np.int64)
    np.cumsum(lengths, out=word_start[1:])
    del cps, char_weights
    base_ids = np.array([w2id.get(chr(cp), -1) for cp in uniq_cps.tolist()], dtype=np.int64)
    ids = base_ids[inverse]
    variant = None  # 1: prefixed (not first), 2: suffixed (last), 3: both
    if prefix is not None or suffix is not None:
        variant = np.zeros(n_chars, dtype=np.int8)
        if prefix is not None:
            variant[:] = 1
            variant[word_start[:-1][lengths > 0]] = 0
        if suffix is not None:
            variant[word_start[1:][lengths > 0] - 1] += 2
        decorated = (ids >= 0) & (variant != 0)
        if decorated.any():
            combo = inverse[decorated].astype(np.int64) * 4 + variant[decorated]
            uniq_combo, combo_idx = np.unique(combo, return_inverse=True)
            strings = []
            for code in uniq_combo.tolist():
                s = chr(int(uniq_cps[code // 4]))
                if code & 1:
                    s = prefix + s
                if code & 2:
                    s = s + suffix
                strings.append(s)
            if prefixed_order is not None:  # replay a given order (e.g. the one a tokenizers run used)
                rank = {s: i for i, s in enumerate(prefixed_order)}
                first_seen = [rank.get(s, len(rank) + i) for i, s in enumerate(strings)]
            else:  # first appearance, visiting the words in sorted order and each word left to right
                first_seen = _first_appearance(words, lengths, word_start, decorated, combo_idx, len(strings))
            new_ids = np.empty(len(strings), dtype=np.int64)
            for i in sorted(range(len(strings)), key=first_seen.__getitem__):
                new_ids[i] = add(strings[i])
            ids[decorated] = new_ids[combo_idx]
        del variant, decorated
    del inverse, base_ids
    initial_size = len(id2w)
    if check_initial is not None:
        check_initial(initial_size)

    # Drop characters outside the alphabet; keep words that still have >= 2 symbols (the others hold no pair).
    known = ids >= 0
    kept_len = np.add.reduceat(known.astype(np.int64), word_start[:-1]) if n_chars else np.zeros(n_words, np.int64)
    kept_len[lengths == 0] = 0
    word_of_char = np.repeat(np.arange(n_words, dtype=np.int64), lengths)
    live = known & (kept_len[word_of_char] >= 2)
    ids = ids[live].astype(np.int32)
    word_of_slot = word_of_char[live]
    del known, word_of_char, live
    n_slots = int(ids.size)
    slot_len = np.where(kept_len >= 2, kept_len, 0)
    ws_np = np.zeros(n_words + 1, dtype=np.int64)
    np.cumsum(slot_len, out=ws_np[1:])

    # Linked lists: next and previous slot within the word, -1 at the ends.
    nxt_np = np.arange(1, n_slots + 1, dtype=np.int32)
    prv_np = np.arange(-1, n_slots - 1, dtype=np.int32)
    if n_slots:
        nxt_np[ws_np[1:][slot_len > 0] - 1] = -1
        prv_np[ws_np[:-1][slot_len > 0]] = -1

    # 4. pair counts and, per pair, the words holding it (CSR: pair index -> word ids, ascending, unique)
    if n_slots:
        link = nxt_np >= 0
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
    else:
        uniq_pairs = np.zeros(0, np.int64)
        pair_totals = np.zeros(0, np.int64)
        csr_words = np.zeros(0, np.int32)
        csr_start = np.zeros(1, np.int64)
    del word_of_slot

    total_tokens = int(counts_arr.sum()) if n_words else 0
    # tokenizers keeps pair counts in i32 (`counts[i] as i32` added per occurrence, wrapping) and compares them
    # `as u64`: a count wraps once one pair occurs 2**31 times, however few words the corpus has (a long word
    # repeated). Below that the exact counts kept here are the i32 ones; the (slower) wrap-around arithmetic
    # starts when a count first reaches 2**31. Every occurrence of a later pair sits on the boundary of one
    # initial pair occurrence, so that is normally at the start; counts read later are checked too, so the
    # result does not rely on it. Starting late gives the same result as wrapping every update (wrapping is
    # arithmetic modulo 2**32, and every count used below 2**31 is the same either way).
    wrap = bool(pair_totals.size) and int(pair_totals.max()) >= _I32_END
    if wrap:
        _warn_wrap(int(pair_totals.max()))

    # Shared storage for both merge implementations: array.array (fast from Python) viewed by NumPy.
    sym = array("i")
    sym.frombytes(ids.tobytes())
    nxt = array("i")
    nxt.frombytes(nxt_np.tobytes())
    prv = array("i")
    prv.frombytes(prv_np.tobytes())
    del ids, nxt_np, prv_np
    sym_v = np.frombuffer(sym, dtype=np.int32)
    nxt_v = np.frombuffer(nxt, dtype=np.int32)
    prv_v = np.frombuffer(prv, dtype=np.int32)
    mark = np.zeros(n_slots, dtype=bool)  # scratch: slots merged away in the current step
    ws = ws_np.tolist()
    ws_start = ws_np[:-1]
    ws_len = slot_len
    wcounts = counts_arr.tolist()

    pair_counts: dict[int, int] = dict(zip(uniq_pairs.tolist(), pair_totals.tolist(), strict=True))

    # Initial entries, one per pair, in pop order. They never change, so they stay in a sorted list; entries
    # pushed later (re-pushed or new) go to a heap; a pop takes the better of the two heads.
    totals = pair_totals.tolist()
    if wrap:
        pairs_l = uniq_pairs.tolist()
        init = [(_rust_u64(c), pairs_l[j], j) for j, c in enumerate(totals) if _wrap_i32(c) > 0]
        init.sort(key=lambda e: (-e[0], e[1]))
        s_count = [e[0] for e in init]
        s_pair = [e[1] for e in init]
        s_csr = [e[2] for e in init]
    else:
        order = np.lexsort((uniq_pairs, -pair_totals))
        s_count = pair_totals[order].tolist()
        s_pair = uniq_pairs[order].tolist()
        s_csr = order.tolist()
    n_static = len(s_pair)
    csr_start_l = csr_start.tolist()
    del uniq_pairs, pair_totals, totals

    heap: list[int] = []
    dyn_pos: list = []  # entry id - n_static -> its words: an int, a tuple, or a NumPy int32 array
    merges: list[tuple[int, int]] = []
    t_setup = time.perf_counter() - t0
    want = max(0, cfg.vocab_size - len(id2w))
    sp = 0
    next_report = time.monotonic() + 10.0
    n_word_merges = 0
    n_reused = 0
    n_vector_steps = 0
    min_freq = cfg.min_frequency
    heappush = heapq.heappush
    heappop = heapq.heappop
    pcget = pair_counts.get

    # 5. merges
    while len(id2w) < cfg.vocab_size:
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
            break
        # key = -count * 2**96 + low with 0 <= low < 2**96: the shifts recover each part exactly
        count = -(key >> _KEY_SHIFT)
        pair = (key >> 32) & _U64
        eid = key & _LOW32
        current = pair_counts[pair]
        if not wrap and current >= _I32_END:
            wrap = True
            _warn_wrap(current)
        if wrap:
            current = _rust_u64(current)
        if count != current:
            heappush(heap, -current * (1 << _KEY_SHIFT) + (pair << 32) + eid)
            continue
        if count < 1 or min_freq > count:
            break

        a = pair >> _SHIFT
        b = pair & _LOW32
        part_b = id2w[b]
        if prefix is not None and part_b.startswith(prefix):
            part_b = part_b[len(prefix) :]
        n_before = len(id2w)
        new = add(id2w[a] + part_b)
        n_reused += len(id2w) == n_before
        merges.append((a, b))

        if eid < n_static:
            j = s_csr[eid]
            pos = csr_words[csr_start_l[j] : csr_start_l[j + 1]]
        else:
            pos = dyn_pos[eid - n_static]
            if type(pos) is int:
                pos = (pos,)

        pushes: list[tuple[int, object]] = []
        if len(pos) >= _VECTOR_MIN_WORDS:
            n_vector_steps += 1
            n_word_merges += _merge_numpy(
                np.asarray(pos, dtype=np.int64), a, b, new, len(id2w), sym_v, nxt_v, prv_v, mark, ws_start,
                ws_len, counts_arr, pair_counts, pushes,
            )
        else:
            if type(pos) is not tuple:
                pos = pos.tolist()
            where: dict[int, object] = {}
            new_hi = new << _SHIFT
            b_hi = b << _SHIFT
            for wi in pos:
                i = ws[wi]
                end = ws[wi + 1]
                c = wcounts[wi]
                while True:
                    try:
                        s = sym.index(a, i, end)
                    except ValueError:
                        break
                    r = nxt[s]
                    if r < 0 or sym[r] != b:
                        i = s + 1
                        continue
                    n_word_merges += 1
                    p = prv[s]
                    q = nxt[r]
                    if p >= 0:
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
                    sym[s] = new
                    sym[r] = -1
                    nxt[s] = q
                    if q >= 0:
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
                    i = s + 1
            for k, w in where.items():
                pushes.append((k, w if type(w) is int else tuple(sorted(w))))

        for k, w in pushes:
            cnt = pair_counts[k]
            if not wrap and cnt >= _I32_END:
                wrap = True
                _warn_wrap(cnt)
            if wrap:
                if _wrap_i32(cnt) <= 0:
                    continue
                cnt = _rust_u64(cnt)
            elif cnt <= 0:
                continue
            heappush(heap, -cnt * (1 << _KEY_SHIFT) + (k << 32) + n_static + len(dyn_pos))
            dyn_pos.append(w)

        if progress is not None and time.monotonic() >= next_report:
            progress(len(merges), want)
            next_report = time.monotonic() + 10.0

    # A repeated pair keeps its last rank (tokenizers keeps merges in a map pair -> (rank, new id)).
    last_rank = {p: r for r, p in enumerate(merges)}
    merge_strings = [(id2w[a], id2w[b]) for r, (a, b) in enumerate(merges) if last_rank[(a, b)] == r]
    stats = {
        "words": n_words,
        "characters": n_chars,
        "tokens": total_tokens,
        "initial_vocab": initial_size,
        "initial_pairs": n_static,
        "merges": len(merges),
        "word_merges": n_word_merges,
        "numpy_steps": n_vector_steps,
        "merges_reusing_a_token": n_reused,
        "repeated_merges": len(merges) - len(merge_strings),
        "i32_wrap": wrap,  # some pair count reached 2**31 (see the wrap-around above)
        "queue_entries_pushed": len(dyn_pos),
        "setup_seconds": round(t_setup, 3),
        "seconds": round(time.perf_counter() - t0, 3),
    }
    return BpeResult(vocab=id2w, merges=merge_strings, initial_size=initial_size, stats=stats)


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
    """One merge step over the words `pos` (ascending, unique), vectorized; the same effects as the Python loop
    in `learn_bpe`. Returns the number of merged occurrences; appends (pair, words) for every pair that gained
    occurrences."""
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
    if s.size == 0:
        return 0
    if a == b and s.size > 1:
        # In a run of equal symbols, left-to-right merging takes every other occurrence.
        chained = np.r_[False, prv[s[1:]] == s[:-1]]
        start_idx = np.flatnonzero(~chained)
        run_id = np.cumsum(~chained) - 1
        keep = ((np.arange(s.size) - start_idx[run_id]) % 2) == 0
        s, r, s_word = s[keep], r[keep], s_word[keep]
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
    # Pair count changes: (L, a) -c and (L, new) +c for each left neighbour L; (b, R) -c and (new, R) +c for
    # each right neighbour R. Sum them per neighbour id (no sorting), then touch each pair once.
    get = pair_counts.get
    for ids_, w, lo_hi in ((left, c[has_p], True), (right, c[has_q], False)):
        if ids_.size == 0:
            continue
        if n_ids <= 4 * ids_.size + 4096:
            sums = np.bincount(ids_, weights=w.astype(np.float64), minlength=n_ids)  # exact below 2**53
            nz = np.flatnonzero(sums)
            vals = np.rint(sums[nz]).astype(np.int64).tolist()
            nz = nz.tolist()
        else:
            uniq, inv = np.unique(ids_, return_inverse=True)
            vals = np.rint(np.bincount(inv, weights=w.astype(np.float64))).astype(np.int64).tolist()
            nz = uniq.tolist()
        if lo_hi:  # left neighbours
            lost = [(x << _SHIFT) | a for x in nz]
            gained = [(x << _SHIFT) | new for x in nz]
        else:
            lost = [(b << _SHIFT) | x for x in nz]
            gained = [(new << _SHIFT) | x for x in nz]
        for k, d in zip(lost, vals, strict=True):
            pair_counts[k] = get(k, 0) - d
        for k, d in zip(gained, vals, strict=True):
            pair_counts[k] = get(k, 0) + d
    # words where each pair gained occurrences (ascending, unique per pair)
    gained_keys = np.concatenate(((left << _SHIFT) | new, (np.int64(new) << _SHIFT) | right))
    if gained_keys.size == 0:
        return int(s.size)
    gained_words = np.concatenate((s_word[has_p], s_word[has_q]))
    order = np.argsort(gained_keys, kind="stable")  # stable: words stay ascending within a pair
    gk = gained_keys[order]
    gw = gained_words[order]
    first = np.r_[True, (gk[1:] != gk[:-1]) | (gw[1:] != gw[:-1])]
    gk = gk[first]
    gw = gw[first].astype(np.int32)
    bounds = np.flatnonzero(np.r_[True, gk[1:] != gk[:-1], True]).tolist()
    gw_list = gw.tolist()
    small = _VECTOR_MIN_WORDS
    for j, k in enumerate(gk[bounds[:-1]].tolist()):
        lo = bounds[j]
        hi = bounds[j + 1]
        if hi - lo == 1:
            pushes.append((k, gw_list[lo]))
        elif hi - lo < small:
            pushes.append((k, tuple(gw_list[lo:hi])))
        else:
            pushes.append((k, gw[lo:hi].copy()))
    return int(s.size)
