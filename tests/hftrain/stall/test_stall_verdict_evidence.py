"""The stall verdict (hftrain/stall/verdict.py) on the evidence issue 34 found misread: a rank SIGSTOPped before its
watchdog's first beat, a rank that moves slowly (stopped and continued again and again), and the first beat
published at once."""

from __future__ import annotations

import json
import threading
import time

from hftrain.stall import watchdog as stall
from hftrain.stall.boards import LocalBoard
from hftrain.stall.limits import Limits
from hftrain.stall.verdict import judge

NOW = 10_000.0


def beat(rank: int, *, moved: float, alive: float = NOW, step: int | None = 19, kind: str = "train",
         waiting: bool = True) -> dict:
    return {"rank": rank, "host": f"algo-{rank + 1}", "local_rank": 0, "pid": 100 + rank, "job": "job-1",
            "step": step, "phase": "train" if kind == "train" else "restore", "kind": kind, "where": "",
            "moved_at": moved, "alive_at": alive, "median_step": 0.05,
            "frames": ["_engine_run_backward (torch/autograd/graph.py:1)"], "waiting": waiting, "hostname": "h"}


def layout(rank: int) -> tuple[str, int]:
    return f"algo-{rank + 1}", 0


def test_a_rank_frozen_before_its_first_beat_is_named_with_its_host_the_training_limit_and_the_peers_step():
    """The issue's first case: rank 1 SIGSTOPped at step 19 before its watchdog ever published; the training limit
    (1 min) fired, not the start-up one (60 min); its host from the job's layout; the stacks' folder is the job's."""
    limits = Limits(minutes=1, startup_minutes=60)
    beats = {0: beat(0, moved=NOW - 61), 1: None}
    verdict = judge(beats, limits, now=NOW, started_at=NOW - 70, poll=6, identity=layout)
    first = verdict.message.splitlines()[0]
    assert first.startswith("stall watchdog: rank 1 (algo-2, local rank 0) never reported (frozen or dead before "
                            "its watchdog's first beat); no progress for 1.0 min, after step 19"), first
    assert "limit stall.minutes=1." in verdict.message and "startup_minutes" not in verdict.message
    assert "_stalls/job-1/rank-<rank>.txt" in verdict.message
    assert (verdict.record["rank"], verdict.record["host"], verdict.record["step"]) == (1, "algo-2", 19)
    assert verdict.record["job"] == "job-1" and verdict.record["limit"] == "stall.minutes=1"


def test_a_frozen_rank_is_named_at_the_step_its_peers_completed_not_a_stale_one():
    limits = Limits(minutes=1, startup_minutes=60)
    beats = {0: beat(0, moved=NOW - 61, step=19), 1: beat(1, moved=NOW - 70, alive=NOW - 65, step=12,
                                                            waiting=False)}
    verdict = judge(beats, limits, now=NOW, started_at=0, poll=6)
    assert verdict.record["rank"] == 1 and verdict.record["step"] == 19 and verdict.record["frozen"]
    first = verdict.message.splitlines()[0]
    assert "no progress for 1.0 min, after step 19 (the last step every rank completed); last heard in " \
        "_engine_run_backward (torch/autograd/graph.py:1) (its last beat, older than that step)" in first, first
    assert "stall.minutes=1" in verdict.record["limit"]


def test_a_slow_but_alive_rank_is_never_declared_stalled():
    """Stopped 40 s, running 3 s, again and again, with a 1-minute limit: each time it is read it looks frozen and
    its own beat is stale by more than the limit, but its peers moved 40 s ago (they can only move with it)."""
    limits = Limits(minutes=1, startup_minutes=60)
    for cycle in range(10):
        now = NOW + cycle * 43.0
        for offset in (0.5, 20.0, 39.5, 42.0):  # read at every point of the cycle, just after it resumed too
            t = now + offset
            slow = beat(1, moved=NOW - 200, alive=t - offset if offset < 40 else t, waiting=False)
            peers_moved = now if offset < 40 else now + 40.5
            beats = {0: beat(0, moved=peers_moved, alive=t), 1: slow}
            assert judge(beats, limits, now=t, started_at=0, poll=6) is None, (cycle, offset)


def test_a_rank_stuck_while_its_peers_still_move_in_a_longer_section_is_not_a_stall():
    """Rank 0 saves a checkpoint (save limit 60 min) while rank 1 waits in a barrier (training limit 1 min): the
    save moves within its limit, so nothing is stalled."""
    limits = Limits(minutes=1, startup_minutes=60)
    beats = {0: beat(0, moved=NOW - 300, kind="save", waiting=False), 1: beat(1, moved=NOW - 300)}
    assert judge(beats, limits, now=NOW, started_at=0, poll=6) is None


def test_the_watchdog_publishes_its_first_beat_at_once():
    board = LocalBoard()
    heart = stall.Heart()
    who = stall.Identity(rank=1, world=2, local_rank=0, host="algo-2", job="job-1")
    watchdog = stall.Watchdog(who, Limits(minutes=10), board=board, heart=heart, poll=30.0, exit=lambda code: None)
    watchdog.start()
    try:
        deadline = time.monotonic() + 5
        while board.get(f"{stall.KEY}beat/1") is None and time.monotonic() < deadline:
            time.sleep(0.02)
        published = board.get(f"{stall.KEY}beat/1")
    finally:
        watchdog.stop()
        watchdog.join(5)
    assert published is not None and json.loads(published)["host"] == "algo-2"
    assert not [t for t in threading.enumerate() if t is watchdog and t.is_alive()]


def test_the_layout_names_a_rank_that_never_published():
    who = stall.Identity(rank=0, world=4, hosts=("algo-1", "algo-2"), local_world=2)
    assert [who.layout(r) for r in range(4)] == [("algo-1", 0), ("algo-1", 1), ("algo-2", 0), ("algo-2", 1)]


def test_evaluation_and_save_limits_follow_their_measured_durations_with_a_factor_a_floor_and_a_prior():
    clock = [0.0]
    heart = stall.Heart(clock=lambda: clock[0])
    heart.mark("train", "train")
    limits = Limits(minutes=1, startup_minutes=60, section_factor=3, section_floor_minutes=0.5)
    assert limits.seconds("save", 0.1, heart.sections) == 3600  # the prior: nothing measured yet
    assert "the prior before its first measurement" in limits.describe("save", 0.1, heart.sections)
    clock[0] = 10.0
    heart.mark("checkpoint save of step 100", "save")
    clock[0] = 50.0  # a 40 s save
    heart.step_ends(101)
    assert heart.sections == {"save": 40.0}
    assert limits.seconds("save", 0.1, heart.sections) == 120  # 3 x 40 s
    assert limits.describe("save", 0.1, heart.sections) == ("stall.section: max(0.5 min, 3 x the longest save "
                                                             "measured 40 s)")
    heart.mark("evaluation", "eval")
    clock[0] = 55.0  # a 5 s evaluation: the floor
    heart.mark("train", "train")
    assert limits.seconds("eval", 0.1, heart.sections) == 30
    assert limits.seconds("startup", 0.1, heart.sections) == 3600  # start-up keeps its own limit
    # a save quiet for 100 s (under 3 x 40 s) is not a stall; at 121 s it is
    beats = {0: beat(0, moved=NOW - 100, kind="save", waiting=False), 1: beat(1, moved=NOW - 100)}
    for b in beats.values():
        b["sections"] = dict(heart.sections)
    assert judge(beats, limits, now=NOW, started_at=0, poll=6) is None
    for b in beats.values():
        b["alive_at"] = NOW + 21
    verdict = judge(beats, limits, now=NOW + 21, started_at=0, poll=6)
    assert verdict is not None and verdict.record["rank"] == 0 and "3 x the longest save" in verdict.record["limit"]
