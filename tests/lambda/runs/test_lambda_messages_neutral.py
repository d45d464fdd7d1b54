"""Text written by jobs reaches SNS notifications neutralised (issue 36, finding 2): control and format
characters shown as escapes, every line and the whole message bounded."""

from __future__ import annotations

from hfsm_lambda.runs import messages
from hfsm_lambda.settings import Settings

HOSTILE = "\x1b[2J\x1b[31mALL CLEAR\rsecret\u202eexe.txt\u2028forged line" + "A" * 10_000


def test_a_failure_reason_from_a_job_is_neutralised(settings: Settings):
    summary = {"run_id": "run-1", "error": "JobFailedError", "reason": HOSTILE, "links": {}, "summary_uri": None}
    subject, message = messages.failure_notification(settings, summary)
    for text in (subject, message):
        assert not any(c in text for c in "\x1b\r\u202e\u2028")
    assert "\\x1b[2J" in message and "\\u202e" in message
    assert max(len(line) for line in message.splitlines()) <= 2000
    assert len(subject) <= messages.SUBJECT_MAX


def test_the_durability_warning_neutralises_the_job_s_checkpoint_reasons(settings: Settings):
    job = {"job_name": "hfsm-dev-run-train0", "run_id": "run-1", "watchdog": {"every_minutes": 30}}
    report = {"age_minutes": 90.0, "threshold_minutes": 60.0, "checkpoint_uri": "s3://a/checkpoints/run-1/",
              "pending": [{"step": 5, "reason": HOSTILE}]}
    _, message = messages.durability_warning(settings, job, report, stopped=False)
    assert "\x1b" not in message and "\r" not in message and "\\x1b[31mALL CLEAR\\x0dsecret" in message
