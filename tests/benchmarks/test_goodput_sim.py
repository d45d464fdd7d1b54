"""The goodput simulator's model (benchmarks/goodput_sim/): the arithmetic of one training segment, what each
kind of interruption costs under each policy, and the auto interval estimated, never told the true rate."""

from __future__ import annotations

import random
from dataclasses import replace

import pytest

from benchmarks.goodput_sim import events, policies
from benchmarks.goodput_sim.costs import costs_at
from benchmarks.goodput_sim.interval import IntervalChooser
from benchmarks.goodput_sim.profiles import BYTES_PER_PARAMETER, G5, P4D
from benchmarks.goodput_sim.simulate import PARTS, run_once, simulate, stop_at

BASELINE, BACKGROUND, EMERGENCY, IN_PLACE, FAST, AUTO = policies.POLICIES


def test_checkpoint_bytes_are_computed_for_the_named_models() -> None:
    assert BYTES_PER_PARAMETER == 12  # fp32 weights + AdamW's two fp32 moments (4.0 GB for 334M: measured)
    assert P4D.checkpoint_gb == pytest.approx(84.0) and P4D.shard_gb_per_instance == pytest.approx(5.25)
    assert G5.checkpoint_gb == pytest.approx(15.6) and G5.shard_gb_per_gpu == pytest.approx(15.6 / 16)
    for fleet in (P4D, G5):
        for name, figure in fleet.figures.items():
            assert figure.low <= figure.mid <= figure.high, name
            assert figure.source and figure.kind, name


def test_a_save_counts_once_complete_and_for_a_new_job_once_in_s3() -> None:
    # saves every 100 s of steps, each blocking 10 s, complete 5 s after, in S3 5 s after that
    shape = {"first": 100.0, "every": 100.0, "block": 10.0, "lag": 5.0, "upload": 5.0, "saves": 3}
    mid_save = stop_at(105, 0.0, **shape)
    assert (mid_save.position, mid_save.checkpointing, mid_save.local) == (100, 5, 0)  # lost in the save
    writing = stop_at(112, 0.0, **shape)
    assert (writing.position, writing.local, writing.durable) == (102, 0, 0)  # not complete yet
    uploading = stop_at(117, 0.0, **shape)
    assert (uploading.local, uploading.durable) == (100, 0)
    later = stop_at(250, 0.0, **shape)
    assert (later.position, later.checkpointing, later.local, later.durable) == (230, 20, 200, 200)


def test_without_interruptions_the_run_pays_one_start_the_saves_and_the_end() -> None:
    costs = costs_at(P4D, "mid")
    parts = run_once(costs, BASELINE, 0.0, random.Random(1))
    first = (costs.image_pull + costs.data_download + costs.imports + costs.pg_join + costs.data_load + costs.model_load
             + costs.tokenize)
    saves = (costs.work // 1800 - 1) * costs.blocking_save
    billed = sum(parts[p] for p in PARTS)
    assert billed == pytest.approx(costs.work + first + saves + costs.evaluation + costs.final_upload)
    assert parts["replayed"] == 0 and parts["stalled"] == 0 and parts["provisioning"] == costs.provisioning


def test_the_notice_saves_the_steps_a_reclaim_would_lose() -> None:
    costs, spot = costs_at(P4D, "mid"), events.Mix(spot=1, hardware=0, crash=0, stall=0)
    without = simulate(costs, BACKGROUND, 4, samples=60, mix=spot)
    with_notice = simulate(costs, EMERGENCY, 4, samples=60, mix=spot)
    assert with_notice["goodput"] > without["goodput"]
    # only the tails after the last step remain: the emergency save's write and upload and the exit
    tail = costs.background_write + costs.upload + costs.exit
    per_event = with_notice["parts"]["replayed"] * with_notice["billed_hours"] * 3600
    assert per_event < 6 * tail  # about 4 interruptions' tails, never the half interval (900 s each)


def test_a_crash_on_healthy_instances_recovers_in_place_without_a_new_job() -> None:
    costs, crashes = costs_at(P4D, "mid"), events.Mix(spot=0, hardware=0, crash=1, stall=0)
    new_jobs = simulate(costs, EMERGENCY, 4, samples=60, mix=crashes)
    in_place = simulate(costs, IN_PLACE, 4, samples=60, mix=crashes)
    first_start = costs.provisioning / 3600  # the only provisioning in place
    assert in_place["provisioning_hours"] == pytest.approx(first_start)
    assert new_jobs["provisioning_hours"] > first_start
    assert in_place["parts"]["recovering"] > 0 == new_jobs["parts"]["recovering"]
    assert in_place["goodput"] > new_jobs["goodput"]
    fast = simulate(costs, FAST, 4, samples=60, mix=crashes)
    assert fast["parts"]["recovering"] < in_place["parts"]["recovering"]  # no imports, no model construction


def test_the_auto_interval_estimates_m_from_the_runs_history_not_the_true_rate() -> None:
    chooser = IntervalChooser(auto=True, prior_hours=6.0)
    first = chooser.at_start(0.0)
    assert first.mtbi_seconds == 6 * 3600 and first.seconds() == 5 * 60  # the prior; the lower bound until C
    chooser.record(0.11, saves=3, interrupted=True)
    chooser.record(0.11, saves=2, interrupted=True)
    later = chooser.at_start(10 * 3600.0)
    assert later.mtbi_seconds == pytest.approx(5 * 3600)  # 10 h since the first start / 2 interruptions
    assert later.save_seconds == pytest.approx(0.11)
    assert IntervalChooser(auto=False, prior_hours=6.0).first_and_rest(None, 1.0) == (1800.0, 1800.0)
    # a blocking save of 2 min with a 6 h prior: sqrt(2 x 120 s x 6 h) = 38 min
    slow = IntervalChooser(auto=True, prior_hours=6.0)
    slow.record(120.0, saves=1, interrupted=False)
    assert slow.at_start(60.0).seconds() == pytest.approx((2 * 120 * 6 * 3600) ** 0.5)


def test_every_policy_adds_a_saving_on_the_p4d_fleet() -> None:
    costs = costs_at(P4D, "mid")
    goodput = [simulate(costs, p, 4, samples=80)["goodput"] for p in policies.POLICIES]
    assert goodput[-1] > goodput[2] > goodput[0]
    assert goodput[-1] == max(goodput)
    assert simulate(replace(costs, work=costs.work), AUTO, 0.0, samples=2)["goodput"] > 0.97
