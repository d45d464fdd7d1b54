"""The ledger of a job that recovered in place (lambda/goodput/recoveries.py): the failed generation's steps after
its last checkpoint are `replayed`, the time from the fault to the next generation's first step is `recovering`,
and every billed second is still in exactly one part."""

from __future__ import annotations

import json

import pytest
from testkit.goodput_lines import JOB, T, assert_adds_up, attempt_lines, describe, stream

from contract import recovery_line
from hfsm_lambda.goodput import ledger as goodput


def generation(lines: list[list], number: int) -> list[list]:
    out = []
    for moment, message in lines:
        if message.startswith("GOODPUT "):
            record = json.loads(message.removeprefix("GOODPUT "))
            message = "GOODPUT " + json.dumps({**record, "generation": number})
        out.append([moment, message])
    return out


def recovered_job(*, steps_after_fault: int = 30, recovery_seconds: float = 3.0):
    """Gen 0 trains 25 steps (checkpoints 10 and 20), is killed 0.4 s after step 25; gen 1 resumes from step 20
    `recovery_seconds` after the fault and runs to the end."""
    first = attempt_lines(t0=2, start_step=0, steps=25, saves=(10, 20), end=False)
    fault = first[-1][0] - T + 0.4
    # attempt_lines puts the first step 10.5 s after t0: gen 1's first step lands `recovery_seconds` after the fault
    second = generation(attempt_lines(t0=fault + recovery_seconds - 10.5, start_step=20, steps=steps_after_fault,
                                      saves=(40,)), 1)
    line = recovery_line.format_line({"generation": 1, "recovery": 1, "budget": 2, "cause": "signal", "rank": 1,
                                      "host": "algo-2", "step": 25, "fault_at": T + fault, "restart_at": T + fault + 0.2,
                                      "text": "rank 1 (algo-2) was killed by signal 9 (SIGKILL) after step 25"})
    done = second[-1][0] - T + 1
    lines = sorted([*first, [T + fault + 0.2, line], *second], key=lambda x: x[0])
    desc = describe([("Downloading", 0, 2), ("Training", 2, done), ("Uploading", done, done + 1),
                     ("Completed", done + 1, done + 1)], count=2)
    return goodput.ledger([desc], {JOB: [stream("1", lines)]}), fault


def test_the_fault_to_the_next_first_step_is_recovering_and_the_lost_steps_are_replayed():
    ledger, _fault = recovered_job()
    assert_adds_up(ledger)
    parts = ledger["parts"]  # instance-seconds: 2 instances
    assert parts["recovering"] == pytest.approx(2 * 3.0)
    assert parts["replayed"] == pytest.approx(2 * (5 + 0.4))  # steps 21-25 and the 0.4 s before the kill
    assert parts["productive"] == pytest.approx(2 * (20 + 30))  # steps 1-20 of gen 0, 21-50 of gen 1
    assert parts["startup"] == pytest.approx(2 * 10.5)  # the job's start-up only: gen 1's is in recovering
    assert parts["checkpointing"] == pytest.approx(2 * (2 + 2 + 2 + 0.5))  # 10, 20, 40 and the final write
    assert parts["unaccounted"] == pytest.approx(0, abs=2.0)  # whole-second rounding of the billed time
    assert ledger["details"]["recovering"] == pytest.approx({"recovery 1 (signal)": 2 * 3.0})


def test_a_slower_recovery_moves_seconds_from_nothing_else_but_recovering():
    fast, _ = recovered_job(recovery_seconds=3.0)
    slow, _ = recovered_job(recovery_seconds=13.0)
    assert slow["parts"]["recovering"] - fast["parts"]["recovering"] == pytest.approx(2 * 10.0)
    for part in ("productive", "replayed", "startup", "checkpointing"):
        assert slow["parts"][part] == pytest.approx(fast["parts"][part]), part


def test_a_log_without_recovery_lines_is_split_as_before():
    lines = attempt_lines(t0=2, start_step=0, steps=20, saves=(10, 20))
    done = lines[-1][0] - T + 1
    desc = describe([("Downloading", 0, 2), ("Training", 2, done), ("Uploading", done, done + 1),
                     ("Completed", done + 1, done + 1)], count=1)
    ledger = goodput.ledger([desc], {JOB: [stream("1", lines)]})
    assert ledger["parts"]["recovering"] == 0 and "recovering" not in ledger["details"]


def test_a_stall_in_the_start_up_recovered_in_place_is_stalled_then_recovering_not_start_up():
    """Gen 0 hung in a start-up phase before printing any GOODPUT line (its last progress 8 s into Training), was
    found stalled 30 s later and restarted in place; gen 1 trained to the end. The 30 s are `stalled`, the fault to
    gen 1's first step `recovering`, and only what came before the hang is `startup` (issue 34: the ledger said
    stalled 0, recovering 0 and put all of it in start-up)."""
    t0, hang, limit = 2.0, 10.0, 30.0
    fault = hang + limit
    second = generation(attempt_lines(t0=fault + 0.2 - 1, start_step=0, steps=20, saves=(10,)), 1)
    line = recovery_line.format_line({"generation": 1, "recovery": 1, "budget": 2, "cause": "stalled", "rank": 1,
                                      "host": "algo-2", "step": None, "fault_at": T + fault,
                                      "restart_at": T + fault + 0.2,
                                      "text": "stall watchdog: rank 1 (algo-2, local rank 0) made no progress for "
                                              "0.5 min in start-up phase layout (before step 1)"})
    done = second[-1][0] - T + 1
    lines = sorted([[T + fault + 0.2, line], *second], key=lambda x: x[0])
    desc = describe([("Downloading", 0, t0), ("Training", t0, done), ("Uploading", done, done + 1),
                     ("Completed", done + 1, done + 1)], count=2)
    stall = {"job": JOB, "last_progress_at": T + hang, "detected_at": T + fault, "rank": 1, "host": "algo-2",
             "step": None, "phase": "layout"}
    ledger = goodput.ledger([desc], {JOB: [stream("1", lines)]}, [stall])
    assert_adds_up(ledger)
    parts = ledger["parts"]
    assert parts["stalled"] == pytest.approx(2 * limit)
    assert parts["recovering"] == pytest.approx(2 * (0.2 + 10.5 - 1))  # the fault to gen 1's first step
    assert parts["startup"] == pytest.approx(2 * (hang - t0))  # Training's start to the hang
    assert parts["productive"] == pytest.approx(2 * 20)
    assert parts["unaccounted"] == pytest.approx(0, abs=2.0)
    assert ledger["details"]["recovering"] == pytest.approx({"recovery 1 (stalled)": 2 * 9.7})
    # the start-up's measured phases were gen 1's, which are the recovery's: none are claimed for the start-up
    assert sum(ledger["details"]["startup"].values()) == pytest.approx(parts["startup"])
    assert set(ledger["details"]["startup"]) <= {"launch", "other"}
