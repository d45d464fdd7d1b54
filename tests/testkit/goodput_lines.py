"""GOODPUT and PROGRESS log lines of made-up attempts, their DescribeTrainingJob, and the ledger's sum check (the
Lambda's goodput tests: tests/lambda/goodput/, tests/lambda/watch/test_lambda_stalls.py)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from hfsm_lambda.goodput.values import PARTS

JOB = "hfsm-dev-run-20260101000000-0123456789abcdef-train0"
T = 1_800_000_000.0  # epoch seconds


def at(offset: float) -> datetime:
    return datetime.fromtimestamp(T + offset, UTC)


def describe(transitions: list[tuple[str, float, float]], *, count: int = 2, status: str = "Completed",
             name: str = JOB, training_seconds: int | None = None) -> dict[str, Any]:
    billed = sum(e - s for n, s, e in transitions if n not in ("Starting", "Interrupted"))
    return {
        "TrainingJobName": name, "TrainingJobStatus": status, "SecondaryStatus": transitions[-1][0],
        "ResourceConfig": {"InstanceType": "ml.g5.2xlarge", "InstanceCount": count},
        "EnableManagedSpotTraining": True,
        "SecondaryStatusTransitions": [{"Status": n, "StartTime": at(s), "EndTime": at(e)} for n, s, e in transitions],
        "TrainingTimeInSeconds": training_seconds if training_seconds is not None else int(billed + 0.999),
        "BillableTimeInSeconds": int(billed * 0.3 + 0.999),
        "TrainingEndTime": at(transitions[-1][2]),
    }


def report(event: str, offset: float, **fields: Any) -> list[Any]:
    record = {"v": 1, "event": event, "job": JOB, "host": "algo-1", "at": T + offset, **fields}
    return [T + offset, "GOODPUT " + json.dumps(record)]


def progress(offset: float, step: int) -> list[Any]:
    return [T + offset, f"PROGRESS global_step={step} max_steps=100"]


STARTUP = {"imports": 4.0, "setup": 0.5, "data_load": 1.0, "model_load": 1.0, "tokenize": 2.0, "layout": 0.1,
           "resume_verify": 0.2, "restore": 0.7}


def attempt_lines(*, t0: float, start_step: int, steps: int, step: float = 1.0, saves: tuple[int, ...] = (),
                  save: float = 2.0, end: bool = True, killed_in_save: int | None = None) -> list[list[Any]]:
    """One attempt's GOODPUT and PROGRESS lines: 1 s launch, 9.5 s of start-up phases, then `steps` steps of
    `step` seconds, a `save`-second checkpoint at each step in `saves`, a graceful end 0.5 s after the last."""
    common = {"script_started_at": T + t0 + 1, "start_step": start_step, "startup": STARTUP}
    first = t0 + 10.5
    lines = [report("startup", first, first_step_at=T + first, step=start_step, steps=0, step_seconds=0.0,
                    eval_seconds=0.0, save_seconds=0.0, **common)]
    now, step_total, save_total = first, 0.0, 0.0
    for i in range(1, steps + 1):
        now += step
        step_total += step
        global_step = start_step + i
        lines.append(progress(now, global_step))
        if global_step in saves or global_step == killed_in_save:
            lines.append(report("save_begin", now, first_step_at=T + first, step=global_step, steps=i,
                                step_seconds=step_total, eval_seconds=0.0, save_seconds=save_total,
                                saving_step=global_step, **common))
            if global_step == killed_in_save:
                return lines
            now += save
            save_total += save
            lines.append(report("save", now, first_step_at=T + first, step=global_step, steps=i,
                                step_seconds=step_total, eval_seconds=0.0, save_seconds=save_total,
                                saved_step=global_step, **common))
    if end:  # the final model write (0.5 s), then the last report
        now += 0.5
        lines.append(report("end", now, first_step_at=T + first, step=start_step + steps, steps=steps,
                            step_seconds=step_total, eval_seconds=0.0, save_seconds=save_total + 0.5,
                            final_seconds=0.5, **common))
    return lines


def stream(name: str, lines: list[list[Any]]) -> dict[str, Any]:
    return {"name": f"{JOB}/algo-1-{name}", "first_at": lines[0][0] if lines else None, "events": lines}


def assert_adds_up(ledger: dict[str, Any]) -> None:
    assert sum(ledger["parts"].values()) == pytest.approx(ledger["billed_seconds"], abs=1e-3)
    for row in ledger["attempts"]:
        assert sum(row["parts"].values()) == pytest.approx(row["billed_seconds"], abs=1e-3)
        assert set(row["parts"]) == set(PARTS)
