"""The goodput ledger as a new user meets it (issue: "Goodput"): the user's own commands in a subprocess,

    python -m local_mode data text-classification DIR
    (a spec with checkpoint.every_steps: 20)
    python -m local_mode run SPEC --data DIR --interrupt-at-step 10

(on the code before the ledger, that run's summary said "step 0 reached ... 0 step(s), 0.0 min of work lost"
when the lost attempt had logged 13 steps), with two more interruptions in the same run, so that one run has the
four cases: before the first checkpoint (step 10: SIGTERM, as SageMaker stops a job), during a save (the
instances lost while checkpoint-60 is written), just after a checkpoint (lost at step 66) and several in one
run (checkpoints every 60 steps here, so that the SIGTERM lands before the first one however fast the steps). What the run then says: every billed instance-second in named parts that add up, each interruption as the
lost attempt logged it, the replayed time as the recomputed steps x the measured step time, a restart loading
the tokenized data set kept with the run, the automatic checkpoint interval in the log, the ledger in the
notification and the report.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run([sys.executable, "-m", "local_mode", *args], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=900)


def steps(log: Path) -> list[int]:
    return [int(m) for m in re.findall(r"^PROGRESS global_step=(\d+)", log.read_text(), re.MULTILINE)]


@pytest.fixture(scope="module")
def story(dev_outdir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("goodput-story")
    data = root / "data"
    made = cli("--cdk-out", str(dev_outdir), "data", "text-classification", str(data), "--rows", "20000", cwd=root)
    assert made.returncode == 0, made.stderr[-2000:]
    spec_path = data / "text-classification.json"
    spec = json.loads(spec_path.read_text())
    # every_minutes: the default ("auto"). 50 steps between the first interruption and the first checkpoint: the
    # tiny model runs about 50 steps a second here, and SageMaker's stop (SIGTERM) comes a poll after the step.
    spec["checkpoint"] = {"every_steps": 60}
    spec["hyperparameters"]["max_steps"] = 90
    spec_path.write_text(json.dumps(spec))
    run = cli("--cdk-out", str(dev_outdir), "--work-dir", str(root / "run"), "run", str(spec_path), "--data",
              str(data), "--interrupt-at-step", "10", "--interrupt-during-save", "60",
              "--interrupt-abruptly-at-step", "66", cwd=root)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    record = json.loads((root / "run" / "report" / "run.json").read_text())
    (job,) = [j["TrainingJobName"] for j in record["jobs"] if "TrainingJobName" in j]
    logs = root / "run" / "sagemaker" / job / "logs"
    return {"stdout": run.stdout, "result": record["result"], "logs": logs, "root": root, "job": record["jobs"][-1]}


def test_every_billed_second_is_in_a_named_part(story: dict) -> None:
    ledger = story["result"]["goodput"]
    billed = ledger["billed_seconds"]
    assert set(ledger["parts"]) == {"downloading", "startup", "productive", "replayed", "evaluation",
                                    "checkpointing", "uploading", "stalled", "recovering", "unaccounted"}
    assert sum(ledger["parts"].values()) == pytest.approx(billed, abs=0.01)
    job = story["job"]  # what the emulated DescribeTrainingJob bills; its transitions tell the same within 2%
    count = job["ResourceConfig"]["InstanceCount"]
    assert billed == job["TrainingTimeInSeconds"] * count
    assert abs(ledger["transitions_billed_seconds"] - billed) <= max(0.02 * billed, count * 1.0)  # whole seconds
    assert abs(ledger["parts"]["unaccounted"]) < 0.05 * billed, ledger["parts"]
    assert ledger["parts"]["stalled"] == 0 and 0 < ledger["ratio"] < 1
    assert len(ledger["attempts"]) == 4 and ledger["attempts"][-1]["parts"]["productive"] > 0
    for attempt in ledger["attempts"]:
        assert sum(attempt["parts"].values()) == pytest.approx(attempt["billed_seconds"], abs=0.01)
    assert ledger["attempts"][1]["parts"]["checkpointing"] > 0  # the save it was lost in
    assert ledger["waiting_seconds"] > 0  # the unbilled waits for "capacity" after the interruptions


def test_each_interruption_is_reported_as_the_lost_attempt_logged_it(story: dict) -> None:
    records = story["result"]["interruptions"]
    attempts = story["result"]["goodput"]["attempts"]
    logged = [steps(story["logs"] / f"attempt-{i}" / "algo-1.log") for i in range(1, 5)]
    assert len(records) == 3 and logged[-1][-1] == 90
    for i, (record, attempt) in enumerate(zip(records, attempts, strict=False)):
        assert record["step_logged"] == logged[i][-1]  # what the lost attempt printed: not 0, not a stale file
        assert record["resumed_from_step"] == logged[i + 1][0] - 1  # where the next one started
        assert record["step_reached"] == max(logged[i][-1], record["resumed_from_step"])
        assert record["lost_steps"] == record["step_reached"] - record["resumed_from_step"]
        assert record["unknown"] is None and record["restart_seconds"] > 0
        # replayed = the recomputed steps x the lost attempt's measured step time (within 10%)
        expected = record["lost_steps"] * attempt["step_seconds"] * attempt["instance_count"]
        assert attempt["details"]["replayed"]["lost_steps"] == pytest.approx(expected, rel=0.10,
                                                                             abs=attempt["step_seconds"] * 2)
        assert f"step {record['step_reached']} reached" in story["stdout"]
    before_checkpoint, during_save, after_checkpoint = records
    assert before_checkpoint["step_logged"] >= 10 and not before_checkpoint["during_save"]
    # The save of checkpoint-60 runs in the background: the loop goes on while it is written, so the attempt can log
    # steps past 60 before its instances are lost (the kill follows the leader's "writing" line, read through a pipe).
    assert during_save["during_save"] and 60 <= during_save["step_logged"] < 90
    assert during_save["resumed_from_step"] < 60  # checkpoint-60 was never complete
    assert after_checkpoint["step_logged"] >= 66 and not after_checkpoint["during_save"]
    assert "(during a checkpoint save)" in story["stdout"] and "on download and start-up again" in story["stdout"]


def test_the_summary_the_notification_and_the_report_show_the_ledger(story: dict) -> None:
    text = story["stdout"]
    goodput_line = next(line for line in text.splitlines() if line.startswith("Goodput: "))
    assert "billed instance time was productive training (4 attempt(s)" in goodput_line
    assert re.search(r"^\s+startup\s+\d+\.\d%", text, re.MULTILINE)  # the parts over 5%
    assert re.search(r"^\s+unaccounted\s+-?\d+\.\d%", text, re.MULTILINE)  # always shown
    report = story["root"] / "run" / "report"
    assert "## Goodput" in (report / "report.md").read_text()
    assert (report / "goodput.png").stat().st_size > 5000


def test_the_restart_loads_the_tokenized_data_set_and_starts_faster(story: dict) -> None:
    first, second = story["result"]["goodput"]["attempts"][:2]  # the first interruption came with SIGTERM: synced
    assert first["tokenize_cache"] == "miss" and second["tokenize_cache"] == "hit"
    assert "tokenized cache: loaded the tokenized data set kept with the run" in \
        (story["logs"] / "attempt-2" / "algo-1.log").read_text()
    tokenize = [a["details"]["startup"]["tokenize"] for a in (first, second)]
    assert tokenize[1] < 0.5 * tokenize[0], tokenize


def test_the_automatic_checkpoint_interval_is_logged(story: dict) -> None:
    log = (story["logs"] / "attempt-1" / "algo-1.log").read_text()
    assert "checkpoint interval (auto, start): 5 min (the lower bound until this run's first save is measured; " \
           "M 12.00 h, the pipeline's prior for this instance type and capacity)" in log
