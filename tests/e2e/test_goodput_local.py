"""The goodput ledger as a new user meets it (issue: "Goodput"): the user's own commands in a subprocess,

    python -m local_mode data text-classification DIR
    (a spec with checkpoint.every_steps: 20)
    python -m local_mode run SPEC --data DIR --interrupt-at-step 10

then what the run says: every billed instance-second in named parts that add up, the interruption as the lost
attempt logged it (never "step 0" when it reached 13), the restart loading the tokenized data set kept with the
run, the automatic checkpoint interval in the log, the ledger in the notification and the report.
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
    made = cli("--cdk-out", str(dev_outdir), "data", "text-classification", str(data), "--rows", "3000", cwd=root)
    assert made.returncode == 0, made.stderr[-2000:]
    spec_path = data / "text-classification.json"
    spec = json.loads(spec_path.read_text())
    spec["checkpoint"] = {"every_steps": 20}  # every_minutes: the default ("auto")
    spec_path.write_text(json.dumps(spec))
    run = cli("--cdk-out", str(dev_outdir), "--work-dir", str(root / "run"), "run", str(spec_path), "--data",
              str(data), "--interrupt-at-step", "10", cwd=root)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    record = json.loads((root / "run" / "report" / "run.json").read_text())
    (job,) = [j["TrainingJobName"] for j in record["jobs"] if "TrainingJobName" in j]
    logs = root / "run" / "sagemaker" / job / "logs"
    return {"stdout": run.stdout, "result": record["result"], "logs": logs, "root": root, "job": record["jobs"][-1]}


def test_every_billed_second_is_in_a_named_part(story: dict) -> None:
    ledger = story["result"]["goodput"]
    billed = ledger["billed_seconds"]
    assert set(ledger["parts"]) == {"downloading", "startup", "productive", "replayed", "evaluation",
                                    "checkpointing", "uploading", "stalled", "unaccounted"}
    assert sum(ledger["parts"].values()) == pytest.approx(billed, abs=0.01)
    job = story["job"]  # what the emulated DescribeTrainingJob bills: within 2%
    assert billed == pytest.approx(job["TrainingTimeInSeconds"] * job["ResourceConfig"]["InstanceCount"], rel=0.02)
    assert abs(ledger["parts"]["unaccounted"]) < 0.05 * billed, ledger["parts"]
    assert ledger["parts"]["stalled"] == 0 and 0 < ledger["ratio"] < 1
    first, second = ledger["attempts"]
    for attempt in (first, second):
        assert sum(attempt["parts"].values()) == pytest.approx(attempt["billed_seconds"], abs=0.01)
    assert second["parts"]["productive"] > 0
    assert ledger["waiting_seconds"] > 0  # the unbilled wait for "capacity" after the interruption


def test_the_interruption_is_reported_as_the_lost_attempt_logged_it(story: dict) -> None:
    (record,) = story["result"]["interruptions"]
    logged = steps(story["logs"] / "attempt-1" / "algo-1.log")
    resumed = steps(story["logs"] / "attempt-2" / "algo-1.log")
    assert record["step_logged"] == logged[-1] >= 10  # not 0, not a stale progress file
    assert record["resumed_from_step"] == resumed[0] - 1
    assert record["step_reached"] == max(logged[-1], record["resumed_from_step"])
    assert record["lost_steps"] == record["step_reached"] - record["resumed_from_step"]
    assert record["unknown"] is None and record["restart_seconds"] > 0
    first = story["result"]["goodput"]["attempts"][0]
    assert (first["parts"]["productive"] > 0) == (record["resumed_from_step"] > 0)  # kept only with a checkpoint
    # replayed = the recomputed steps x the lost attempt's measured step time (within 10%)
    expected = record["lost_steps"] * first["step_seconds"] * first["instance_count"]
    assert first["details"]["replayed"]["lost_steps"] == pytest.approx(expected, rel=0.10,
                                                                       abs=first["step_seconds"] * 2)
    text = story["stdout"]
    assert f"step {record['step_reached']} reached" in text and "on download and start-up again" in text


def test_the_summary_the_notification_and_the_report_show_the_ledger(story: dict) -> None:
    text = story["stdout"]
    goodput_line = next(line for line in text.splitlines() if line.startswith("Goodput: "))
    assert "billed instance time was productive training (2 attempt(s)" in goodput_line
    assert re.search(r"^\s+startup\s+\d+\.\d%", text, re.MULTILINE)  # the parts over 5%
    assert re.search(r"^\s+unaccounted\s+-?\d+\.\d%", text, re.MULTILINE)  # always shown
    report = story["root"] / "run" / "report"
    assert "## Goodput" in (report / "report.md").read_text()
    assert (report / "goodput.png").stat().st_size > 5000


def test_the_restart_loads_the_tokenized_data_set_and_starts_faster(story: dict) -> None:
    first, second = story["result"]["goodput"]["attempts"]
    assert first["tokenize_cache"] == "miss" and second["tokenize_cache"] == "hit"
    assert "tokenized cache: loaded the tokenized data set kept with the run" in \
        (story["logs"] / "attempt-2" / "algo-1.log").read_text()
    tokenize = [a["details"]["startup"]["tokenize"] for a in (first, second)]
    assert tokenize[1] < 0.5 * tokenize[0], tokenize


def test_the_automatic_checkpoint_interval_is_logged(story: dict) -> None:
    log = (story["logs"] / "attempt-1" / "algo-1.log").read_text()
    assert "checkpoint interval (auto, start): 5 min (the lower bound until this run's first save is measured; " \
           "M 12.00 h, the pipeline's prior for this instance type and capacity)" in log
