"""When an injected spot interruption reaches the hosts (local_mode/sagemaker/training_job.py): at the leader's line
that makes it due, not at the watcher's next look. A CI run of tests/e2e/test_local_mode.py asked for a notice at
step 8 of 24 and the watcher, behind a checkpoint sync on a loaded machine, sent SIGTERM after the run had ended."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest

from local_mode.sagemaker import training_job
from local_mode.sagemaker.settings import Interruption, LocalSageMakerSettings

REQUEST = {"OutputDataConfig": {"S3OutputPath": "s3://bucket/out"}, "EnableManagedSpotTraining": True}


class _Host:
    def __init__(self, name: str) -> None:
        self.host = name


def _job(tmp_path: Path, rule: Interruption, monkeypatch: pytest.MonkeyPatch) -> tuple[Any, list[tuple[str, int]]]:
    sent: list[tuple[str, int]] = []
    monkeypatch.setattr(training_job, "signal_host",
                        lambda process, sig, first_pid=None: sent.append((process.host, sig)))
    settings = LocalSageMakerSettings(work_dir=tmp_path, cloudwatch_logs=False, emit_events=False)
    job = training_job.TrainingJob(REQUEST, interruptions=[rule], name="job", arn="arn:job", region="us-east-1",
                                   settings=settings)
    job.attempt, job.hosts = 1, [_Host("algo-1"), _Host("algo-2")]
    return job, sent


@pytest.mark.parametrize(("rule", "sig"), [(Interruption(3), signal.SIGTERM),
                                           (Interruption(3, abrupt=True), signal.SIGKILL)])
def test_the_interruption_signals_every_host_from_the_line_that_makes_it_due(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rule: Interruption, sig: int) -> None:
    job, sent = _job(tmp_path, rule, monkeypatch)
    job._on_line("algo-1", "PROGRESS global_step=2 max_steps=10")
    job._on_line("algo-2", "PROGRESS global_step=5 max_steps=10")  # not the leader's
    assert sent == [] and job._interruption_due() is None
    job._on_line("algo-1", "PROGRESS global_step=3 max_steps=10")
    assert sent == [("algo-1", sig), ("algo-2", sig)]
    # the watcher's first look ends the attempt as interrupted, whatever the hosts' exit codes say by then (after a
    # notice they save and exit 0 on their own)
    assert job._interruption_due() == "interrupted" and job._interruption_due() is None
    job._on_line("algo-1", "PROGRESS global_step=4 max_steps=10")  # one interruption per attempt
    assert len(sent) == 2
