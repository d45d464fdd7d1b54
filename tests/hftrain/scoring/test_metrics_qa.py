"""SQuAD scoring and n-best post-processing."""

from __future__ import annotations

import numpy as np
import pytest

from hftrain.scoring import squad as mq


def test_normalization_follows_squad():
    assert mq.normalize_answer("The  Eiffel-Tower!") == "eiffeltower"
    assert mq.normalize_answer("an apple, a pear") == "apple pear"
    assert mq.exact_match("the Denver Broncos", "Denver Broncos") == 1.0


def test_f1_and_em_take_the_best_gold_answer():
    scores = mq.squad_scores({"1": "Denver Broncos", "2": "blue sky"},
                             {"1": ["Broncos", "Denver Broncos"], "2": ["the sky is blue"]})
    assert scores["exact_match"] == pytest.approx(50.0)
    # q2: 2 common tokens ("blue", "sky"), precision 1, recall 2/3 -> F1 0.8
    assert scores["f1"] == pytest.approx(100 * (1.0 + 0.8) / 2)


def test_v2_no_answer_scoring():
    refs = {"a": [], "b": [], "c": ["x y"]}
    scores = mq.squad_scores({"a": "", "b": "something", "c": "x y"}, refs)
    assert scores["exact_match"] == pytest.approx(200 / 3)
    assert scores["NoAns_exact"] == pytest.approx(50.0) and scores["HasAns_exact"] == pytest.approx(100.0)
    assert scores["NoAns_total"] == 2


def _features():
    context = "alpha beta gamma delta"
    # token 0 = CLS, tokens 1-4 = the four words, token 5 = SEP (no offset)
    offsets = [None, (0, 5), (6, 10), (11, 16), (17, 22), None]
    return context, [{"example_id": "q", "offset_mapping": offsets}]


def test_postprocess_picks_the_best_valid_span():
    context, features = _features()
    start = np.array([[0, 0, 5, 1, 0, 9, -100]], dtype=float)  # position 5 has no offset: ignored
    end = np.array([[0, 0, 0, 6, 2, 9, -100]], dtype=float)
    preds = mq.postprocess_predictions(examples=[{"id": "q", "context": context}], features=features,
                                       start_logits=start, end_logits=end)
    assert preds == {"q": "beta gamma"}


def test_postprocess_respects_max_answer_length_and_order():
    context, features = _features()
    start = np.array([[0, 9, 0, 0, 0, 0]], dtype=float)
    end = np.array([[0, 0, 0, 0, 9, 0]], dtype=float)
    preds = mq.postprocess_predictions(examples=[{"id": "q", "context": context}], features=features,
                                       start_logits=start, end_logits=end, max_answer_length=2)
    assert preds["q"] != "alpha beta gamma delta"


def test_postprocess_v2_null_answer():
    context, features = _features()
    start = np.array([[10, 1, 0, 0, 0, 0]], dtype=float)
    end = np.array([[10, 1, 0, 0, 0, 0]], dtype=float)
    common = dict(examples=[{"id": "q", "context": context}], features=features, start_logits=start, end_logits=end)
    assert mq.postprocess_predictions(**common, version_2_with_negative=True) == {"q": ""}
    assert mq.postprocess_predictions(**common, version_2_with_negative=True, null_score_diff_threshold=100.0) == {
        "q": "alpha"}
    assert mq.postprocess_predictions(**common) == {"q": "alpha"}


def test_postprocess_merges_chunks_of_one_example():
    context = "alpha beta gamma delta"
    features = [
        {"example_id": "q", "offset_mapping": [None, (0, 5), (6, 10), None]},
        {"example_id": "q", "offset_mapping": [None, (11, 16), (17, 22), None]},
    ]
    start = np.array([[0, 1, 0, 0], [0, 0, 7, 0]], dtype=float)
    end = np.array([[0, 1, 0, 0], [0, 0, 7, 0]], dtype=float)
    preds = mq.postprocess_predictions(examples=[{"id": "q", "context": context}], features=features,
                                       start_logits=start, end_logits=end)
    assert preds == {"q": "delta"}
