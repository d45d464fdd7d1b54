"""Stalls in the pipeline: the spec's `stall` and `network` blocks (Prepare), what the job request carries, a
stall as its own retryable outcome (stall.action fail ends the run), the exhausted-attempts message, and the
watch from outside the job in CheckJob (stall_watch.py), against moto."""

from __future__ import annotations

import dataclasses
import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from testkit.lambdas import (
    MINIMAL,
    SPEC,
    problems_of,
    settings_dict,
    start_watched_job,
    strict_json,
    training,
)

from hfsm_lambda import aws, handlers
from hfsm_lambda.errors import FallbackExhaustedError, SpecError
from hfsm_lambda.plan import run as planned
from hfsm_lambda.runs import outcomes
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.settings import Settings
from hfsm_lambda.spec import run_spec
from hfsm_lambda.watch import stalls as stall_watch

T0 = datetime(2025, 6, 1, 12, 0, tzinfo=UTC)
STALL_REASON = ("AlgorithmError: stall watchdog: rank 3 (algo-2, local rank 1) made no progress for 12.0 min at step "
                "57; last in _try_get_data (torch/utils/data/dataloader.py:1133)\n(seen by rank 0 on algo-1)")


# --- the spec ----------------------------------------------------------------------------------------------------
def test_stall_defaults_and_fractions_of_minutes(settings):
    spec = run_spec.parse_spec(MINIMAL, settings)
    assert spec["stall"] == {"minutes": "auto", "startup_minutes": "auto", "stragglers": "warn",
                             "straggler_minutes": 5, "action": "retry"}
    assert spec["network"] == {"require_efa": True}
    spec = run_spec.parse_spec({**MINIMAL, "stall": {"minutes": 0.1, "startup_minutes": 0.5, "action": "fail"}},
                               settings)
    assert spec["stall"] == {"minutes": 0.1, "startup_minutes": 0.5, "stragglers": "warn", "straggler_minutes": 5,
                             "action": "fail"}


def test_bad_stall_values_are_named_with_what_to_fix(settings):
    problems = problems_of({**MINIMAL, "stall": {"minutes": "soon", "startup_minutes": 0, "action": "restart"},
                            "network": {"require_efa": "yes"}}, settings)
    text = "\n".join(problems)
    assert 'stall.minutes: expected "auto" or a number from 0.05 to 10080' in text and "'soon'" in text
    assert 'stall.startup_minutes: expected "auto" or a number from 0.05 to 10080' in text
    assert "stall.action" in text and "retry" in text and "restart" in text
    assert "network.require_efa" in text
    # 900 s: the shortest limit the runtime floor accepts with the default checkpoint interval (runtime_limits.py)
    problems = problems_of({**MINIMAL, "max_runtime_seconds": 900, "stall": {"minutes": 15}}, settings)
    assert any(p.startswith("stall.minutes: 15 minutes is not shorter than max_runtime_seconds=900") for p in problems)
    assert run_spec.parse_spec({**MINIMAL, "max_runtime_seconds": 900, "stall": {"minutes": 10, "action": "off",
                                                                                 "startup_minutes": 5}}, settings)


def test_the_request_carries_the_limits_and_the_efa_opt_out(settings):
    request = training(settings, stall={"minutes": 0.5, "startup_minutes": 20})
    hps = request["HyperParameters"]
    assert json.loads(hps["stall_minutes"]) == "0.5" and json.loads(hps["stall_startup_minutes"]) == 20
    assert "stall_straggler_minutes" not in hps  # the default window (5 min) is the training code's own
    # the derived start-up limit (auto, the default) is the training code's own default: not sent
    assert "stall_startup_minutes" not in training(settings, stall={"minutes": 0.5})["HyperParameters"]
    hps = training(settings, stall={"straggler_minutes": 0.5, "stragglers": "warn"})["HyperParameters"]
    assert json.loads(hps["stall_straggler_minutes"]) == 0.5
    problems = problems_of({**MINIMAL, "stall": {"straggler_minutes": 0}}, settings)
    assert any(p.startswith("stall.straggler_minutes: expected a number from 0.1 to 1440") for p in problems), problems
    assert json.loads(training(settings)["HyperParameters"]["stall_minutes"]) == "auto"
    assert json.loads(training(settings, stall={"action": "off"})["HyperParameters"]["stall_minutes"]) == "off"
    env = training(settings)["Environment"]  # ml.p4d.24xlarge: EFA
    assert env["HFTRAIN_EXPECT_EFA"] == "1" and env["HFTRAIN_REQUIRE_EFA"] == "1"
    assert training(settings, network={"require_efa": False})["Environment"]["HFTRAIN_REQUIRE_EFA"] == "0"


def test_stall_hyperparameters_are_the_pipelines(settings):
    problems = problems_of({**MINIMAL, "hyperparameters": {"stall_minutes": "5"}}, settings)
    assert any("stall_minutes" in p and "stall.minutes" in p for p in problems)


# --- the outcome ---------------------------------------------------------------------------------------------------
def _desc(status: str, reason: str | None) -> dict[str, Any]:
    return {"TrainingJobName": "job-1", "TrainingJobStatus": status, "SecondaryStatus": status,
            **({"FailureReason": reason} if reason else {})}


def test_a_stall_is_its_own_retryable_outcome_and_other_failures_are_not():
    status = outcomes.classify("training", _desc("Failed", STALL_REASON))
    assert status["state"] == "retryable" and status["outcome"] == "stall"
    # the script's own exception is retried once (runs/actions.py), not as a stall; a settings error is not
    failed = outcomes.classify("training", _desc("Failed", "AlgorithmError: ExecuteUserScriptError: ExitCode 1"))
    assert failed["state"] == "retryable" and failed["outcome"] is None and failed["cause"] == "exception"
    failed = outcomes.classify("training", _desc("Failed", "AlgorithmError: ExecuteUserScriptError: ExitCode 2"))
    assert failed["state"] == "failed" and failed["cause"] == "configuration"


def test_attempts_used_up_by_stalls_say_so():
    run = dataclasses.replace(prepare_run(SPEC, Settings.from_dict(settings_dict())), run_id="r1", max_attempts=2,
                              attempts=tuple(planned.Attempt(attempt=i, job_name=f"job-{i}",
                                                             instance_type="ml.g5.2xlarge", instance_count=2,
                                                             spot=True) for i in range(2)))
    status = outcomes.classify("training", _desc("Failed", STALL_REASON))
    assert outcomes.next_attempt(run, 0, status) == 1
    with pytest.raises(FallbackExhaustedError) as exhausted:
        outcomes.next_attempt(run, 1, status)
    assert "job job-1 stalled (AlgorithmError: stall watchdog: rank 3 (algo-2, local rank 1)" in str(exhausted.value)
    assert "raise fallback.max_attempts" in str(exhausted.value)


# --- the outside watch (pure) -----------------------------------------------------------------------------------------
STALL = {"minutes": "auto", "startup_minutes": 30, "action": "retry"}


@pytest.mark.parametrize(("measured", "limit_minutes"), [(None, 30), (100.0, 10), (800.0, 40)])
def test_outside_watch_before_the_first_heartbeat_applies_the_derived_start_up_limit(measured, limit_minutes):
    """stall.startup_minutes auto: the prior (30 min) before any attempt measured a start-up, else 3 x the
    longest measured (800 s -> 40 min), at least 10 min; the margin (5 min) on top; the reason names the rule."""
    auto = {**STALL, "startup_minutes": "auto"}
    before = T0 + timedelta(minutes=limit_minutes + 5, seconds=-10)
    report, stop = stall_watch.watch(None, None, job_name="job-1", now=before, since=T0, stall=auto,
                                     measured_startup=measured)
    assert not stop and report["threshold_minutes"] == limit_minutes + 5
    report, stop = stall_watch.watch(None, None, job_name="job-1", now=before + timedelta(seconds=20), since=T0,
                                     stall=auto, measured_startup=measured)
    assert stop and "before its first heartbeat (start-up; stall.startup_minutes=auto" in report["stop_reason"]
    assert ("the prior" in report["stop_reason"]) == (measured is None)
    # a number in the spec is used as given, whatever was measured
    assert not stall_watch.watch(None, None, job_name="job-1", now=T0 + timedelta(minutes=34), since=T0,
                                 stall=STALL, measured_startup=10_000.0)[1]


def test_the_measured_start_ups_are_read_from_the_progress_file():
    class S3:
        def __init__(self, body):
            self.body = body

        def get_object(self, Bucket, Key, **_):  # noqa: N803 - boto3's names
            assert (Bucket, Key) == ("b", "runs/r1/checkpoints/_progress.json")
            return {"Body": io.BytesIO(self.body), "ContentLength": len(self.body)}

    body = json.dumps({"step": 3, "startup_seconds": [50.0, 410.5]}).encode()
    assert stall_watch.read_measured_startup(S3(body), "s3://b/runs/r1/checkpoints") == 410.5
    assert stall_watch.read_measured_startup(S3(b'{"step": 3}'), "s3://b/runs/r1/checkpoints") is None
    assert stall_watch.read_measured_startup(S3(b"not json"), "s3://b/runs/r1/checkpoints") is None


def test_outside_watch_counts_from_the_last_progress_or_the_training_start():
    hb = {"job": "job-1", "step": 40, "phase": "train", "kind": "train", "moved_at": (T0 + timedelta(minutes=5)
                                                                                      ).timestamp(),
          "at": (T0 + timedelta(minutes=6)).timestamp(), "limit_seconds": 600}
    report, stop = stall_watch.watch(None, hb, job_name="job-1", now=T0 + timedelta(minutes=19), since=T0,
                                     stall=STALL)
    assert not stop and report["quiet_minutes"] == 14 and report["threshold_minutes"] == 15
    report, stop = stall_watch.watch(report, hb, job_name="job-1", now=T0 + timedelta(minutes=21), since=T0,
                                     stall=STALL)
    assert stop and report["stop_reason"].startswith(
        "stall watchdog: (from outside the job, CheckJob) job job-1 made no progress for 16.0 min at step 40")
    _, again = stall_watch.watch(report, hb, job_name="job-1", now=T0 + timedelta(minutes=30), since=T0, stall=STALL)
    assert not again, "one stop"
    other = {**hb, "job": "job-0"}  # an earlier attempt's heartbeat: this job has not reported yet (start-up limit)
    assert not stall_watch.watch(None, other, job_name="job-1", now=T0 + timedelta(minutes=34), since=T0,
                                 stall=STALL)[1]
    assert stall_watch.watch(None, other, job_name="job-1", now=T0 + timedelta(minutes=36), since=T0, stall=STALL)[1]
    restarted = T0 + timedelta(minutes=10)  # a spot restart: the heartbeat is the lost instances'
    assert not stall_watch.watch(None, hb, job_name="job-1", now=restarted + timedelta(minutes=34), since=restarted,
                                 stall=STALL)[1]
    assert not stall_watch.watch(None, None, job_name="job-1", now=T0 + timedelta(days=1), since=None, stall=STALL)[1]
    assert not stall_watch.watch(None, None, job_name="job-1", now=T0 + timedelta(days=1), since=T0,
                                 stall={**STALL, "action": "off"})[1]


# --- CheckJob against moto ---------------------------------------------------------------------------------------------
@pytest.fixture
def running(aws_account, put_data, context, monkeypatch):
    return start_watched_job({**SPEC, "stall": {"minutes": 2, "startup_minutes": 10}}, put_data, context, monkeypatch)


def _heartbeat(run: dict, job: dict, step: int, moved: datetime, limit: float = 120) -> None:
    bucket, _, prefix = run["uris"]["checkpoint"].removeprefix("s3://").partition("/")
    body = {"job": job["job_name"], "step": step, "phase": "train", "kind": "train", "moved_at": moved.timestamp(),
            "at": moved.timestamp(), "limit_seconds": limit}
    aws.client("s3").put_object(Bucket=bucket, Key=prefix.rstrip("/") + "/_heartbeat.json",
                                Body=json.dumps(body).encode())


def test_check_job_stops_a_job_whose_progress_stopped_while_it_says_training(running, context):
    run, job, fake, clock, stops = running
    assert job["stall"] == {"minutes": 2, "startup_minutes": 10, "action": "retry"}
    status: dict[str, Any] = {"state": "running"}
    for minute, step in ((3, 10), (6, 20)):  # progress: the heartbeat moves
        _heartbeat(run, job, step, T0 + timedelta(minutes=minute))
        clock["now"] = T0 + timedelta(minutes=minute + 1)
        status = strict_json(handlers.check_job({"job": job, "previous": status}, context))
        assert status["state"] == "running" and status["stall_watch"]["step"] == step and stops == []
    clock["now"] = T0 + timedelta(minutes=12, seconds=30)  # 6.5 min without progress: limit 2 + 5 min margin
    status = strict_json(handlers.check_job({"job": job, "previous": status}, context))
    assert stops == [] and status["stall_watch"]["quiet_minutes"] == 6.5
    clock["now"] = T0 + timedelta(minutes=13, seconds=30)
    status = strict_json(handlers.check_job({"job": job, "previous": status}, context))
    assert stops == [job["job_name"]] and status["state"] == "running"  # Stopping
    fake.training_job_status, fake.secondary_status = "Stopped", "Stopped"
    status = strict_json(handlers.check_job({"job": job, "previous": status}, context))
    assert status["state"] == "retryable" and status["outcome"] == "stall" and stops == [job["job_name"]]
    assert "made no progress for 7.5 min at step 20" in status["failure_reason"]
    assert "resumes from the last durable checkpoint" in status["failure_reason"]
    assert handlers.plan_fallback({"run": run, "attempt": 0, "status": status}, context) == 1
    # the reason is kept where the ledger (`stalled`) and the summary read stalls: the records beside the checkpoints
    bucket, _, prefix = run["uris"]["checkpoint"].removeprefix("s3://").partition("/")
    body = aws.client("s3").get_object(Bucket=bucket, Key=prefix.rstrip("/") + "/_stalls.json")["Body"].read()
    record = json.loads(body)["stalls"][-1]
    assert record["job"] == job["job_name"] and record["outside"] and record["step"] == 20
    assert record["last_progress_at"] == (T0 + timedelta(minutes=6)).timestamp()
    assert record["reason"] == status["failure_reason"] and "record" not in status["stall_watch"]


def test_stall_action_fail_ends_the_run_and_a_job_without_heartbeat_gets_the_start_up_limit(running, context,
                                                                                           monkeypatch):
    run, job, fake, clock, stops = running
    clock["now"] = T0 + timedelta(minutes=14)  # no heartbeat: start-up limit 10 + 5 min
    status = strict_json(handlers.check_job({"job": job, "previous": {"state": "running"}}, context))
    assert stops == [] and "before its first heartbeat" not in json.dumps(status)
    fake.training_job_status, fake.secondary_status = "Failed", "Failed"
    fake.failure_reason = STALL_REASON
    status = strict_json(handlers.check_job({"job": job, "previous": status}, context))
    assert status["state"] == "retryable" and status["outcome"] == "stall"
    failing = {**job, "stall": {**job["stall"], "action": "fail"}}
    status = strict_json(handlers.check_job({"job": failing, "previous": status}, context))
    assert status["state"] == "failed" and status["outcome"] == "stall"
    assert "rank 3 (algo-2, local rank 1)" in status["failure_reason"]


def test_a_job_never_heard_of_is_stopped_after_the_start_up_limit(running, context):
    run, job, fake, clock, stops = running
    clock["now"] = T0 + timedelta(minutes=16)
    status = strict_json(handlers.check_job({"job": job, "previous": {"state": "running"}}, context))
    assert stops == [job["job_name"]]
    assert "before its first heartbeat (start-up; stall.startup_minutes=10)" in status["stall_watch"]["stop_reason"]


@pytest.mark.parametrize("phase", ["Downloading", "DownloadingTrainingImage"])
def test_a_job_stuck_before_train_py_is_stopped_and_named_from_its_secondary_status(running, context, phase):
    """The image pull and the data download are billed but run before train.py (no watchdog, no heartbeat): the
    outside watch times the phase from its SecondaryStatusTransitions start, with the start-up limit + margin, and
    the reason names the phase and the limit. Starting (the wait for instances, not billed) is left alone."""
    run, job, fake, clock, stops = running
    fake.secondary_status = phase
    fake.secondary_status_transitions = [{"Status": "Starting", "StartTime": T0 - timedelta(minutes=5)},
                                         {"Status": phase, "StartTime": T0}]
    clock["now"] = T0 + timedelta(minutes=14)  # 10 min + 5 min margin not yet spent
    status = strict_json(handlers.check_job({"job": job, "previous": {"state": "running"}}, context))
    assert stops == [] and status["stall_watch"]["watching"] and status["stall_watch"]["threshold_minutes"] == 15
    clock["now"] = T0 + timedelta(minutes=16)
    status = strict_json(handlers.check_job({"job": job, "previous": status}, context))
    assert stops == [job["job_name"]]
    reason = status["stall_watch"]["stop_reason"]
    assert f"made no progress for 16.0 min in {phase} (before train.py starts; stall.startup_minutes=10), while it " \
        f"says {phase} (limit 10.0 min + 5 min margin)" in reason
    fake.secondary_status = "Starting"
    fake.secondary_status_transitions = [{"Status": "Starting", "StartTime": T0}]
    stops.clear()
    clock["now"] = T0 + timedelta(hours=5)
    status = strict_json(handlers.check_job({"job": job, "previous": {"state": "running"}}, context))
    assert stops == [] and not status["stall_watch"]["watching"]


def test_downloads_under_auto_get_at_least_the_prior():
    """A fast measured start-up (train.py's, 60 s -> 10 min) does not shorten the download's limit: the measured
    start-ups do not include it."""
    auto = {**STALL, "startup_minutes": "auto"}
    pre = ("Downloading", T0)
    assert not stall_watch.watch(None, None, job_name="job-1", now=T0 + timedelta(minutes=34), since=None,
                                 stall=auto, measured_startup=60.0, before_training=pre)[1]
    report, stop = stall_watch.watch(None, None, job_name="job-1", now=T0 + timedelta(minutes=36), since=None,
                                     stall=auto, measured_startup=60.0, before_training=pre)
    assert stop and "the measured start-ups do not include downloads" in report["stop_reason"]
    assert report["record"]["phase"] == "Downloading"
    # a long measured start-up (20 min -> 60 min) lengthens it
    assert not stall_watch.watch(None, None, job_name="job-1", now=T0 + timedelta(minutes=64), since=None,
                                 stall=auto, measured_startup=1200.0, before_training=pre)[1]


def test_spec_errors_are_raised_before_any_job(context, aws_account):
    with pytest.raises(SpecError, match=r"stall\.minutes: expected \"auto\" or a number from 0\.05"):
        handlers.prepare({"spec": {**SPEC, "stall": {"minutes": -1}}}, context)


# --- the ledger --------------------------------------------------------------------------------------------------------
def test_a_stall_before_the_first_step_is_counted_as_stalled_though_the_log_cannot_be_split():
    """The attempt whose rank never reached its first step printed no GOODPUT line: its Training window is not
    split, but the stall record says from when nothing moved (the goodput ledger, lambda/goodput/ledger.py)."""
    from testkit.goodput_lines import JOB, T, assert_adds_up, describe

    from hfsm_lambda.goodput import ledger as goodput

    desc = describe([("Downloading", 0, 5), ("Training", 5, 105), ("Failed", 105, 105)], count=2, status="Failed")
    stream = {"name": f"{JOB}/algo-1-1", "first_at": T + 6, "events": [[T + 6, "INFO toolkit starting"]]}
    stall = {"job": JOB, "last_progress_at": T + 40, "detected_at": T + 100, "rank": 1, "step": None}
    ledger = goodput.ledger([desc], {JOB: [stream]}, [stall])
    assert_adds_up(ledger)
    assert ledger["parts"]["stalled"] == pytest.approx(2 * 65)  # from its last progress to the job's end
    assert goodput.ledger([desc], {JOB: [stream]})["parts"]["stalled"] == 0


def test_the_outside_watch_says_what_every_rank_was_doing():
    moved = (T0 + timedelta(minutes=5)).timestamp()
    hb = {"job": "job-1", "step": 400, "phase": "checkpoint save of step 400", "kind": "save", "moved_at": moved,
          "at": moved + 30, "limit_seconds": 600, "doing": "checkpoint save of step 400 since 12:05:00Z",
          "ranks": [{"rank": 0, "host": "algo-1", "doing": "checkpoint save of step 400 since 12:05:00Z"},
                    {"rank": 1, "host": "algo-2", "doing": "training, step 400"}]}
    report, stop = stall_watch.watch(None, hb, job_name="job-1", now=T0 + timedelta(minutes=14), since=T0,
                                     stall=STALL)
    assert not stop and report["doing"] == "checkpoint save of step 400 since 12:05:00Z"  # a long save: no stop
    assert report["ranks"] == ["rank 0 (algo-1): checkpoint save of step 400 since 12:05:00Z",
                               "rank 1 (algo-2): training, step 400"]
    report, stop = stall_watch.watch(report, hb, job_name="job-1", now=T0 + timedelta(minutes=21), since=T0,
                                     stall=STALL)
    assert stop and "at step 400 (checkpoint save of step 400 since 12:05:00Z)" in report["stop_reason"]
    assert "ranks: rank 0 (algo-1): checkpoint save" in report["stop_reason"]
    assert report["record"]["reason"] == report["stop_reason"] and report["record"]["phase"].startswith("checkpoint")


def test_the_final_jobs_stragglers_reach_the_summary_and_its_text(running):
    from hfsm_lambda.plan import run as run_json
    from hfsm_lambda.runs import summary_text

    run, job, _fake, _clock, _stops = running
    straggler = {"rank": 1, "host": "algo-2", "local_rank": 0, "own_step_seconds": 0.3, "median_step_seconds": 0.2,
                 "slower": 0.5, "minutes_lost_per_hour": 20.0}
    bucket, _, prefix = run["uris"]["checkpoint"].removeprefix("s3://").partition("/")
    for name, found in ((job["job_name"], [straggler]), ("an-earlier-job", [])):
        body = {"job": name, "step": 9, "phase": "train", "kind": "train", "moved_at": 1.0, "at": 2.0,
                "limit_seconds": 600, "stragglers": [straggler]}
        aws.client("s3").put_object(Bucket=bucket, Key=prefix.rstrip("/") + "/_heartbeat.json",
                                    Body=json.dumps(body).encode())
        assert handlers._stragglers(run_json.from_json(run), job["job_name"]) == found  # noqa: SLF001
    line = summary_text.straggler_line(straggler)
    assert line == ("  straggler: rank 1 (algo-2) takes 0.3 s of its own per step against the fleet's median 0.2 s "
                    "(+50%): up to 20.0 min of every hour of every instance")
    assert line in summary_text.success_lines({"run_id": "r", "stragglers": [straggler]})
    # a rank named earlier in the job that caught up before its end is still said, as such
    assert summary_text.straggler_line({**straggler, "now": False}) == line + (
        " (while it was slower; it caught up before the job ended)")


def test_stragglers_end_needs_a_next_attempt(settings):
    """`stall.stragglers: end` ends the job so that a new attempt runs on other instances: refused before any job
    when no attempt may follow."""
    with pytest.raises(Exception, match=r"stall.stragglers: 'end' .* fallback.max_attempts is 1"):
        run_spec.parse_spec({**MINIMAL, "stall": {"stragglers": "end"}}, settings)
    spec = run_spec.parse_spec({**MINIMAL, "stall": {"stragglers": "end"}, "fallback": {"max_attempts": 2}},
                               settings)
    assert spec["stall"]["stragglers"] == "end"
