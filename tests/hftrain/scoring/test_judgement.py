"""The verdict's figures (hftrain/scoring/judgement.py): a paired bootstrap interval of the gain over the judged
examples, the same for the same data, [0, 0] only when nothing changed."""

from __future__ import annotations

import numpy as np
import pytest

from contract import verdict_metrics as names
from hftrain.scoring import judgement


def test_the_interval_holds_the_mean_gain_and_is_reproducible():
    rng = np.random.default_rng(3)
    model, other = rng.random(200) * 100, rng.random(200) * 100 - 10  # about +10 better, noisy
    low, high = judgement.gain_interval(model, other)
    assert low < float(np.mean(model - other)) < high and low > 0
    assert (low, high) == judgement.gain_interval(model, other)


def test_noise_is_not_a_gain_and_no_change_is_exactly_zero():
    rng = np.random.default_rng(4)
    a, b = rng.random(60), rng.random(60)
    low, high = judgement.gain_interval(a, b)
    assert low < 0 < high  # two draws of the same noise: the interval straddles zero
    assert judgement.gain_interval(a, a) == (0.0, 0.0)


def test_the_metrics_and_their_checks():
    found = judgement.judgement_metrics(model=[1.0, 1.0, 0.0, 1.0], baseline=[0.0, 1.0, 0.0, 0.0],
                                        pretrained=[0.0, 0.0, 0.0, 0.0], baseline_index=1, steps=30, loss_change=-0.5)
    assert set(found) == set(names.ALL)
    assert found[names.MODEL] == 0.75 and found[names.BASELINE] == 0.25 and found[names.PRETRAINED] == 0.0
    assert found[names.EXAMPLES] == 4 and found[names.STEPS] == 30 and found[names.BASELINE_INDEX] == 1
    with pytest.raises(ValueError, match="judged scores differ in length"):
        judgement.judgement_metrics(model=[1.0], baseline=[], pretrained=[1.0], baseline_index=0, steps=1,
                                    loss_change=0.0)
    with pytest.raises(ValueError, match="no judged examples"):
        judgement.gain_interval([], [])
