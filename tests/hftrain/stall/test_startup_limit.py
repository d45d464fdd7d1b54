"""The derived start-up limit (`stall.startup_minutes: auto`, contract/startup_limit.py): measured by each attempt's
rank 0 into the progress file, read back by the next attempt's watchdog, the import watch and the outside watch."""

from __future__ import annotations

import json

import pytest

from contract import startup_limit
from hftrain import args as hp
from hftrain.checkpoint import history as run_history
from hftrain.run.goodput import GoodputClock
from hftrain.stall.limits import Limits


class FakeClock:
    def __init__(self, now: float) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize(("minutes", "measured", "seconds"), [
    (None, None, 1800.0),  # the prior: no start-up measured yet
    (None, 60.0, 600.0),  # 3 x 60 s is under the floor (10 min)
    (None, 900.0, 2700.0),  # 3 x 15 min
    (2.0, 900.0, 120.0),  # a number wins over any measurement
])
def test_the_rule(minutes, measured, seconds):
    assert startup_limit.seconds(minutes, measured) == seconds
    assert Limits(minutes=1, startup_minutes=minutes, measured_startup=measured).seconds("startup", None) == seconds
    # the prior of evaluations and saves before their first measurement is the same limit
    assert Limits(minutes=1, startup_minutes=minutes, measured_startup=measured).seconds("save", None) == seconds


def test_the_limit_named_in_a_verdict_says_which_rule_fired():
    assert Limits(startup_minutes=None).describe("startup", None) == (
        "stall.startup_minutes=auto: 30 min (the prior: no start-up of this run measured yet), for startup")
    assert Limits(startup_minutes=None, measured_startup=900.0).describe("startup", None) == (
        "stall.startup_minutes=auto: max(10 min, 3 x the longest start-up this run measured, 900 s) = 45.0 min, "
        "for startup")
    assert Limits(startup_minutes=0.5).describe("startup", None) == "stall.startup_minutes=0.5, for startup"


@pytest.mark.parametrize("bad", ["soon", "0", "-1", "nan", "inf", True])
def test_bad_values_are_refused(bad):
    with pytest.raises(ValueError, match="expected 'auto' or minutes > 0"):
        startup_limit.parse(bad)


@pytest.mark.parametrize(("value", "ok"), [("auto", True), ("0.5", True), ("never", False), ("0", False)])
def test_the_hyperparameter_is_checked_before_training(value, ok, tmp_path, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    argv = ["--task", "text-classification", "--stall_startup_minutes", value]
    if ok:
        assert hp.parse_args(argv)[2].stall_startup_minutes == value
    else:
        with pytest.raises(hp.ArgumentError, match="stall_startup_minutes: expected 'auto' or minutes > 0"):
            hp.parse_args(argv)


def test_each_attempt_records_its_start_up_and_the_next_one_reads_the_longest(tmp_path):
    """Rank 0's goodput clock hands the start-up (train.py's first line to the first step) to the run history,
    which writes it at once; a restart carries the earlier ones forward, and the progress beat count (which says
    whether the step reached is known) is not touched."""
    clock = FakeClock(1_800_000_000.0)
    first = run_history.RunHistory(str(tmp_path), job="job-a", host="algo-1", every_seconds=30, clock=clock)
    first.record_start({}, resumed_step=None)
    goodput = GoodputClock(job="job-a", enabled=False, clock=clock, started_at=clock.now - 420.0)
    goodput.on_startup.append(first.record_startup_seconds)
    goodput.first_step_begins()
    progress = json.loads((tmp_path / "_progress.json").read_text())
    assert progress["startup_seconds"] == [420.0] and progress["beats"] == 0
    assert startup_limit.read_measured(str(tmp_path)) == 420.0
    # the lost attempt had no progress beat: the step it reached stays unknown (checkpoint/history.py)
    clock.now += 100
    second = run_history.RunHistory(str(tmp_path), job="job-b", host="algo-1", every_seconds=30, clock=clock)
    assert second.record_start({}, resumed_step=None)["step_reached"] is None
    second.record_startup_seconds(95.5)  # a restart with the tokenized cache starts faster
    assert json.loads((tmp_path / "_progress.json").read_text())["startup_seconds"] == [420.0, 95.5]
    assert startup_limit.read_measured(str(tmp_path)) == 420.0  # the longest: a cold start may come again
    assert startup_limit.seconds(None, startup_limit.read_measured(str(tmp_path))) == 1260.0
