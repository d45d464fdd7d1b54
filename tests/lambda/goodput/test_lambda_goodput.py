"""The goodput ledger (lambda/goodput/ledger.py) on hand-made evidence: status transitions, the leader's log lines."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from testkit.goodput_lines import JOB, STARTUP, T, assert_adds_up, attempt_lines, describe, report, stream

from hfsm_lambda.goodput import ledger as goodput
from hfsm_lambda.goodput.attempts import attempts_of
from hfsm_lambda.goodput.text import interruption_line, summary_lines


def test_a_run_without_interruption_splits_every_billed_second():
    # Starting 5 (unbilled) | Downloading 3 | Training: 10.5 start-up, 20 steps, 2 saves of 2 s, exit | Uploading 2
    lines = attempt_lines(t0=8, start_step=0, steps=20, saves=(10, 20))
    end_of_training = lines[-1][0] - T + 1.5  # 1.5 s of process exit after the last report
    desc = describe([("Starting", 0, 5), ("Downloading", 5, 8), ("Training", 8, end_of_training),
                     ("Uploading", end_of_training, end_of_training + 2),
                     ("Completed", end_of_training + 2, end_of_training + 2)])
    ledger = goodput.ledger([desc], {JOB: [stream("1", lines)]})
    assert_adds_up(ledger)
    parts = ledger["parts"]  # instance-seconds: 2 instances
    assert parts["downloading"] == pytest.approx(2 * 3)
    assert parts["startup"] == pytest.approx(2 * 10.5)
    assert parts["productive"] == pytest.approx(2 * 20)
    assert parts["checkpointing"] == pytest.approx(2 * (4 + 0.5))  # two saves and the final model write
    assert parts["uploading"] == pytest.approx(2 * (1.5 + 2))  # the exit after the model write, then the upload
    assert parts["replayed"] == parts["stalled"] == 0
    # the reference is what SageMaker bills (whole seconds): the rounding is unaccounted, and said so
    assert ledger["billed_seconds"] == ledger["reported_billed_seconds"] == 2 * desc["TrainingTimeInSeconds"]
    gap = ledger["reported_billed_seconds"] - ledger["transitions_billed_seconds"]
    assert 0 <= gap < 2 * 1 and parts["unaccounted"] == pytest.approx(gap)
    assert ledger["details"]["unaccounted"]["reported_vs_transitions"] == pytest.approx(gap)
    assert ledger["waiting_seconds"] == pytest.approx(5)
    assert ledger["ratio"] == pytest.approx(40 / ledger["billed_seconds"], abs=1e-4)
    startup = ledger["details"]["startup"]
    assert startup["launch"] == pytest.approx(2 * 1) and startup["tokenize"] == pytest.approx(2 * 2)
    assert startup["other"] == pytest.approx(0, abs=1e-6)
    assert ledger["interruptions"] == [] and ledger["attempts"][0]["step_seconds"] == pytest.approx(1.0)


def test_an_abrupt_interruption_before_the_first_checkpoint_loses_its_steps_and_says_so():
    first = attempt_lines(t0=2, start_step=0, steps=13, end=False)  # killed 0.4 s after step 13
    kill = first[-1][0] - T + 0.4
    second = attempt_lines(t0=kill + 6, start_step=0, steps=30, saves=(20,))
    done = second[-1][0] - T + 1
    desc = describe([("Starting", 0, 1), ("Downloading", 1, 2), ("Training", 2, kill), ("Interrupted", kill, kill + 4),
                     ("Starting", kill + 4, kill + 5), ("Downloading", kill + 5, kill + 6), ("Training", kill + 6, done),
                     ("Uploading", done, done + 1), ("Completed", done + 1, done + 1)])
    ledger = goodput.ledger([desc], {JOB: [stream("1", first), stream("2", second)]})
    assert_adds_up(ledger)
    lost, kept = ledger["attempts"]
    assert lost["parts"]["replayed"] == pytest.approx(2 * (13 + 0.4))
    assert lost["details"]["replayed"] == pytest.approx({"lost_steps": 2 * 13, "after_last_step": 2 * 0.4})
    assert ledger["details"]["replayed"] == lost["details"]["replayed"]
    assert ledger["details"]["uploading"] == kept["details"]["uploading"]
    assert lost["parts"]["productive"] == 0 and kept["parts"]["productive"] == pytest.approx(2 * 30)
    (record,) = ledger["interruptions"]
    assert record["step_reached"] == 13 and record["resumed_from_step"] == 0 and record["lost_steps"] == 13
    assert record["how"] == "spot interruption" and record["unknown"] is None
    assert record["restart_seconds"] == pytest.approx(1 + 10.5)  # download and start-up again
    assert "step 13 reached, restarted from scratch (step 0)" in interruption_line(record)
    assert ledger["waiting_seconds"] == pytest.approx(1 + 4 + 1)


def _one_interruption_1s_apart(first: list, kill: float, second: list) -> dict:
    """The ledger of one instance: `first` killed at `kill`, 1 s Interrupted, 1 s Downloading, then `second` to
    its end, 1 s Uploading."""
    done = second[-1][0] - T + 1
    desc = describe([("Downloading", 0, 2), ("Training", 2, kill), ("Interrupted", kill, kill + 1),
                     ("Downloading", kill + 1, kill + 2), ("Training", kill + 2, done),
                     ("Uploading", done, done + 1), ("Completed", done + 1, done + 1)], count=1)
    return goodput.ledger([desc], {JOB: [stream("1", first), stream("2", second)]})


def test_a_kill_during_a_save_counts_the_save_and_keeps_what_the_older_checkpoint_holds():
    # attempt 1 saves step 10, is killed while saving step 20; attempt 2 resumes from 10
    first = attempt_lines(t0=2, start_step=0, steps=20, saves=(10,), end=False, killed_in_save=20)
    kill = first[-1][0] - T + 0.7
    second = attempt_lines(t0=kill + 2, start_step=10, steps=20)
    ledger = _one_interruption_1s_apart(first, kill, second)
    assert_adds_up(ledger)
    lost = ledger["attempts"][0]
    assert lost["parts"]["checkpointing"] == pytest.approx(2 + 0.7)  # step 10's save and the one killed
    assert lost["parts"]["productive"] == pytest.approx(10) and lost["parts"]["replayed"] == pytest.approx(10)
    (record,) = ledger["interruptions"]
    assert record["during_save"] and record["step_reached"] == 20 and record["resumed_from_step"] == 10
    assert "(during a checkpoint save)" in interruption_line(record)


def test_the_step_reached_is_unknown_when_the_lost_attempt_left_no_log():
    second = attempt_lines(t0=40, start_step=0, steps=5)
    done = second[-1][0] - T + 1
    desc = describe([("Downloading", 0, 2), ("Training", 2, 30), ("Interrupted", 30, 38),
                     ("Downloading", 38, 40), ("Training", 40, done), ("Completed", done, done)])
    ledger = goodput.ledger([desc], {JOB: [stream("2", second)]})
    assert_adds_up(ledger)
    (record,) = ledger["interruptions"]
    assert record["step_reached"] is None and record["lost_steps"] is None and record["lost_minutes"] is None
    assert "no algo-1 log stream" in record["unknown"]
    assert "step reached unknown" in interruption_line(record)
    lost = ledger["attempts"][0]
    assert lost["parts"]["unaccounted"] == pytest.approx(2 * 28)  # its Training could not be split
    assert any("not split" in note for note in ledger["notes"])


def test_output_lost_after_sigterm_is_reconciled_with_the_checkpoint_the_next_attempt_resumed_from():
    first = attempt_lines(t0=2, start_step=0, steps=10, end=False)  # its log ends at 10; it saved 11 on SIGTERM
    kill = first[-1][0] - T + 3
    second = attempt_lines(t0=kill + 2, start_step=11, steps=19)
    done = second[-1][0] - T + 1
    desc = describe([("Downloading", 0, 2), ("Training", 2, kill), ("Interrupted", kill, kill + 1),
                     ("Downloading", kill + 1, kill + 2), ("Training", kill + 2, done), ("Completed", done, done)])
    (record,) = goodput.ledger([desc], {JOB: [stream("1", first), stream("2", second)]})["interruptions"]
    assert record["step_logged"] == 10 and record["step_reached"] == 11 and record["lost_steps"] == 0
    assert "checkpoint-11" in record["step_reached_from"]


def test_a_stall_record_fills_stalled_from_the_last_progress_to_the_end_of_training():
    first = attempt_lines(t0=2, start_step=0, steps=10, end=False)
    last_progress = first[-1][0]
    kill = last_progress - T + 300  # silent for 5 minutes, then stopped by a watchdog
    second = attempt_lines(t0=kill + 2, start_step=0, steps=10)
    done = second[-1][0] - T + 1
    desc = describe([("Downloading", 0, 2), ("Training", 2, kill), ("Interrupted", kill, kill + 1),
                     ("Downloading", kill + 1, kill + 2), ("Training", kill + 2, done), ("Completed", done, done)],
                    count=1)
    stall = {"job": JOB, "last_progress_at": datetime.fromtimestamp(last_progress, UTC).isoformat(),
             "detected_at": T + kill - 10, "rank": 3}
    without = goodput.ledger([desc], {JOB: [stream("1", first), stream("2", second)]})
    ledger = goodput.ledger([desc], {JOB: [stream("1", first), stream("2", second)]}, [stall])
    assert_adds_up(ledger)
    assert without["parts"]["stalled"] == 0 and without["attempts"][0]["parts"]["replayed"] == pytest.approx(310)
    stalled = ledger["attempts"][0]["parts"]
    assert stalled["stalled"] == pytest.approx(300) and stalled["replayed"] == pytest.approx(10)
    # the interruption says what ended the attempt (it said "Failed of <job>" for a stalled job)
    assert without["interruptions"][0]["how"] == "spot interruption"
    assert interruption_line(ledger["interruptions"][0]).startswith(f"stall of {JOB}: step 10 reached")


def test_attempts_follow_the_status_transitions_and_unknown_statuses_are_billed():
    desc = describe([("Starting", 0, 10), ("Downloading", 10, 12), ("PreparingTrainingStack", 12, 13),
                     ("SomethingNew", 13, 14), ("Training", 14, 20), ("Interrupted", 20, 25), ("Starting", 25, 40),
                     ("Training", 40, 50), ("MaxWaitTimeExceeded", 50, 50)], status="Stopped")
    attempts, waiting_after = attempts_of(desc, now=T + 60)
    assert [(a.restart, round(a.billed_wall, 3), a.waiting_before, a.ended) for a in attempts] == [
        (0, 9.0, 11.0, "Interrupted"), (1, 10.0, 20.0, "MaxWaitTimeExceeded")]
    assert attempts[0].window("downloading") == pytest.approx(3.0) and waiting_after == 0
    # no capacity after the interruption: the job ends waiting
    desc = describe([("Starting", 0, 10), ("Training", 10, 20), ("Interrupted", 20, 25), ("Starting", 25, 45),
                     ("MaxWaitTimeExceeded", 45, 45)], status="Stopped")
    attempts, waiting_after = attempts_of(desc, now=T + 60)
    assert len(attempts) == 1 and attempts[0].ended == "Interrupted, then MaxWaitTimeExceeded" and \
        waiting_after == 25


def test_a_running_job_is_billed_up_to_now():
    desc = describe([("Starting", 0, 5), ("Downloading", 5, 8), ("Training", 8, 8)], status="InProgress")
    desc["SecondaryStatusTransitions"][-1].pop("EndTime")
    desc.pop("TrainingEndTime")
    (attempt,), _ = attempts_of(desc, now=T + 20)
    assert attempt.billed_wall == pytest.approx(15) and attempt.ended == "running"


def test_summary_lines_show_the_goodput_and_every_part_productive_first():
    lines = attempt_lines(t0=2, start_step=0, steps=100, saves=(50, 100))
    done = lines[-1][0] - T + 1
    desc = describe([("Downloading", 0, 2), ("Training", 2, done), ("Uploading", done, done + 1),
                     ("Completed", done + 1, done + 1)], count=1)
    text = summary_lines(goodput.ledger([desc], {JOB: [stream("1", lines)]}))
    assert text[0].startswith("Goodput: ") and "was productive training (1 attempt(s)" in text[0]
    shown = [line.split()[0] for line in text[1:]]
    # every part over 1% on its own line (productive first), the rest named in `other`
    assert shown == ["productive", "downloading", "startup", "checkpointing", "uploading", "unaccounted", "other"]
    assert "tokenize 2 s" in text[3] and "launch 1 s" in text[3]
    assert "(replayed 0 s, evaluation 0 s, stalled 0 s, recovering 0 s)" in text[-1]
    assert summary_lines({"format": 1, "error": "x"}) == []


def test_a_background_save_in_flight_is_no_loss_when_the_next_attempt_resumed_from_where_this_one_stopped():
    """A CI run of test_local_mode: SIGTERM (a spot notice) while the background write of checkpoint-10 was in
    flight; the SIGTERM save of step 11 completed but its lines were lost with the process relaying them (the log
    ends at step 10's write_begin), and the next attempt resumed from 11. Nothing was lost: the record must not say
    "during a checkpoint save", and the replay's schedule is a notice, not a save lost in flight."""
    from benchmarks.goodput_sim.replay import NOTICE, schedule_from_ledger

    first = attempt_lines(t0=2, start_step=0, steps=10, end=False)
    at = first[-1][0] - T  # step 10: its checkpoint is written behind the loop
    first.append(report("write_begin", at, first_step_at=T + 12.5, step=10, steps=10, step_seconds=10.0,
                        eval_seconds=0.0, save_seconds=0.1, script_started_at=T + 3, start_step=0, startup=STARTUP))
    kill = at + 3  # step 11, its SIGTERM save and the exit: not in the log
    second = attempt_lines(t0=kill + 2, start_step=11, steps=9)
    ledger = _one_interruption_1s_apart(first, kill, second)
    assert_adds_up(ledger)
    (record,) = ledger["interruptions"]
    assert record["step_logged"] == 10 and record["step_reached"] == 11 == record["resumed_from_step"]
    assert record["lost_steps"] == 0 and not record["during_save"], record
    assert "(during a checkpoint save)" not in interruption_line(record)
    assert [e.kind for e in schedule_from_ledger(ledger)] == [NOTICE]
