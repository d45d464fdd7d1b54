"""LocalSession.follow over a scripted execution history (no emulator): the lines it prints, in time order, and the
outcome it returns."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime
from typing import Any

from local_mode.session import LocalSession

T0 = 1_700_000_000.0


def _at(seconds: float) -> datetime:
    return datetime.fromtimestamp(T0 + seconds, UTC)


class _Sfn:
    """describe_execution / get_execution_history of a run that is RUNNING for the first look, then ends."""

    def __init__(self, events: list[dict[str, Any]], status: str, output: dict[str, Any] | None = None) -> None:
        self.events, self.status, self.output, self.looks = events, status, output, 0

    def describe_execution(self, executionArn: str) -> dict[str, Any]:  # noqa: N803 - boto3's parameter name
        self.looks += 1
        desc = {"status": "RUNNING" if self.looks == 1 else self.status}
        if self.looks > 1 and self.output is not None:
            desc["output"] = json.dumps(self.output)
        return desc

    def get_execution_history(self, executionArn: str, maxResults: int) -> dict[str, Any]:  # noqa: N803
        return {"events": self.events}


def _session(sfn: _Sfn, said: list[str]) -> LocalSession:
    session = object.__new__(LocalSession)  # follow needs no emulator: only these attributes
    session.say, session.sfn, session.losses, session.evals = said.append, sfn, [], []
    session._pending, session._pending_lock, session._t0 = None, threading.Lock(), T0
    session._durable = (None, False)
    session.sagemaker = type("SM", (), {"jobs": []})()
    session.notifications = lambda: []
    return session


def test_follow_prints_states_and_durability_in_time_order_and_returns_the_outcome(monkeypatch) -> None:
    monkeypatch.setattr("local_mode.session.time.sleep", lambda _: None)
    durability = {"last_durable_step": 100, "last_durable_at": "t100", "stale": True, "age_minutes": 40,
                  "threshold_minutes": 30, "action": "warn"}
    events = [
        {"timestamp": _at(1), "stateEnteredEventDetails": {"name": "Prepare"}},
        {"timestamp": _at(2), "stateExitedEventDetails": {"name": "Prepare", "output": json.dumps(
            {"run": {"run_id": "demo-20250101000000-0123456789abcdef"}})}},
        {"timestamp": _at(3), "stateEnteredEventDetails": {"name": "WaitTraining"}},
        {"timestamp": _at(4), "stateEnteredEventDetails": {"name": "TrainingStatus"}},
        {"timestamp": _at(5), "stateExitedEventDetails": {"name": "CheckTraining", "output": json.dumps(
            {"status": {"durability": durability}})}},
        {"stateEnteredEventDetails": {"name": "RunFailed"}},  # no timestamp: the time of the look
    ]
    said: list[str] = []
    outcome = _session(_Sfn(events, "FAILED", {"x": 1}), said).follow("arn:aws:states:r:1:execution:sm:run-1")
    texts = [line.split("] ", 1)[1] for line in said]
    assert texts[0] == "execution run-1 started"
    assert texts[1:5] == ["state Prepare", "checkpoint-100 is durable in S3 (last_durable_step=100, "
                          "last_durable_at=t100)", "WARNING: no new checkpoint reached S3 for 40 min of training "
                          "(limit 30 min; watchdog action warn)", "state RunFailed"]
    assert texts[-1] == "execution FAILED" and len(texts) == 6
    assert outcome.states == ["Prepare", "WaitTraining", "TrainingStatus", "RunFailed"]
    assert outcome.planned_run_id == "demo-20250101000000-0123456789abcdef" and outcome.failed_state == "TrainingStatus"
    assert outcome.status == "FAILED" and outcome.output == {"x": 1} and outcome.jobs == []
