"""The compiled merge loop (native/bpe_merge.c), loaded with ctypes from the `tokenizer-mr-native` wheel.

The processing jobs install that wheel from the code bundle (requirements-processing.txt, stacks/assets/job_wheels.py);
`make setup` installs it into the project's venv. Where it is missing, built from another bpe_merge.c than the one
beside this module, or switched off (`TOKENIZER_MR_NATIVE=0`), `bpe.learn_bpe` runs its Python/NumPy merge loop
instead: the same result, several times slower (a warning says so).
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import os
import time
from collections.abc import Callable
from functools import lru_cache
from pathlib import Path

import numpy as np

log = logging.getLogger("tokenizer_mr.native")

# bpe_merge.c's statistics (enum STAT_*) and error codes (enum ERR_*)
STAT_NAMES = ("merges", "word_merges", "queue_entries_pushed", "i32_wrap", "wrap_count", "initial_pairs", "pairs",
              "native_bytes")
_ERRORS = {-1: "ran out of memory", -2: "stopped by an error in the new-token callback", -3: "rejected its input"}

NewToken = Callable[[int, int], int]
_CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32, ctypes.c_int32)


SOURCE = Path(__file__).with_name("native") / "bpe_merge.c"


@lru_cache(maxsize=1)
def _library() -> ctypes.CDLL | None:
    if os.environ.get("TOKENIZER_MR_NATIVE", "1") == "0":
        return None
    try:
        import tokenizer_mr_native
    except ImportError:
        return None
    lib = ctypes.CDLL(str(tokenizer_mr_native.LIBRARY))
    lib.bpe_merge_source.restype = ctypes.c_char_p
    built = lib.bpe_merge_source().decode()
    if SOURCE.exists() and built != hashlib.sha256(SOURCE.read_bytes()).hexdigest():
        log.warning("the installed tokenizer-mr-native was built from another bpe_merge.c than %s: not used (install "
                    "it again: pip install training_code/tokenizer_mr/native)", SOURCE)
        return None
    ptr = ctypes.c_void_p
    lib.bpe_merge.argtypes = [ptr, ptr, ptr, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint64,
                              _CALLBACK, ptr]
    lib.bpe_merge.restype = ctypes.c_int64
    return lib


def available() -> bool:
    """Whether the compiled merge loop is installed (and not switched off with TOKENIZER_MR_NATIVE=0)."""
    return _library() is not None


def merge(
    sym: np.ndarray,
    word_start: np.ndarray,
    counts: np.ndarray,
    n_vocab: int,
    vocab_size: int,
    min_frequency: int,
    new_token: NewToken,
    progress: Callable[[], None] | None = None,
) -> dict[str, int]:
    """Run the merge loop on the words' symbols (`sym`: int32 token ids, word w at
    `sym[word_start[w]:word_start[w + 1]]`, changed in place) with their `counts`. `new_token(a, b)` is called
    for each merge in order and returns the merged token's id; `progress()` about every 10 seconds. Returns the
    statistics (STAT_NAMES)."""
    lib = _library()
    if lib is None:
        raise RuntimeError("the native merge loop is not installed (pip install training_code/tokenizer_mr/native)")
    sym = np.ascontiguousarray(sym, dtype=np.int32)
    word_start = np.ascontiguousarray(word_start, dtype=np.int64)
    counts = np.ascontiguousarray(counts, dtype=np.int64)
    if word_start.shape != (counts.size + 1,) or (counts.size and int(word_start[-1]) > sym.size):
        raise ValueError("word_start must hold one offset per word plus the end, within sym")
    failure: list[BaseException] = []
    next_report = [time.monotonic() + 10.0]

    def call(a: int, b: int) -> int:
        try:
            new = new_token(a, b)
            if progress is not None and time.monotonic() >= next_report[0]:
                progress()
                next_report[0] = time.monotonic() + 10.0
            return new
        except BaseException as exc:  # noqa: BLE001 - re-raised below, once the C loop has returned
            failure.append(exc)
            return -1

    callback = _CALLBACK(call)
    stats = np.zeros(len(STAT_NAMES), dtype=np.int64)
    rc = lib.bpe_merge(sym.ctypes.data, word_start.ctypes.data, counts.ctypes.data, counts.size, n_vocab, vocab_size,
                       min_frequency, callback, stats.ctypes.data)
    if failure:
        raise failure[0]
    if rc < 0:
        if rc == -1:
            raise MemoryError(f"the native merge loop ran out of memory after {int(stats[-1]) >> 20} MB")
        raise RuntimeError(f"the native merge loop {_ERRORS.get(int(rc), f'failed ({rc})')}")
    return dict(zip(STAT_NAMES, stats.tolist(), strict=True))
