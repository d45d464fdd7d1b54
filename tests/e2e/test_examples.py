"""Every examples/*.json runs locally as shipped, with one command (`python -m local_mode example --all`, one
emulator for all of them): generated data of the shape each spec reads, a tiny model of the same family in
place of the Hub model, and only the documented local overrides, each said aloud."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.stem for p in (REPO / "examples").glob("*.json"))
HEADLINE = {"question-answering": "eval_f1", "text-classification": "eval_accuracy", "summarization": "eval_rougeL"}


def test_every_example_runs_locally_as_shipped(dev_outdir: Path, tmp_path: Path) -> None:
    shipped = {name: (REPO / "examples" / f"{name}.json").read_bytes() for name in EXAMPLES}
    done = subprocess.run([sys.executable, "-m", "local_mode", "--cdk-out", str(dev_outdir), "--work-dir",
                           str(tmp_path), "example", "--all"], cwd=REPO, capture_output=True, text=True,
                          timeout=1500)
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-3000:]
    assert "Traceback" not in out + done.stderr
    summary = out.splitlines()[-1]
    assert summary.startswith("examples: ") and all(f"{name} SUCCEEDED in " in summary for name in EXAMPLES)

    # the overrides, said aloud: the Hub models, the tokenizer example's 4 hosts
    assert "model: distilbert/distilbert-base-uncased is a Hugging Face Hub model" in out
    assert "substituted a tiny distilbert of the same architecture family" in out
    assert "substituted a tiny bart of the same architecture family" in out
    assert "tokenizer.instance_count: 4 is over environment dev's limit of 2: capped to 2" in out
    assert "distribution.strategy: fsdp -> ddp" not in out  # FSDP runs as written (FSDP2 on the CPU ranks)

    for name in EXAMPLES:
        spec = json.loads(shipped[name])
        record = json.loads((tmp_path / name / "report" / "run.json").read_text())
        assert record["status"] == "SUCCEEDED", (name, record["error"], record["cause"])
        metrics = record["result"]["metrics"]
        headline = HEADLINE[spec["task"]]
        assert headline in metrics and headline.replace("eval_", "eval_baseline_") in metrics, (name, metrics)
        assert (tmp_path / name / "artifacts" / "model" / "config.json").exists()
        assert "tokenizer" not in spec or any("tokred0" in j.get("ProcessingJobName", "") for j in record["jobs"])
        if spec.get("distribution", {}).get("strategy") == "fsdp":  # sharded for real: the leader's log says so
            logs = [p.read_text() for p in tmp_path.glob(f"sagemaker/*-{spec['name']}-*/logs/attempt-*/algo-1.log")]
            assert logs and all("FSDP2 on CPU: 2 ranks" in log and "consolidated FSDP2 model written" in log
                                for log in logs), name
        # every billed instance-second of its training in a named part; unaccounted under 5%
        ledger = record["result"]["goodput"]
        assert sum(ledger["parts"].values()) == pytest.approx(ledger["billed_seconds"], abs=0.01), name
        assert ledger["billed_seconds"] == ledger["reported_billed_seconds"], name
        count = record["jobs"][-1]["ResourceConfig"]["InstanceCount"]  # TrainingTimeInSeconds: whole seconds
        assert abs(ledger["transitions_billed_seconds"] - ledger["billed_seconds"]) <= max(
            0.02 * ledger["billed_seconds"], count * 1.0), name
        assert abs(ledger["parts"]["unaccounted"]) < 0.05 * ledger["billed_seconds"], (name, ledger["parts"])
        # the file itself is unchanged
        assert (REPO / "examples" / f"{name}.json").read_bytes() == shipped[name]
