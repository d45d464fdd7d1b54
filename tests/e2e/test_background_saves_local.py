"""Checkpoints written behind the training loop, as a user meets them (issue: goodput at fleet scale, point 3):
2-host local runs through `python -m local_mode run` in a subprocess.

- A background write that fails (`--inject-save-error 20@1`: rank 1's write of checkpoint-20 fails as a full disk
  would): the run ends at once with that error, naming the rank (not training on unprotected), checkpoint-20
  never counts and the previous checkpoint is kept. (A failed run has no goodput ledger yet: Finish, which builds
  it, runs for runs that reach it.)
- An interruption while a background write is in flight (`--interrupt-during-save 80`, 100 steps: the
  instances are lost when the write of checkpoint-80 begins; local mode makes every background write of such a run
  wait 3 s first, so that the loss lands inside it): the next attempt resumes from an earlier complete one (what the
  2-second sync had uploaded), never 80, the interruption is reported as during a save, and the run completes.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run([sys.executable, "-m", "local_mode", "--keep-job-files", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=1200)  # the checks read the jobs' checkpoint folders


@pytest.fixture(scope="module")
def spec_and_data(dev_outdir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("background-saves")
    data = root / "data"
    made = cli("--cdk-out", str(dev_outdir), "data", "text-classification", str(data), "--rows", "2000")
    assert made.returncode == 0, made.stderr[-2000:]
    spec_path = data / "text-classification.json"
    spec = json.loads(spec_path.read_text())
    spec["compute"]["instance_count"] = 2
    spec["checkpoint"] = {"every_steps": 10}
    spec["hyperparameters"]["max_steps"] = 40
    spec_path.write_text(json.dumps(spec))
    return spec_path, data


def run(dev_outdir: Path, spec_and_data: tuple[Path, Path], work: Path, *extra: str) -> dict:
    spec_path, data = spec_and_data
    done = cli("--cdk-out", str(dev_outdir), "--work-dir", str(work), "run", str(spec_path), "--data", str(data),
               *extra)
    record = json.loads((work / "report" / "run.json").read_text())
    jobs = [j for j in record["jobs"] if "TrainingJobName" in j]
    return {"proc": done, "result": record["result"], "jobs": jobs, "work": work}


def markers(outcome: dict, step: int) -> list[Path]:
    job = outcome["jobs"][-1]["TrainingJobName"]
    return sorted((outcome["work"] / "sagemaker" / job).glob(f"attempt-*/algo-*/opt/ml/checkpoints/checkpoint-{step}/"
                                                              "_complete.*.json"))


def assert_ledger_adds_up(result: dict) -> None:
    ledger = result["goodput"]
    assert sum(ledger["parts"].values()) == pytest.approx(ledger["billed_seconds"], abs=0.01)
    assert abs(ledger["parts"]["unaccounted"]) < 0.1 * ledger["billed_seconds"], ledger["parts"]
    for attempt in ledger["attempts"]:
        assert sum(attempt["parts"].values()) == pytest.approx(attempt["billed_seconds"], abs=0.01)


def test_a_failed_background_write_ends_the_run_with_its_error(dev_outdir, spec_and_data, tmp_path):
    outcome = run(dev_outdir, spec_and_data, tmp_path / "run", "--inject-save-error", "20@1")
    proc = outcome["proc"]
    assert proc.returncode == 1, proc.stdout[-4000:] + proc.stderr[-3000:]
    (job,) = outcome["jobs"]  # a full volume is the user's to fix: no retry
    reason = job["FailureReason"]
    assert "the instance's volume is full: saving checkpoint-20" in reason, reason
    assert "Raise compute.volume_size_gb" in reason
    assert markers(outcome, 20) == []  # it never counted
    assert len(markers(outcome, 10)) == 2  # the previous one is complete on both hosts, and kept
    logs = outcome["work"] / "sagemaker" / job["TrainingJobName"] / "logs" / "attempt-1"
    assert "background save of checkpoint 20 failed" in (logs / "algo-2.log").read_text()
    steps = [int(line.split("=")[1].split()[0]) for line in (logs / "algo-1.log").read_text().splitlines()
             if line.startswith("PROGRESS global_step=")]
    assert max(steps) <= 22, max(steps)  # it ended at the next step boundaries, not at the end of training
    assert "(the background write of checkpoint 20 on rank 1, algo-2)" in reason  # whichever rank's file is read
    assert "FAILED" in proc.stdout


def test_an_interruption_during_a_background_write_resumes_from_the_previous_checkpoint(dev_outdir, spec_and_data,
                                                                                         tmp_path):
    spec_path, data = spec_and_data
    spec = json.loads(spec_path.read_text())
    spec["hyperparameters"]["max_steps"] = 100  # several checkpoints: the 2-second sync has uploaded some by step 80
    longer = spec_path.with_name("longer.json")
    longer.write_text(json.dumps(spec))
    outcome = run(dev_outdir, (longer, data), tmp_path / "run", "--interrupt-during-save", "80")
    proc = outcome["proc"]
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    (record,) = outcome["result"]["interruptions"]
    # an earlier complete checkpoint, as far as the sync had uploaded it before the loss; never the one in flight
    resumed = record["resumed_from_step"]
    assert record["during_save"] and 10 <= resumed < 80 and resumed % 10 == 0, record
    assert record["step_reached"] >= 80
    assert "(during a checkpoint save)" in proc.stdout
    assert len(markers(outcome, 100)) == 2
    assert_ledger_adds_up(outcome["result"])
