"""Stragglers (hftrain/stall/stragglers.py): a rank slower than the fleet by its own time per step is named, with
what it costs; healthy ranks with uneven work are not; a straggler is never a stall."""

from __future__ import annotations

import json
import logging

from hftrain.stall import stragglers
from hftrain.stall import watchdog as stall
from hftrain.stall.boards import LocalBoard
from hftrain.stall.limits import Limits


def beat(rank: int, own: float | None, steps: int = 50) -> dict:
    return {"rank": rank, "host": f"algo-{rank // 2 + 1}", "local_rank": rank % 2, "own_step": own,
            "own_steps": steps}


def test_healthy_ranks_with_uneven_shards_are_not_stragglers():
    # uneven shards: up to 15% apart (padding, sequence lengths), under the 20% threshold
    assert stragglers.find({0: beat(0, 0.100), 1: beat(1, 0.108), 2: beat(2, 0.115), 3: beat(3, 0.095)}) == []
    assert stragglers.find({0: beat(0, 0.1), 1: beat(1, 0.5, steps=3)}) == []  # too few steps to say
    assert stragglers.find({0: beat(0, 0.1), 1: None}) == []
    # a window that found none says what it compared, or that it had nothing to compare
    assert stragglers.window_line({0: beat(0, 0.100), 1: beat(1, 0.108)}, 5) == (
        "stragglers: none over the last 5 min (own time per step: rank 0 0.1 s, rank 1 0.108 s; fleet median "
        "0.104 s; a straggler is 1.2x it)")
    assert stragglers.window_line({0: beat(0, 0.1), 1: beat(1, 0.5, steps=3)}, 0.25) == (
        "stragglers: none over the last 0.25 min (1 rank(s) with 5+ steps measured: nothing to compare)")


def test_a_rank_twenty_percent_slower_is_named_with_its_cost():
    found = stragglers.find({0: beat(0, 0.10), 1: beat(1, 0.10), 2: beat(2, 0.10), 3: beat(3, 0.20)})
    assert [s["rank"] for s in found] == [3]
    assert found[0]["slower"] == 1.0 and found[0]["minutes_lost_per_hour"] == 30.0
    assert stragglers.describe(found[0]) == (
        "straggler: rank 3 (algo-2, local rank 1) takes 0.2 s of its own per step against the fleet's median 0.1 s "
        "(+100%); the fleet runs at its pace: up to 30 min of every hour of every instance")


def test_rank_zeros_watchdog_names_a_straggler_once_per_window_and_it_is_no_stall(caplog):
    clock = [1000.0]
    heart = stall.Heart(clock=lambda: clock[0])
    heart.mark("train", "train")
    board = LocalBoard()
    who = stall.Identity(rank=0, world=2, host="algo-1", job="job-1")
    exits: list[int] = []
    watchdog = stall.Watchdog(who, Limits(minutes=10), board=board, heart=heart, poll=1.0, clock=lambda: clock[0],
                              exit=exits.append, straggler_seconds=60)
    slow = {"rank": 1, "host": "algo-2", "local_rank": 0, "pid": 2, "job": "job-1", "step": 0, "phase": "train",
            "kind": "train", "where": "", "frames": [], "waiting": True, "hostname": "h", "median_step": 0.5}
    caplog.set_level(logging.WARNING, logger="hftrain")
    for step in range(1, 121):  # 2 minutes: this rank 0.1 s of its own per step, rank 1 0.3 s
        clock[0] += 1.0
        with heart.own_time():
            heart.own(0.1)
        heart.step_ends(step)
        board.set(f"{stall.KEY}beat/1", json.dumps({**slow, "step": step, "moved_at": clock[0], "alive_at": clock[0],
                                                    "own_step": 0.3, "own_steps": 60}))
        assert watchdog.tick() is False
    named = [r.getMessage() for r in caplog.records if "straggler: rank 1 (algo-2" in r.getMessage()]
    assert len(named) == 2, named  # once per 60 s window
    assert watchdog.stragglers[0]["rank"] == 1 and exits == []


def test_a_rank_that_becomes_slow_is_named_within_one_window_and_a_recovered_one_no_longer():
    """Rank 1 computes 0.1 s of its own per step, then 0.3 s from t=235 s to t=435 s: each beat carries its median over
    the trailing 60-s window (as Heart.own_step measures it); rank 0 looks every second."""
    clock = [1000.0]
    heart = stall.Heart(clock=lambda: clock[0])
    heart.mark("train", "train")
    board = LocalBoard()
    who = stall.Identity(rank=0, world=2, host="algo-1", job="job-1")
    watchdog = stall.Watchdog(who, Limits(minutes=10), board=board, heart=heart, poll=1.0, clock=lambda: clock[0],
                              exit=[].append, straggler_seconds=60)
    peer = {"rank": 1, "host": "algo-2", "local_rank": 0, "pid": 2, "job": "job-1", "phase": "train",
            "kind": "train", "where": "", "frames": [], "waiting": True, "hostname": "h", "median_step": 0.5}
    own: list[tuple[float, float]] = []
    named_at, cleared_at = None, None
    for step in range(1, 601):
        clock[0] += 1.0
        with heart.own_time():
            heart.own(0.1)
        heart.step_ends(step)
        own.append((clock[0], 0.3 if 235 <= step < 435 else 0.1))
        window = sorted(o for at, o in own if at >= clock[0] - 60)
        board.set(f"{stall.KEY}beat/1", json.dumps({**peer, "step": step, "moved_at": clock[0],
                                                    "alive_at": clock[0], "own_step": window[len(window) // 2],
                                                    "own_steps": len(window)}))
        assert watchdog.tick() is False
        named = [s["rank"] for s in watchdog.stragglers]
        if named == [1] and named_at is None:
            named_at = step
        if named_at and not named and cleared_at is None:
            cleared_at = step
    assert named_at is not None and 235 < named_at <= 235 + 60, named_at  # within one window (here half of one)
    assert cleared_at is not None and 435 < cleared_at <= 435 + 60, cleared_at
    # the heartbeat (and so the summary) keeps it, marked as caught up
    assert [(n["rank"], n["now"]) for n in watchdog.named.values()] == [(1, False)]
    assert watchdog.named[1]["own_step_seconds"] == 0.3


def test_with_stragglers_end_the_watchdog_ends_the_job_naming_the_rank_for_a_new_attempt(tmp_path, monkeypatch):
    """`stall_stragglers end`: the first window that names a straggler ends the job on every rank (the failure
    text's cause is `straggler`: a new attempt on other instances, never a recovery in place), with no stall record
    (no time was stalled)."""
    from contract import failure_causes as causes
    from hfsm_lambda.runs import actions
    from hftrain.recovery.decision import END, Outcome, decide

    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    clock = [1000.0]
    heart = stall.Heart(clock=lambda: clock[0])
    heart.mark("train", "train")
    board = LocalBoard()
    who = stall.Identity(rank=0, world=2, host="algo-1", job="job-1", checkpoint_dir=str(tmp_path / "ckpt"))
    exits: list[int] = []
    watchdog = stall.Watchdog(who, Limits(minutes=10), board=board, heart=heart, poll=1.0, clock=lambda: clock[0],
                              exit=exits.append, straggler_seconds=60, straggler_action="end", ack_seconds=0)
    slow = {"rank": 1, "host": "algo-2", "local_rank": 0, "pid": 2, "job": "job-1", "step": 0, "phase": "train",
            "kind": "train", "where": "", "frames": [], "waiting": True, "hostname": "h", "median_step": 0.5}
    acted_at = None
    for step in range(1, 121):
        clock[0] += 1.0
        with heart.own_time():
            heart.own(0.1)
        heart.step_ends(step)
        board.set(f"{stall.KEY}beat/1", json.dumps({**slow, "step": step, "moved_at": clock[0], "alive_at": clock[0],
                                                    "own_step": 0.3, "own_steps": 60}))
        if watchdog.tick():
            acted_at = step
            break
    assert acted_at is not None and acted_at <= 62 and exits == [stall.EXIT_CODE]  # within one window
    text = (tmp_path / "output" / "failure").read_text()
    assert text.startswith(causes.STRAGGLER_PREFIX + "straggler: rank 1 (algo-2, local rank 0)")
    assert causes.classify(text) == causes.STRAGGLER
    assert actions.action_for(causes.STRAGGLER).action == actions.NEW_ATTEMPT
    assert decide([Outcome(rank=0, host="algo-1", exit_code=stall.EXIT_CODE, text=text)], earlier=[],
                  budget=2).action == END
    assert not (tmp_path / "ckpt" / "_stalls.json").exists()
