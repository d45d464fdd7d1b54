"""The count-based learner (tokenizer_mr.bpe) against tokenizers' trainer: random corpora (hypothesis), both
merge implementations (Python loop and NumPy), the Rust trainer's own unit-test expectations, i32 wrap-around."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from testkit.tokenizer import prefixed_order, reference

from tokenizer_mr import bpe, bpe_merge
from tokenizer_mr.bpe import learn_bpe
from tokenizer_mr.counts import count_words
from tokenizer_mr.jobs import bpe_config
from tokenizer_mr.settings import TokenizerSettings
from tokenizer_mr.vocab import BpeConfig

ALPHABETS = ["ab", "aab", "abc", "ab-.", "xyzé日", "aAbB1 "]


def _corpus(draw_alpha: str, words: list[list[int]], lines: list[list[int]]) -> list[str]:
    vocab = ["".join(draw_alpha[i % len(draw_alpha)] for i in w) for w in words]
    return [" ".join(vocab[i % len(vocab)] for i in line) for line in lines]


corpora = st.builds(
    _corpus,
    st.sampled_from(ALPHABETS),
    st.lists(st.lists(st.integers(0, 5), min_size=1, max_size=9), min_size=1, max_size=40),
    st.lists(st.lists(st.integers(0, 39), max_size=12), min_size=1, max_size=60),
)


def _learn(settings: TokenizerSettings, texts: list[str], impl: str, order=None):
    counts = count_words(settings, texts)
    words = sorted(counts)  # any order: the result does not depend on it
    counts_arr = np.array([counts[w] for w in words], dtype=np.int64)
    # learn_bpe itself (not jobs.learn, which refuses a vocab smaller than its initial tokens)
    return learn_bpe(words, counts_arr, bpe_config(settings), prefixed_order=order, native=impl == "native")


def _lb(impl: str, *args, **kwargs):
    return learn_bpe(*args, native=impl == "native", **kwargs)


@pytest.fixture(params=["native", "python", "numpy"])
def merge_impl(request, monkeypatch):
    """Run with the compiled merge loop, or with every merge step in the Python loop, or every step in NumPy."""
    monkeypatch.setattr(bpe_merge, "_VECTOR_MIN_WORDS", 10**9 if request.param == "python" else 1)
    return request.param


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=corpora, extra=st.integers(0, 120), min_freq=st.sampled_from([0, 0, 2, 5]),
       specials=st.sampled_from([(), ("<s>",), ("aa", "[UNK]"), ("ab", "b")]))
def test_bpe_matches_tokenizers(merge_impl, texts, extra, min_freq, specials):
    s = TokenizerSettings(tokenizer_type="bpe", vocab_size=256 + len(specials) + extra, min_frequency=min_freq,
                          special_tokens=specials, style="gpt2")
    ref_vocab, ref_merges = reference(s, texts=texts)
    result = _learn(s, texts, merge_impl)
    assert result.vocab_dict == ref_vocab
    assert result.merges == ref_merges


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=corpora, size=st.integers(5, 120), min_freq=st.sampled_from([0, 0, 2, 5]),
       specials=st.sampled_from([("[UNK]", "[CLS]", "[SEP]"), ("[UNK]", "[CLS]", "[SEP]", "aa", "##b")]))
def test_wordpiece_matches_tokenizers(merge_impl, texts, size, min_freq, specials):
    s = TokenizerSettings(tokenizer_type="wordpiece", vocab_size=size, min_frequency=min_freq, special_tokens=specials)
    ref_vocab, _ = reference(s, texts=texts)
    result = _learn(s, texts, merge_impl, order=prefixed_order(ref_vocab))
    assert result.vocab_dict == ref_vocab


def test_bpe_with_continuing_prefix_merges_match(merge_impl):
    """WordPiece training is BPE training with the ## prefix: check the merges too, on tokenizers' BpeTrainer."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    texts = ["abab aabb ab ba bab abba " * 3, "baab abab aaaa bbbb ab", "a b aa bb aaa bbb"] * 20
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    trainer = trainers.BpeTrainer(vocab_size=60, continuing_subword_prefix="##", show_progress=False)
    tok.train_from_iterator(texts, trainer)
    ref = json.loads(tok.to_str())["model"]
    counts = json.loads(trainer.__getstate__())["BpeTrainer"]["words"]
    words = list(counts)
    result = learn_bpe(words, [counts[w] for w in words], BpeConfig(vocab_size=60, continuing_subword_prefix="##"),
                       prefixed_order=prefixed_order(ref["vocab"]), native=merge_impl == "native")
    assert result.vocab_dict == ref["vocab"]
    assert result.merges == [tuple(m) for m in ref["merges"]]


def test_rust_trainer_unit_test_expectations(merge_impl):
    """tokenizers' own `test_train` (bpe/trainer.rs): alphabet by code point, ties by pair ids, min_frequency 2."""
    word_counts = {"roses": 1, "are": 2, "red": 1, "voilets": 1, "blue": 1, "BERT": 1, "is": 2, "big": 1,
                   "and": 1, "so": 1, "GPT-2": 1}
    result = _lb(merge_impl, list(word_counts), list(word_counts.values()), BpeConfig(vocab_size=30000, min_frequency=2))
    expected_vocab = ["-", "2", "B", "E", "G", "P", "R", "T", "a", "b", "d", "e", "g", "i", "l", "n", "o", "r", "s",
                      "t", "u", "v", "re", "are", "is"]
    assert result.vocab == expected_vocab
    assert result.merges == [("r", "e"), ("a", "re"), ("i", "s")]


def test_wraps_like_i32_only_when_a_pair_count_reaches_2_31(merge_impl):
    """2**31 words or more with no pair seen 2**31 times: tokenizers' i32 pair counters hold every count and
    the result is unchanged. A pair count of 2**32 + 1 wraps to 1."""
    base = {"hello": 7, "help": 5, "yellow": 3, "fellow": 2}
    cfg = BpeConfig(vocab_size=20)
    plain = _lb(merge_impl, list(base) + ["x"], list(base.values()) + [1], cfg)
    many = _lb(merge_impl, list(base) + ["x"], list(base.values()) + [2**31 + 5], cfg)
    assert many.stats["tokens"] >= 2**31 and not many.stats["i32_wrap"]
    assert plain.vocab == many.vocab and plain.merges == many.merges
    # a pair count of 2**32 + 1 is 1 for tokenizers' i32: "lo" (count 2) then beats "he"
    big = _lb(merge_impl, ["he", "lo"], [2**32 + 1, 2], BpeConfig(vocab_size=5))
    assert big.merges == [("l", "o")] and big.stats["i32_wrap"]


def test_wraps_like_i32_when_one_pair_count_exceeds_2_31(merge_impl):
    """tokenizers' pair counts are i32 (`counts[i] as i32` added per occurrence, bpe/trainer.rs `count_pairs`):
    one pair seen 2**31 times or more wraps although the corpus has few words. A long word repeated: "a" * 10,000
    on 214,800 lines is the pair ("a", "a") 214,800 * 9,999 = 2**31 + 301,552 times, negative as i32, so it
    never enters the queue and only "bcd" merges."""
    word = "a" * 10_000
    r = _lb(merge_impl, [word, "bcd"], [214_800, 3], BpeConfig(vocab_size=10))
    assert r.stats["tokens"] < 2**31 and r.stats["i32_wrap"]
    assert r.merges == [("b", "c"), ("bc", "d")]
    assert r.vocab == ["a", "b", "c", "d", "bc", "bcd"]
    # 65,537 x "a" on 65,537 lines: ("a", "a") 65,537 * 65,536 = 2**32 + 65,536 times, 65,536 as i32: "bc"
    # (70,000) merges first, then ("a", "a")
    r = _lb(merge_impl, ["a" * 65_537, "bc"], [65_537, 70_000], BpeConfig(vocab_size=5))
    assert r.merges[:2] == [("b", "c"), ("a", "a")]


@pytest.mark.slow
def test_pair_count_overflow_matches_tokenizers():
    """The case above on the real `tokenizers` trainer: it must see 2**31 pair occurrences, so 2.1 GB of text go
    through it (about 30 s; its Python API has no way to train on a given word-count map)."""
    from tokenizers import Tokenizer, models, trainers

    word, n = "a" * 10_000, 214_800
    tok = Tokenizer(models.BPE())
    trainer = trainers.BpeTrainer(vocab_size=10, show_progress=False)
    tok.train_from_iterator(itertools.chain(itertools.repeat(word, n), ["bcd"] * 3), trainer, length=n + 3)
    ref = json.loads(tok.to_str())["model"]
    counts = json.loads(trainer.__getstate__())["BpeTrainer"]["words"]
    assert counts == {word: n, "bcd": 3}
    result = learn_bpe(list(counts), list(counts.values()), BpeConfig(vocab_size=10))
    assert result.vocab_dict == ref["vocab"]
    assert result.merges == [tuple(m) for m in ref["merges"]]
    assert result.merges == [("b", "c"), ("bc", "d")]


def test_input_checks(merge_impl):
    with pytest.raises(ValueError, match="differ in length"):
        _lb(merge_impl, ["a"], [1, 2], BpeConfig(vocab_size=10))
    with pytest.raises(ValueError, match=">= 1"):
        _lb(merge_impl, ["a", "b"], [1, 0], BpeConfig(vocab_size=10))
    seen = []
    _lb(merge_impl, ["ab", ""], [3, 4], BpeConfig(vocab_size=10, special_tokens=["<s>"]), check_initial=seen.append)
    assert seen == [3]  # <s>, a, b


def test_empty_input_learns_nothing(merge_impl):
    result = _lb(merge_impl, [], [], BpeConfig(vocab_size=10, special_tokens=["<s>"]))
    assert result.vocab == ["<s>"] and result.merges == []


def test_memory_estimate_grows_with_the_table():
    assert bpe.memory_estimate(2_000_000, 16_000_000) > bpe.memory_estimate(1_000_000, 8_000_000) > 0


# ---- the compiled merge loop (tokenizer_mr/native) -----------------------------------------------------------------
@pytest.fixture
def fresh_native(monkeypatch):
    from tokenizer_mr import native_merge

    native_merge._library.cache_clear()
    yield native_merge
    native_merge._library.cache_clear()


def test_the_venv_runs_the_compiled_loop_built_from_this_source(fresh_native):
    """`make setup` installs tokenizer-mr-native from training_code/tokenizer_mr/native: present and current."""
    assert fresh_native.available(), "pip install training_code/tokenizer_mr/native (make setup) to build it"
    result = learn_bpe(["hello", "help"], [3, 2], BpeConfig(vocab_size=12))
    assert result.stats["implementation"] == "native"


def test_a_stale_or_missing_build_falls_back_to_python(fresh_native, monkeypatch, tmp_path, caplog):
    other = tmp_path / "bpe_merge.c"
    other.write_text("/* another source */\n")
    monkeypatch.setattr(fresh_native, "SOURCE", other)
    with caplog.at_level("WARNING"):
        assert not fresh_native.available()
        result = learn_bpe(["hello", "help", "yellow"], [3, 2, 4], BpeConfig(vocab_size=14))
    assert "built from another bpe_merge.c" in caplog.text and "not installed: learning in Python" in caplog.text
    assert result.stats["implementation"] == "python"
    fresh_native._library.cache_clear()
    monkeypatch.setenv("TOKENIZER_MR_NATIVE", "0")
    assert not fresh_native.available()
    monkeypatch.delenv("TOKENIZER_MR_NATIVE")
    monkeypatch.setattr(fresh_native, "SOURCE", fresh_native.Path(__file__).with_name("nothing.c"))
    fresh_native._library.cache_clear()
    native = learn_bpe(["hello", "help", "yellow"], [3, 2, 4], BpeConfig(vocab_size=14))
    assert native.stats["implementation"] == "native"
    assert (native.vocab, native.merges) == (result.vocab, result.merges)


def test_an_error_in_the_new_token_callback_stops_the_loop_and_is_raised(fresh_native):
    ids = np.array([0, 1, 0, 1, 2], dtype=np.int32)
    calls = []

    def new_token(a, b):
        calls.append((a, b))
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        fresh_native.merge(ids, np.array([0, 2, 5]), np.array([4, 1]), 3, 10, 0, new_token)
    assert calls == [(0, 1)]  # the first merge, then nothing more
    with pytest.raises(ValueError, match="one offset per word"):
        fresh_native.merge(ids, np.array([0, 2]), np.array([4, 1]), 3, 10, 0, lambda a, b: 3)
