"""A run that learned nothing says so everywhere a user looks: `python -m local_mode run` (a subprocess) with
learning rate 0 for every task, on the data and tiny model `local_mode data` writes. Each run completes (its
model is registered) and is "not learned" (training changed nothing), in its summary, the tally of the runs and
`runctl list --local`, which shows it as COMPLETED, never SUCCEEDED."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]


def _cli(module: str, *args: str, timeout: float = 1200) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run([sys.executable, "-m", module, *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_learning_rate_0_is_not_learned_for_every_task(dev_outdir: Path, tmp_path: Path) -> None:
    from local_mode import task_registry

    data, work = tmp_path / "data", tmp_path / "runs"
    paths = []
    for task in task_registry.registry():
        done = _cli("local_mode", "--cdk-out", str(dev_outdir), "data", task, str(data), "--rows", "64")
        assert done.returncode == 0, done.stderr
        spec = json.loads((data / f"{task}.json").read_text())
        spec["compute"]["instance_count"] = 1
        spec["hyperparameters"].update(learning_rate=0, max_steps=3, verdict_eval_samples=16, logging_steps=1)
        paths.append(data / f"{task}.json")
        paths[-1].write_text(json.dumps(spec))
    done = _cli("local_mode", "--cdk-out", str(dev_outdir), "--work-dir", str(work), "run", *map(str, paths),
                "--data", str(data))
    out = done.stdout
    assert done.returncode == 0, out[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in out + done.stderr
    tally = out.splitlines()[-1]
    assert tally.startswith("runs: ") and tally.count("completed, but the model did not learn in ") == len(paths), \
        tally
    run_ids = []
    for index, path in enumerate(paths):
        record = json.loads((work / f"{index + 1:02d}-{path.stem}" / "report" / "run.json").read_text())
        judged = record["result"]["verdict"]
        assert record["status"] == "SUCCEEDED" and judged["verdict"] == "not-learned", judged
        assert judged["text"].startswith("not learned (training changed nothing: the same scores and evaluation loss "
                                         "as before training): ") and "95% interval +0 to +0" in judged["text"]
        assert f"verdict: {judged['text']}" in out
        run_ids.append(record["result"]["run_id"])
    listing = _cli("runctl", "list", "--local", "--local-runs", str(work))
    assert listing.returncode == 0, listing.stderr
    rows = [row for row in listing.stdout.splitlines() if row.split(" ", 1)[0] in run_ids]
    assert len(rows) == len(paths) and all(" COMPLETED " in row and row.endswith("  not learned") for row in rows), \
        listing.stdout
