"""Ctrl-C during `python -m local_mode run` (issue: everything a user reads is true, point 4): SIGINT to the
command's process group, as a terminal sends it, while the training job runs. Every process of the run is gone
within seconds, no traceback is printed, the partial report is written and `runctl list --local` shows the run as
stopped (ABORTED, as Step Functions says of a stopped execution)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}


def _sigint_default() -> None:
    """SIGINT as a terminal's foreground command has it. A process started in the background by a shell without job
    control inherits SIGINT ignored (POSIX), and Python then leaves it ignored: when this test ran under such a
    parent, its Ctrl-C did nothing and the run trained on (seen in CI: /proc/<pid>/status SigIgn 0x...7, SIGINT
    ignored from the start, not lost by local mode)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_ctrl_c_stops_the_run_and_keeps_its_report(dev_outdir: Path, tmp_path: Path) -> None:
    data = tmp_path / "data"
    made = subprocess.run([sys.executable, "-m", "local_mode", "--cdk-out", str(dev_outdir), "data",
                           "text-classification", str(data), "--rows", "4000"], cwd=REPO, env=env(),
                          capture_output=True, text=True, timeout=600)
    assert made.returncode == 0, made.stderr[-2000:]
    spec_path = data / "text-classification.json"
    spec = json.loads(spec_path.read_text())
    spec["hyperparameters"]["max_steps"] = 100000  # it would train for a long time
    spec_path.write_text(json.dumps(spec))
    runs = tmp_path / "runs"
    proc = subprocess.Popen([sys.executable, "-m", "local_mode", "--cdk-out", str(dev_outdir), "--work-dir",
                             str(runs / "one"), "run", str(spec_path), "--data", str(data)], cwd=REPO, env=env(),
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
                            preexec_fn=_sigint_default)
    out: list[str] = []
    deadline = time.time() + 600
    assert proc.stdout is not None
    for line in proc.stdout:
        out.append(line)
        if "loss" in line and "step" in line or time.time() > deadline:
            break
    assert time.time() < deadline, "".join(out)[-3000:]
    group = psutil.Process(proc.pid).children(recursive=True)
    assert len(group) >= 2  # torchrun and its training process are running
    # a run in progress is never pruned, however old the rule
    pruned = subprocess.run([sys.executable, "-m", "runctl", "prune", "--local", "--keep", "0", "--local-runs",
                             str(runs)], cwd=REPO, env=env(), capture_output=True, text=True, timeout=120)
    assert pruned.returncode == 0 and "(in progress)" in pruned.stdout, pruned.stdout + pruned.stderr
    assert (runs / "one").is_dir()
    interrupted = time.time()
    os.killpg(proc.pid, signal.SIGINT)
    rest, _ = proc.communicate(timeout=120)
    took = time.time() - interrupted
    print(f"Ctrl-C to exit: {took:.1f} s")
    text = "".join(out) + rest
    assert proc.returncode != 0, text[-3000:]
    assert took < 20, (took, text[-3000:])  # within seconds (the partial report included)
    assert "Traceback" not in rest and "KeyboardInterrupt" not in rest, rest[-3000:]
    assert "Ctrl-C: stopping the run" in rest and "execution ABORTED" in rest, rest[-3000:]
    time.sleep(2)
    assert [p.pid for p in group if p.is_running() and p.status() != psutil.STATUS_ZOMBIE] == []
    record = json.loads((runs / "one" / "report" / "run.json").read_text())  # the partial report
    assert record["status"] == "ABORTED"
    listed = subprocess.run([sys.executable, "-m", "runctl", "list", "--local", "--local-runs", str(runs)], cwd=REPO,
                            env=env(), capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "ABORTED" in listed.stdout, listed.stdout + listed.stderr
