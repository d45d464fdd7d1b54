"""Recovery in place as a user meets it (issue 33 point 4): `python -m local_mode run` on 2 hosts.

- A rank killed once (SIGKILL after step 30): the job restarts its training processes on the same instances from
  the newest complete checkpoint (step 20, made whole from the peers), one SageMaker job, the run completes; the
  log has the RECOVERY line naming the rank and the signal, the ledger a `recovering` part, and it adds up.
- A rank that raises the same exception at the same step every time: recovered in place once, then the run ends
  at once (no loop, no new attempt although fallback.max_attempts allows one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from contract import recovery_line

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run([sys.executable, "-m", "local_mode", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.fixture(scope="module")
def setup(dev_outdir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("recovery")
    data = root / "data"
    made = cli("--cdk-out", str(dev_outdir), "data", "text-classification", str(data), "--rows", "1200")
    assert made.returncode == 0, made.stderr[-2000:]
    spec_path = data / "text-classification.json"
    spec = json.loads(spec_path.read_text())
    spec["compute"]["instance_count"] = 2
    spec.update(checkpoint={"every_steps": 20}, fallback={"max_attempts": 2}, max_runtime_seconds=1800)
    spec["hyperparameters"].update(max_steps=60, logging_steps=10, per_device_train_batch_size=4)
    spec_path.write_text(json.dumps(spec))
    return {"root": root, "data": data, "spec": spec_path, "cdk_out": dev_outdir}


def run_with(setup: dict, name: str, fault: str) -> dict:
    work = setup["root"] / name
    run = cli("--cdk-out", str(setup["cdk_out"]), "--work-dir", str(work), "run", str(setup["spec"]), "--data",
              str(setup["data"]), "--inject-stall", fault)
    record = json.loads((work / "report" / "run.json").read_text())
    jobs = [j for j in record["jobs"] if "TrainingJobName" in j]
    logs = sorted((work / "sagemaker" / jobs[0]["TrainingJobName"] / "logs" / "attempt-1").glob("*.log"))
    text = {log.stem: log.read_text(errors="replace") for log in logs}
    recoveries = [r for line in text["algo-1"].splitlines() if (r := recovery_line.parse_line(line))]
    return {"run": run, "record": record, "jobs": jobs, "logs": text, "recoveries": recoveries}


def test_a_rank_killed_once_is_recovered_in_place_and_the_run_completes(setup: dict) -> None:
    got = run_with(setup, "killed", "1@30:sigkill")
    out = got["run"].stdout
    assert got["run"].returncode == 0, out[-6000:] + got["run"].stderr[-2000:]
    assert [j["TrainingJobStatus"] for j in got["jobs"]] == ["Completed"]  # one SageMaker job, one attempt
    (recovery,) = got["recoveries"]
    assert recovery["cause"] == "signal" and recovery["rank"] == 1 and recovery["host"] == "algo-2"
    assert recovery["step"] == 30 and "killed by signal 9 (SIGKILL) after step 30" in recovery["text"]
    assert "recovered in place (1 of 2): signal: rank 1 (algo-2) was killed by signal 9 (SIGKILL)" in out
    assert "checkpoint-20 made whole on every host from its peers" in got["logs"]["algo-1"]
    assert "restoring checkpoint checkpoint-20 (step 20)" in got["logs"]["algo-1"]
    ledger = got["record"]["result"]["goodput"]
    assert sum(ledger["parts"].values()) == pytest.approx(ledger["billed_seconds"], abs=0.01)
    assert ledger["parts"]["recovering"] > 0 and ledger["parts"]["unaccounted"] >= 0
    assert "recovering" in out  # the printed ledger lists it


def test_the_same_exception_at_the_same_step_twice_ends_the_run_without_a_loop(setup: dict) -> None:
    got = run_with(setup, "raises", "1@30:raise")
    out = got["run"].stdout
    assert got["run"].returncode != 0
    assert [j["TrainingJobStatus"] for j in got["jobs"]] == ["Failed"]  # no new attempt, though 2 are allowed
    (recovery,) = got["recoveries"]  # recovered once, not twice
    assert recovery["cause"] == "exception" and recovery["rank"] == 1
    assert "not recovered in place: the same error at the same step" in got["logs"]["algo-1"]
    # the one cause every supervisor agreed on, the peer's collective error listed as its consequence
    reason = got["jobs"][0]["FailureReason"]
    assert reason.startswith("AlgorithmError: InjectedError: injected error after step 30 on rank 1")
    assert "consequences (not the cause): rank 0 (algo-1)" in reason
    assert "FAILED" in out


def test_a_spot_interruption_on_two_hosts_saves_on_sigterm_and_is_not_recovered_in_place(setup: dict) -> None:
    """SIGTERM reaches every worker through its supervisor: the emergency checkpoint completes on both hosts and
    the restart resumes from it (before the supervisor, 2-host runs restarted from scratch)."""
    spec = json.loads(setup["spec"].read_text())
    spec.update(checkpoint={"every_steps": 100})
    spec["hyperparameters"].update(max_steps=120)
    path = setup["data"] / "sigterm.json"
    path.write_text(json.dumps(spec))
    work = setup["root"] / "sigterm"
    run = cli("--cdk-out", str(setup["cdk_out"]), "--work-dir", str(work), "run", str(path), "--data",
              str(setup["data"]), "--interrupt-at-step", "40")
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    record = json.loads((work / "report" / "run.json").read_text())
    (interruption,) = record["result"]["goodput"]["interruptions"]
    assert interruption["resumed_from_step"] is not None and interruption["resumed_from_step"] >= 40
    assert interruption["resumed_from_step"] == interruption["step_reached"]  # nothing lost
    assert "recovered in place" not in run.stdout
