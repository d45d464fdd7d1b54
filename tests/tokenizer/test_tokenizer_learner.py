"""The count-based learner (tokenizer_mr.bpe) against tokenizers' trainer: random corpora (hypothesis), both
merge implementations (Python loop and NumPy), the Rust trainer's own unit-test expectations, i32 wrap-around."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from tokenizer_mr import bpe
from tokenizer_mr.bpe import BpeConfig, learn_bpe
from tokenizer_mr.counts import count_words
from tokenizer_mr.jobs import bpe_config
from tokenizer_mr.settings import TokenizerSettings
from tokenizer_testlib import prefixed_order, reference

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


def _learn(settings: TokenizerSettings, texts: list[str], order=None):
    counts = count_words(settings, texts)
    words = sorted(counts)  # any order: the result does not depend on it
    counts_arr = np.array([counts[w] for w in words], dtype=np.int64)
    # learn_bpe itself (not jobs.learn, which refuses a vocab smaller than its initial tokens)
    return learn_bpe(words, counts_arr, bpe_config(settings), prefixed_order=order)


@pytest.fixture(params=["python", "numpy"])
def merge_impl(request, monkeypatch):
    """Run with every merge step in the Python loop, or every step in NumPy."""
    monkeypatch.setattr(bpe, "_VECTOR_MIN_WORDS", 10**9 if request.param == "python" else 1)
    return request.param


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=corpora, extra=st.integers(0, 120), min_freq=st.sampled_from([0, 0, 2, 5]),
       specials=st.sampled_from([(), ("<s>",), ("aa", "[UNK]"), ("ab", "b")]))
def test_bpe_matches_tokenizers(merge_impl, texts, extra, min_freq, specials):
    s = TokenizerSettings(tokenizer_type="bpe", vocab_size=256 + len(specials) + extra, min_frequency=min_freq,
                          special_tokens=specials, style="gpt2")
    ref_vocab, ref_merges = reference(s, texts=texts)
    result = _learn(s, texts)
    assert result.vocab_dict == ref_vocab
    assert result.merges == ref_merges


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(texts=corpora, size=st.integers(5, 120), min_freq=st.sampled_from([0, 0, 2, 5]),
       specials=st.sampled_from([("[UNK]", "[CLS]", "[SEP]"), ("[UNK]", "[CLS]", "[SEP]", "aa", "##b")]))
def test_wordpiece_matches_tokenizers(merge_impl, texts, size, min_freq, specials):
    s = TokenizerSettings(tokenizer_type="wordpiece", vocab_size=size, min_frequency=min_freq, special_tokens=specials)
    ref_vocab, _ = reference(s, texts=texts)
    result = _learn(s, texts, order=prefixed_order(ref_vocab))
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
                       prefixed_order=prefixed_order(ref["vocab"]))
    assert result.vocab_dict == ref["vocab"]
    assert result.merges == [tuple(m) for m in ref["merges"]]


def test_rust_trainer_unit_test_expectations():
    """tokenizers' own `test_train` (bpe/trainer.rs): alphabet by code point, ties by pair ids, min_frequency 2."""
    word_counts = {"roses": 1, "are": 2, "red": 1, "voilets": 1, "blue": 1, "BERT": 1, "is": 2, "big": 1,
                   "and": 1, "so": 1, "GPT-2": 1}
    result = learn_bpe(list(word_counts), list(word_counts.values()), BpeConfig(vocab_size=30000, min_frequency=2))
    expected_vocab = ["-", "2", "B", "E", "G", "P", "R", "T", "a", "b", "d", "e", "g", "i", "l", "n", "o", "r", "s",
                      "t", "u", "v", "re", "are", "is"]
    assert result.vocab == expected_vocab
    assert result.merges == [("r", "e"), ("a", "re"), ("i", "s")]


def test_wraps_like_i32_when_the_corpus_exceeds_2_31_words():
    """Beyond 2**31 words tokenizers' i32 pair counters wrap; the learner switches to exact wrap-around
    arithmetic. With no pair count beyond 2**31 the result is unchanged."""
    base = {"hello": 7, "help": 5, "yellow": 3, "fellow": 2}
    cfg = BpeConfig(vocab_size=20)
    plain = learn_bpe(list(base) + ["x"], list(base.values()) + [1], cfg)
    wrapped = learn_bpe(list(base) + ["x"], list(base.values()) + [2**31 + 5], cfg)
    assert wrapped.stats["tokens"] >= 2**31
    assert plain.vocab == wrapped.vocab and plain.merges == wrapped.merges
    # a pair count of 2**32 + 1 is 1 for tokenizers' i32: "lo" (count 2) then beats "he"
    big = learn_bpe(["he", "lo"], [2**32 + 1, 2], BpeConfig(vocab_size=5))
    assert big.merges == [("l", "o")]


def test_input_checks():
    with pytest.raises(ValueError, match="differ in length"):
        learn_bpe(["a"], [1, 2], BpeConfig(vocab_size=10))
    with pytest.raises(ValueError, match=">= 1"):
        learn_bpe(["a", "b"], [1, 0], BpeConfig(vocab_size=10))
    seen = []
    learn_bpe(["ab", ""], [3, 4], BpeConfig(vocab_size=10, special_tokens=["<s>"]), check_initial=seen.append)
    assert seen == [3]  # <s>, a, b


def test_empty_input_learns_nothing():
    result = learn_bpe([], [], BpeConfig(vocab_size=10, special_tokens=["<s>"]))
    assert result.vocab == ["<s>"] and result.merges == []


def test_memory_estimate_grows_with_the_table():
    assert bpe.memory_estimate(2_000_000, 16_000_000) > bpe.memory_estimate(1_000_000, 8_000_000) > 0
