"""Stalls as a user meets them (issue: "Stalls and hangs"): one local run on 2 hosts x 2 processes (gloo) whose
first four training jobs each get one fault, the fifth finishes:

    python -m local_mode run SPEC --data DIR --processes-per-host 2 \\
        --inject-stall 3@4 --inject-stall 2@7:sigstop --inject-stall 1@startup --inject-stall 3@10:loader

(rank 3 sleeps forever after step 4; rank 2's process is SIGSTOPped after step 7; rank 1 never reaches its first
step; rank 3's data-loader worker blocks after step 10), with `stall.minutes` 0.1 (6 s), `stall.startup_minutes`
1.5 and `fallback.max_attempts` 5. (The start-up limit also covers train.py's imports: at 0.5 min, four ranks
importing torch and transformers on a 2-core CI machine beside another test took longer once, and the first job was
ended in its imports instead of at its injected fault.) Each fault: detected within the limit + 1 minute, the failure reason names the
right rank and host, the job ends (every process gone) within 2 minutes of the detection; the run retries each
time from the last durable checkpoint (none rejected) and finishes; the ledger counts the stalled time. On the
code before the watchdog the first job would hang until max_runtime_seconds.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
FAULTS = ["3@4", "2@7:sigstop", "1@startup", "3@10:loader"]
# rank, host, local rank, what the first line says
NAMED = [(3, "algo-2", 1, "made no progress for", "at step 4"),
         # last heard at step 7, or, when its watchdog last published before that step, after step 7 (the step its
         # peers completed with it)
         (2, "algo-2", 0, "stopped responding (its process is frozen or SIGSTOPped", "step 7"),
         (1, "algo-1", 1, "made no progress for", "in start-up phase layout (before step 1)"),
         (3, "algo-2", 1, "made no progress for", "at step 10")]
LIMITS = [0.1 * 60, 0.1 * 60, 1.5 * 60, 0.1 * 60]


def cli(*args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run([sys.executable, "-m", "local_mode", "--keep-job-files", *args], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=1200)  # the checks read the jobs' checkpoint folders


def failure_digest(work: Path, run: subprocess.CompletedProcess) -> str:
    """What a failed run says first (CI keeps only the end of a long message): every job's FailureReason, each
    failed host's last log lines before the toolkit's own, then the output's head and tail."""
    lines = []
    with contextlib.suppress(OSError, ValueError):
        for job in json.loads((work / "report" / "run.json").read_text()).get("jobs", []):
            lines.append(f"{job.get('TrainingJobName')}: {job.get('TrainingJobStatus')}: "
                         f"{(job.get('FailureReason') or '').strip()[:600]}")
    for log in sorted(work.glob("sagemaker/*/logs/attempt-*/algo-*.log")):
        text = log.read_text(errors="replace").splitlines()
        own = [line for line in text if "sagemaker-training-toolkit" not in line][-15:]
        lines += [f"--- {log.parent.parent.parent.name[-6:]} {log.parent.name} {log.name}", *own]
    return "\n".join([*lines[-120:], "--- output head", run.stdout[:3000], "--- output tail", run.stdout[-2000:],
                      run.stderr[-1500:]])


@pytest.fixture(scope="module")
def stalls(dev_outdir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    root = tmp_path_factory.mktemp("stalls")
    data = root / "data"
    made = cli("--cdk-out", str(dev_outdir), "data", "text-classification", str(data), "--rows", "600")
    assert made.returncode == 0, made.stderr[-2000:]
    spec_path = data / "text-classification.json"
    spec = json.loads(spec_path.read_text())
    spec.update(checkpoint={"every_steps": 3}, stall={"minutes": 0.1, "startup_minutes": 1.5},
                recovery={"in_job_restarts": 0},  # each stall ends its job: the retry is a new attempt
                fallback={"max_attempts": 5}, max_runtime_seconds=3600)
    spec["hyperparameters"].update(max_steps=16, logging_steps=2, dataloader_num_workers=1)
    spec_path.write_text(json.dumps(spec))
    args = ["--cdk-out", str(dev_outdir), "--work-dir", str(root / "run"), "run", str(spec_path), "--data", str(data),
            "--processes-per-host", "2"]
    for fault in FAULTS:
        args += ["--inject-stall", fault]
    run = cli(*args)
    (root / "stdout.txt").write_text(run.stdout)  # what the user saw, kept with pytest's temporary folders
    assert run.returncode == 0, failure_digest(root / "run", run)
    record = json.loads((root / "run" / "report" / "run.json").read_text())
    jobs = [j for j in record["jobs"] if "TrainingJobName" in j]
    last = jobs[-1]["TrainingJobName"]
    found = sorted((root / "run" / "sagemaker" / last).glob("attempt-*/algo-1/opt/ml/checkpoints/_stalls.json"))
    return {"stdout": run.stdout, "result": record["result"], "jobs": jobs, "root": root,
            "stalls": json.loads(found[-1].read_text())["stalls"]}


def test_each_fault_is_detected_named_and_the_job_ends(stalls: dict) -> None:
    jobs, records = stalls["jobs"], stalls["stalls"]
    assert [j["TrainingJobStatus"] for j in jobs] == ["Failed"] * 4 + ["Completed"]
    assert [r["job"] for r in records] == [j["TrainingJobName"] for j in jobs[:4]]
    for job, record, (rank, host, local_rank, state, where), limit in zip(jobs[:4], records, NAMED, LIMITS,
                                                                          strict=True):
        first = job["FailureReason"].splitlines()[0]
        assert first.startswith(f"AlgorithmError: stall watchdog: rank {rank} ({host}, local rank {local_rank}) "
                                f"{state}"), first
        assert where in first and "; last " in first and (record["rank"], record["host"]) == (rank, host)
        detected = record["detected_at"] - record["last_progress_at"]
        assert limit <= detected <= limit + 60, (first, detected)
        ended = datetime.fromisoformat(job["TrainingEndTime"]).timestamp() - record["detected_at"]
        assert 0 <= ended <= 120, (first, ended)
    assert "in hang (hftrain/stall/injection.py" in jobs[0]["FailureReason"]
    assert "_try_get_data (torch/utils/data/dataloader.py" in jobs[3]["FailureReason"] or \
        "_next_data (torch/utils/data/dataloader.py" in jobs[3]["FailureReason"]
    leftovers = [p.pid for p in psutil.process_iter(["cmdline"]) if str(stalls["root"]) in " ".join(
        p.info["cmdline"] or [])]
    assert leftovers == [], "processes of the run outlived it"


def test_the_run_retries_from_the_last_durable_checkpoint_and_finishes(stalls: dict) -> None:
    result = stalls["result"]
    assert result["status"] == "Succeeded"
    assert [a["outcome"] for a in result["attempts"]] == ["stalled"] * 4 + ["completed"]
    assert all(a["reason"].startswith("AlgorithmError: stall watchdog: rank ") for a in result["attempts"][:4])
    # every checkpoint a stall left behind verified at resume, but a background save (checkpoint/background.py) that
    # the stall cut before its completion marker: refused as incomplete, the previous complete one used instead
    assert all(r["kind"] == "incomplete" for r in result["checkpoints"]["rejected"]), result["checkpoints"]
    # resumed each time from the last durable checkpoint (every 3 steps), never backwards; the attempt stalled in
    # its start-up reported no start step
    starts = [a["start_step"] for a in result["goodput"]["attempts"]]
    assert starts[0] == 0 and starts[-1] == 9 and starts[2] is None
    assert [s for s in starts if s is not None] == sorted(s for s in starts if s is not None)


def test_the_output_shows_detection_stacks_retry_and_the_stalled_time(stalls: dict) -> None:
    out, ledger = stalls["stdout"], stalls["result"]["goodput"]
    assert "a stall will be injected in training job 1 of the run: rank 3 stops making progress after step 4" in out
    assert "train0: stall watchdog: rank 3 (algo-2, local rank 1) made no progress for 0.1 min at step 4" in out
    assert "stalled (AlgorithmError: stall watchdog: rank 3 (algo-2, local rank 1)" in out
    assert "; stacks: s3://" in out and f"/_stalls/{stalls['jobs'][0]['TrainingJobName']}/)" in out
    reasons = "\n".join(j["FailureReason"] for j in stalls["jobs"][:4])  # the job's FailureReason says where
    assert "_stalls/" in reasons and "rank-<rank>.txt under the run's checkpoint prefix" in reasons
    assert ledger["parts"]["stalled"] > 0 and "stalled" in out
    for attempt in ledger["attempts"][:4]:
        assert attempt["parts"]["stalled"] > 0, attempt
    stacks = sorted(stalls["root"].glob("run/sagemaker/*train0/attempt-1/*/opt/ml/checkpoints/_stalls/*/rank-*.txt"))
    assert [p.name for p in stacks] == ["rank-0.txt", "rank-1.txt", "rank-2.txt", "rank-3.txt"]
    assert "stall/injection.py" in stacks[-1].read_text()
