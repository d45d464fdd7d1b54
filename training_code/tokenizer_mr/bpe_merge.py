"""Steps 4-5 of bpe.py's `learn_bpe` (see its docstring): pair counts, the queue and the merge loop, compiled
(native/bpe_merge.c through native_merge) or in Python/NumPy; both give the same merges."""

from __future__ import annotations

import logging
import time
from array import array
from collections.abc import Callable
from dataclasses import dataclass
from heapq import heappop, heappush

import numpy as np

from . import native_merge
from .vocab import BpeConfig, Tokens

log = logging.getLogger("tokenizer_mr.bpe")

_SHIFT = 32
_LOW32 = (1 << 32) - 1
_U64 = (1 << 64) - 1
_I32_END = 1 << 31  # the first count tokenizers' i32 pair counters cannot hold
_KEY_SHIFT = 96  # queue key = -count * 2**96 + (pair << 32) + entry id: a min-heap pops (count desc, pair asc)
_VECTOR_MIN_WORDS = 48  # entries listing at least this many words are merged with NumPy


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


def _ranges(starts: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Concatenated `arange(start, start + length)` for each pair (vectorized)."""
    total = int(lengths.sum())
    if total == 0:
        return np.zeros(0, np.int64)
    ends = np.cumsum(lengths)
    return np.repeat(starts - (ends - lengths), lengths) + np.arange(total, dtype=np.int64)


# ---- steps 4-5, compiled (native/bpe_merge.c) ---------------------------------------------------------------------
def _merge_native(
    cfg: BpeConfig,
    tokens: Tokens,
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
    tokens: Tokens,
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
    tokens: Tokens,
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
