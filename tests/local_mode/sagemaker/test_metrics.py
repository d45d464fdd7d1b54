"""PROGRESS parsing and FinalMetricDataList from MetricDefinitions (last value per metric)."""

from __future__ import annotations

from contract.progress_lines import parse_progress
from local_mode.sagemaker.metrics import MetricTracker

DEFINITIONS = [
    {"Name": "train_loss", "Regex": "METRIC train_loss=([-+0-9.eE]+|nan|inf)"},
    {"Name": "eval_f1", "Regex": "METRIC eval_f1=([-+0-9.eE]+|nan|inf)"},
    {"Name": "broken", "Regex": "("},
]


def test_progress_lines():
    assert parse_progress("PROGRESS global_step=7 max_steps=20").global_step == 7
    assert parse_progress("[1,0]<stdout>:PROGRESS global_step=3 max_steps=9").max_steps == 9
    assert parse_progress("PROGRESS global_step=4").max_steps is None
    assert parse_progress("progress 4") is None


def test_last_value_per_metric_wins():
    tracker = MetricTracker(DEFINITIONS)
    for line in ["METRIC train_loss=2.5", "noise", "METRIC train_loss=1.25e-1", "METRIC eval_f1=71.2"]:
        tracker.feed(line)
    final = {m["MetricName"]: m["Value"] for m in tracker.final_metric_data_list()}
    assert final == {"train_loss": 0.125, "eval_f1": 71.2}


def test_non_finite_values_are_dropped():
    tracker = MetricTracker(DEFINITIONS)
    tracker.feed("METRIC train_loss=1.0")
    assert tracker.feed("METRIC train_loss=nan") == []
    assert tracker.feed("METRIC eval_f1=inf") == []
    assert [(m["MetricName"], m["Value"]) for m in tracker.final_metric_data_list()] == [("train_loss", 1.0)]


def test_regex_without_group_uses_the_whole_match():
    tracker = MetricTracker([{"Name": "n", "Regex": "[0-9]+(?=ms)"}])
    assert tracker.feed("took 12ms") == [("n", 12.0)]
