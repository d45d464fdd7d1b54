"""The stall watchdog (hftrain/stall/watchdog.py): the limits (auto follows the measured step time), which rank is named,
the failure file's first line, and the thread acting on a real stalled main thread; the injected faults'
grammar (hftrain/stall/injection.py)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest

from contract import heartbeat as heartbeat_file
from contract import stall_records
from hftrain.run.failure import failure_path
from hftrain.stall import injection as stall_injection
from hftrain.stall import watchdog as stall
from hftrain.stall.boards import LocalBoard
from hftrain.stall.limits import Limits, parse_minutes
from hftrain.stall.verdict import judge

NOW = 10_000.0


def beat(rank: int, *, moved: float, alive: float | None = None, step: int | None = 57, kind: str = "train",
         waiting: bool = True, frames: list[str] | None = None, median: float | None = 1.0, host: str = "algo-1",
         local_rank: int = 0, phase: str = "train") -> dict:
    return {"rank": rank, "host": host, "local_rank": local_rank, "pid": 100 + rank, "job": "job-1", "step": step,
            "phase": phase, "kind": kind, "where": "", "moved_at": moved, "alive_at": NOW if alive is None else alive,
            "median_step": median, "frames": frames or ["_engine_run_backward (torch/autograd/graph.py:1)"],
            "waiting": waiting, "hostname": "h"}


# --- limits ------------------------------------------------------------------------------------------------------
def test_auto_limit_is_twenty_median_steps_with_a_floor_and_startup_has_its_own():
    limits = Limits(minutes=None, startup_minutes=60, floor_minutes=10)
    assert limits.seconds("train", None) == 600 and limits.seconds("train", 12.0) == 600
    assert limits.seconds("train", 60.0) == 1200  # 20 x 60 s
    for kind in ("startup", "eval", "save", "final"):
        assert limits.seconds(kind, 60.0) == 3600
    assert Limits(minutes=12).seconds("train", 600.0) == 720  # a number is a fixed limit


def test_healthy_but_slower_steps_are_not_a_stall_while_a_fixed_limit_of_the_same_size_would_fire():
    """Every rank healthy, the step time grows 5x (1 s -> 5 s): `auto` (20 x the median) follows it."""
    clock_now = [0.0]
    heart = stall.Heart(clock=lambda: clock_now[0])
    for step in range(1, 21):  # 20 steps of 1 s, then 10 of 5 s
        clock_now[0] += 1.0
        heart.step_ends(step)
    for step in range(21, 31):
        clock_now[0] += 5.0
        heart.step_ends(step)
    assert heart.median_step() == pytest.approx(1.0)
    auto = Limits(minutes=None, floor_minutes=0.01)  # floor 0.6 s: the measured steps decide
    beats = {r: beat(r, moved=NOW - 4.9, median=heart.median_step()) for r in range(4)}  # mid-step: 4.9 s quiet
    assert judge(beats, auto, now=NOW, started_at=0, poll=1) is None
    fixed = Limits(minutes=4 / 60)  # a fixed 4 s would call the slower steps a stall
    assert judge(beats, fixed, now=NOW, started_at=0, poll=1) is not None
    beats = {r: beat(r, moved=NOW - 25, median=heart.median_step()) for r in range(4)}  # 25 s > 20 x 1 s
    assert judge(beats, auto, now=NOW, started_at=0, poll=1) is not None


def test_parse_minutes():
    assert parse_minutes("auto") == (True, None) and parse_minutes("0.1") == (True, 0.1)
    assert parse_minutes("off") == (False, None)
    for bad in ("-1", "soon", "nan0"):
        with pytest.raises(ValueError, match="stall_minutes: expected 'auto', 'off' or minutes > 0"):
            parse_minutes(bad)


# --- the verdict -------------------------------------------------------------------------------------------------
def test_the_rank_not_waiting_in_a_collective_is_named_with_host_step_and_function():
    limits = Limits(minutes=10)
    beats = {r: beat(r, moved=NOW - 700, host=f"algo-{r // 2 + 1}", local_rank=r % 2) for r in range(4)}
    beats[3].update(waiting=False, moved_at=NOW - 680,
                    frames=["_try_get_data (torch/utils/data/dataloader.py:1133)", "_next_data (x.py:2)"])
    verdict = judge(beats, limits, now=NOW, started_at=0, poll=10)
    first = verdict.message.splitlines()[0]
    assert first == ("stall watchdog: rank 3 (algo-2, local rank 1) made no progress for 11.3 min at step 57; last "
                     "in _try_get_data (torch/utils/data/dataloader.py:1133) <- _next_data (x.py:2)")
    assert verdict.record["rank"] == 3 and verdict.record["host"] == "algo-2"
    assert verdict.record["last_progress_at"] == NOW - 680 and verdict.record["detected_at"] == NOW
    assert "4 of 4 ranks without progress" in verdict.message and "stall.minutes=10" in verdict.message


def test_the_culprit_is_named_even_when_a_waiting_rank_crosses_the_limit_first():
    beats = {r: beat(r, moved=NOW - 601) for r in range(4)}
    beats[2].update(waiting=False, moved_at=NOW - 590, frames=["hang (hftrain/stall/injection.py:1)"])
    # rank 2 moved 590 s ago, within the 600 s limit: no verdict yet (progress means progress) ...
    assert judge(beats, Limits(minutes=10), now=NOW, started_at=0, poll=10) is None
    for b in beats.values():
        b["alive_at"] = NOW + 11
    # ... and once it is past its limit too, it is named (not the ranks that wait for it)
    verdict = judge(beats, Limits(minutes=10), now=NOW + 11, started_at=0, poll=10)
    assert verdict.record["rank"] == 2 and verdict.record["ranks"] == [2]


def test_a_frozen_rank_is_named_first_and_said_to_be_frozen():
    beats = {r: beat(r, moved=NOW - 700) for r in range(4)}
    beats[1].update(alive_at=NOW - 650, waiting=False)  # its watchdog stopped publishing too (SIGSTOP)
    beats[2].update(waiting=False)
    verdict = judge(beats, Limits(minutes=10), now=NOW, started_at=0, poll=10)
    assert verdict.record["rank"] == 1 and verdict.record["frozen"]
    assert "stopped responding (its process is frozen or SIGSTOPped" in verdict.message.splitlines()[0]


def test_a_rank_frozen_late_is_waited_for_then_named_even_if_it_moved_last():
    """A SIGSTOP that lands a moment after the rank's last step (CI: the others were named, the frozen rank was
    not): at the limit its watchdog has missed a few beats but is not yet clearly frozen, and it may even have
    moved last (it began the next step). The verdict waits, then names it."""
    limits = Limits(minutes=0.1)  # 6 s
    beats = {r: beat(r, moved=NOW - 6.1, waiting=True) for r in range(4)}
    beats[2].update(moved_at=NOW - 4.0, alive_at=NOW - 3.0)  # moved 2 s after the others, silent for 3 s
    assert judge(beats, limits, now=NOW, started_at=0, poll=0.6) is None  # late, not yet frozen: wait
    for b in beats.values():
        if b["rank"] != 2:
            b["alive_at"] = NOW + 2.5  # the others go on publishing
    verdict = judge(beats, limits, now=NOW + 2.5, started_at=0, poll=0.6)
    assert verdict.record["rank"] == 2 and verdict.record["frozen"] and verdict.record["ranks"] == [2]
    # a watchdog that only missed beats for good (never frozen past the wait) does not hold the verdict forever
    beats[2].update(alive_at=NOW + 10.0)
    for b in beats.values():
        b["alive_at"] = min(b["alive_at"], NOW + 10.0)
    beats[0]["alive_at"] = NOW + 20 - 2.0  # a healthy watchdog 2 s late, 20 s after the last step
    assert judge(beats, limits, now=NOW + 20, started_at=0, poll=0.6) is not None


def test_start_up_evaluation_and_saves_use_the_longer_limit_and_a_rank_that_never_reported_is_named():
    limits = Limits(minutes=1, startup_minutes=30)
    beats = {r: beat(r, moved=NOW - 20 * 60, kind="startup", step=None, phase="tokenize") for r in range(2)}
    assert judge(beats, limits, now=NOW, started_at=0, poll=10) is None
    beats = {0: beat(0, moved=NOW - 20 * 60, kind="eval", phase="evaluation")}
    assert judge(beats, limits, now=NOW, started_at=0, poll=10) is None
    beats = {0: beat(0, moved=NOW - 31 * 60, kind="startup", step=None, phase="layout", waiting=True), 1: None}
    verdict = judge(beats, limits, now=NOW, started_at=NOW - 31 * 60, poll=10)
    assert verdict.record["rank"] == 1 and "never reported" in verdict.message.splitlines()[0]
    beats = {0: beat(0, moved=NOW - 31 * 60, kind="startup", step=None, phase="layout", waiting=False,
                     frames=["hang (a.py:1)"])}
    verdict = judge(beats, limits, now=NOW, started_at=0, poll=10)
    assert "made no progress for 31.0 min in start-up phase layout (before step 1); last in hang (a.py:1)" in \
        verdict.message and "stall.startup_minutes=30, for startup" in verdict.message


# --- the thread on a real stalled main thread ---------------------------------------------------------------------
def test_the_watchdog_thread_dumps_stacks_writes_the_failure_and_the_record_then_exits(tmp_path, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path / "ml"))
    checkpoints = tmp_path / "checkpoints"
    checkpoints.mkdir()
    (checkpoints / stall_records.FILE_NAME).write_text(json.dumps({"stalls": [{"job": "earlier", "detected_at": 1}]}))
    heart = stall.Heart()
    heart.mark("train", "train")  # training from the first look on (the heartbeat file below says its limit)
    exits: list[int] = []
    done = threading.Event()

    def exit_(code: int) -> None:
        exits.append(code)
        done.set()

    who = stall.Identity(rank=0, world=1, local_rank=0, host="algo-1", job="job-1", checkpoint_dir=str(checkpoints))
    watchdog = stall.Watchdog(who, Limits(minutes=0.02), heart=heart, poll=0.1, exit=exit_, ack_seconds=1)
    watchdog.start()
    try:
        for step in range(1, 11):  # healthy: a step every 0.1 s, limit 1.2 s
            time.sleep(0.1)
            heart.step_ends(step)
        assert not exits
        started = time.monotonic()
        assert done.wait(10), "no stall detected"  # the main thread (this one) waits here: no progress
        detected_after = time.monotonic() - started
    finally:
        watchdog.stop()
    assert exits == [stall.EXIT_CODE] and 1.2 <= detected_after < 1.2 + 3
    first = failure_path().read_text().splitlines()[0]
    assert first.startswith("stall watchdog: rank 0 (algo-1, local rank 0) made no progress for 0.0 min at step 10; "
                            "last in test_the_watchdog_thread_dumps_stacks_writes_the_failure_and_the_record_then_exits")
    records = json.loads((checkpoints / stall_records.FILE_NAME).read_text())["stalls"]
    assert [r["job"] for r in records] == ["earlier", "job-1"] and records[1]["step"] == 10
    stacks = (checkpoints / stall_records.STACKS_DIR / "job-1" / "rank-0.txt").read_text()
    assert "test_stall_watchdog.py" in stacks and "stall/watchdog.py" in stacks  # this thread's and the watchdog's
    heartbeat = json.loads((checkpoints / heartbeat_file.FILE_NAME).read_text())
    assert heartbeat["job"] == "job-1" and heartbeat["limit_seconds"] == pytest.approx(1.2)


# --- the injected faults -----------------------------------------------------------------------------------------
def test_injection_grammar():
    assert stall_injection.parse("3@20") == stall_injection.Injection(3, 20, "sleep")
    assert stall_injection.parse("1@startup") == stall_injection.Injection(1, None, "startup")
    assert stall_injection.parse("2@7:sigstop").how == "sigstop"
    assert stall_injection.parse("0@5:loader").describe() == "the data loader of rank 0 blocks after step 5"
    assert stall_injection.parse("1@5:sigkill").how == "sigkill"
    assert stall_injection.parse("1@startup").phase == "layout"
    assert stall_injection.parse("1@startup:data_load") == stall_injection.Injection(1, None, "startup",
                                                                                     phase="data_load")
    assert stall_injection.parse("0@10:save").describe() == "rank 0 hangs inside the checkpoint save of step 10"
    assert stall_injection.parse("1@5:slow=20") == stall_injection.Injection(1, 5, "slow", 20.0)
    assert stall_injection.parse("1@20:straggle") == stall_injection.Injection(1, 20, "straggle", 2.0)
    assert stall_injection.parse("1@20:straggle=1.5").describe() == \
        "rank 1's own compute is 1.5x as slow from step 20 on"
    for bad in ("3", "x@1", "1@2:nap", "1@-2", "1@2:sigstop=5", "1@startup:nap", "1@2:straggle=1", "1@2:straggle=0.5"):
        with pytest.raises(ValueError, match="expected RANK@STEP, RANK@STEP:sigstop, RANK@STEP:loader, "):
            stall_injection.parse(bad)


def test_a_straggler_computes_its_factor_as_long_from_its_step_on(monkeypatch):
    slept: list[float] = []
    announced: list[str] = []
    monkeypatch.setattr(stall_injection.time, "sleep", slept.append)
    monkeypatch.setattr(stall_injection, "announce", announced.append)
    monkeypatch.setattr(stall_injection, "_announced", set())
    injection = stall_injection.Injection(1, 20, "straggle", 1.5)
    for step in (18, 19, 20, 20, 21):
        stall_injection.straggle(injection, step, 0.2)
    assert slept == pytest.approx([0.1, 0.1, 0.1]) and len(announced) == 1
    stall_injection.straggle(None, 30, 0.2)
    stall_injection.straggle(stall_injection.Injection(1, 20, "slow", 20.0), 30, 0.2)
    assert len(slept) == 3


def test_only_the_named_rank_gets_its_fault(monkeypatch):
    monkeypatch.setenv(stall_injection.ENV, "1@4")
    monkeypatch.setenv("RANK", "0")
    assert stall_injection.mine() is None
    monkeypatch.setenv("RANK", "1")
    assert stall_injection.mine() == stall_injection.Injection(1, 4, "sleep")


def test_the_hanging_collator_counts_from_the_resumed_step(monkeypatch):
    hung: list[str] = []
    monkeypatch.setattr(stall_injection, "hang", lambda what: hung.append(what))
    collate = stall_injection.HangingCollator(lambda rows: rows, stall_injection.Injection(3, 10, "loader"),
                                              start_step=6)
    for _ in range(4):  # the batches of steps 7-10
        collate([1])
    assert hung == []
    collate([1])  # step 11's batch
    assert hung and "blocks after step 10" in hung[0]


def test_local_mode_reads_the_same_grammar():
    from local_mode.sagemaker.stall_faults import SOURCE, describe_stall

    assert Path(stall_injection.__file__).resolve() == SOURCE
    assert describe_stall("2@7:sigstop") == "rank 2's process is SIGSTOPped after step 7"


def test_without_the_store_a_rank_judges_itself_only(monkeypatch):
    """torchrun's store unreachable (or a launcher without one): the other ranks' missing heartbeats are not taken
    for ranks that never reported."""
    monkeypatch.setenv("WORLD_SIZE", "4")
    monkeypatch.delenv("MASTER_ADDR", raising=False)
    heart = stall.Heart()
    heart.mark("train", "train")
    exits: list[int] = []
    who = stall.Identity(rank=0, world=4, local_rank=0, host="algo-1", job="job-1")
    limits = Limits(minutes=0.01, startup_minutes=0.01)  # 0.6 s
    watchdog = stall.Watchdog(who, limits, heart=heart, poll=0.05, exit=exits.append, ack_seconds=0.1)
    watchdog.start()
    try:
        for step in range(1, 31):  # 1.5 s of healthy steps
            time.sleep(0.05)
            heart.step_ends(step)
    finally:
        watchdog.stop()
        watchdog.join(5)
    assert isinstance(watchdog.board, LocalBoard) and watchdog.ranks == [0] and exits == []


def test_a_run_that_fails_leaves_no_watchdog_behind(tiny_models, tmp_path, run_inprocess):
    """In-process runs (these tests) go on after a failed run: its watchdog thread must not (it would end the
    process later)."""
    from testkit.training import layout_job

    from local_mode import synthetic as synth

    base = layout_job(tmp_path, train=synth.cls_examples(12, 1))
    run = run_inprocess(base, {"task": "text-classification", "model_name_or_path": tiny_models["bert"],
                               "label_column": "sentiment", "max_steps": 2, "stall_minutes": "0.01"})
    assert run.returncode == 2
    time.sleep(0.3)
    assert not [t for t in threading.enumerate() if t.name == "stall-watchdog" and t.is_alive()]
