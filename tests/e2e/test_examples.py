"""Every examples/*.json runs locally as shipped, with one command (`python -m local_mode example --all`, one
emulator for all of them): generated data of the shape each spec reads, a tiny model of the same family in
place of the Hub model, and only the documented local overrides, each said aloud."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from hfsm_lambda.runs import verdict

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
EXAMPLES = sorted(p.stem for p in (REPO / "examples").glob("*.json"))
HEADLINE = {"question-answering": "eval_f1", "text-classification": "eval_accuracy", "summarization": "eval_rougeL"}


def _check_console_blocks(out: str) -> None:
    # the console: no stray blank lines, counts that match, events in time order, a line per start-up phase
    assert "\n\n\n" not in out
    for block in out.split("\nexample ")[1:]:
        said = int(block.split(" local override(s)", 1)[0].rsplit(" ", 1)[1])
        listed = block.split("(the file is not changed):\n", 1)[1].split("\ngenerated inputs:", 1)[0]
        assert len(listed.splitlines()) == said and f"({said} local overrides, listed above)" in block
        clocks = [float(line.split("s]", 1)[0].split("[", 1)[1]) for line in block.splitlines()
                  if line.startswith("  [") and "s] " in line]
        assert clocks == sorted(clocks), block[:3000]
        assert block.index("state Prepare") < block.index("state StartTraining") < block.index(": Downloading")
        for phase in ("train.py started: importing torch", "data loaded: ", "model loaded: ", "tokenized ", "no checkpoint to restore"):
            assert f"train0: [setup] {phase}" in block, phase


def _assert_overrides_said_aloud(out: str) -> None:
    # the overrides, said aloud: the Hub models, the tokenizer example's 4 hosts
    assert "model: distilbert/distilbert-base-uncased is a Hugging Face Hub model" in out
    assert "substituted a tiny distilbert of the same architecture family" in out
    assert "substituted a tiny bart of the same architecture family" in out
    assert "tokenizer.instance_count: 4 is over environment dev's limit of 2: capped to 2" in out
    assert "distribution.strategy: fsdp -> ddp" not in out  # FSDP runs as written (FSDP2 on the CPU ranks)


def _assert_example_succeeded(name: str, spec: dict, record: dict, tmp_path: Path) -> None:
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


def _assert_ledger_adds_up(name: str, record: dict) -> None:
    # every billed instance-second of its training in a named part; unaccounted under 5%
    ledger = record["result"]["goodput"]
    assert sum(ledger["parts"].values()) == pytest.approx(ledger["billed_seconds"], abs=0.01), name
    assert ledger["billed_seconds"] == ledger["reported_billed_seconds"], name
    count = record["jobs"][-1]["ResourceConfig"]["InstanceCount"]  # TrainingTimeInSeconds: whole seconds
    assert abs(ledger["transitions_billed_seconds"] - ledger["billed_seconds"]) <= max(
        0.02 * ledger["billed_seconds"], count * 1.0), name
    assert abs(ledger["parts"]["unaccounted"]) < 0.05 * ledger["billed_seconds"], (name, ledger["parts"])


def _assert_each_verdict_is_said(tmp_path: Path, out: str) -> dict:
    # every example learns in its local run or says plainly that the run is too short to judge, with the figures;
    # none is "not learned" beside SUCCEEDED
    results = {}
    for name in EXAMPLES:
        record = json.loads((tmp_path / name / "report" / "run.json").read_text())
        result = record["result"]
        judged = result["verdict"]
        assert judged["verdict"] in ("learned", "not-judged"), (name, judged["text"])
        if judged["verdict"] == "not-judged":
            assert judged["text"].startswith(f"not judged: {judged['steps']} steps, too short to tell"), judged
        assert "95% interval" in judged["text"] and f"verdict: {judged['text']}" in out
        report = (tmp_path / name / "report" / "report.md").read_text()
        assert report.startswith(f"# Run {result['run_id']}: SUCCEEDED, {verdict.short(judged)}\n")
        results[name] = result
    assert (tmp_path / "summarization" / "report" / "eval.png").stat().st_size > 1000
    return results["summarization"]


def _check_runctl_reads_the_local_runs(tmp_path: Path, result: dict) -> None:
    # runctl reads the finished local runs as it reads AWS runs: list (with the verdicts), status, logs
    def runctl(*args: str) -> str:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
        done = subprocess.run([sys.executable, "-m", "runctl", *args, "--local", "--local-runs", str(tmp_path)],
                              cwd=REPO, capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout

    rows = runctl("list").splitlines()
    assert len(rows) == 1 + len(EXAMPLES) and all(" SUCCEEDED " in row for row in rows[1:])
    assert all(row.endswith("  learned") or re.search(r"  not judged: \d+ steps$", row) for row in rows[1:]), rows
    (row,) = [row for row in rows if row.startswith(result["run_id"])]
    assert row.endswith(f"  {verdict.short(result['verdict'])}")
    status = runctl("status", result["run_id"])
    assert f"Verdict:    {result['verdict']['text']}" in status
    logs = runctl("logs", result["run_id"]).splitlines()
    assert any("[train attempt 0, algo-2] " in line for line in logs)
    assert any("[train] step 20/20 (100%) loss=" in line for line in logs)


def _check_a_closed_pipe_ends_runctl_quietly(tmp_path: Path, result: dict) -> None:
    # `runctl logs RUN | head -1`: the reader closes the pipe early; that ends runctl quietly, not with a traceback
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    piped = subprocess.Popen([sys.executable, "-m", "runctl", "logs", result["run_id"], "--local", "--local-runs",
                              str(tmp_path)], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert piped.stdout.readline().strip()
    piped.stdout.close()
    assert piped.wait(timeout=120) == 0 and b"Traceback" not in piped.stderr.read()


def test_every_example_runs_locally_as_shipped(dev_outdir: Path, tmp_path: Path) -> None:
    shipped = {name: (REPO / "examples" / f"{name}.json").read_bytes() for name in EXAMPLES}
    done = subprocess.run([sys.executable, "-m", "local_mode", "--cdk-out", str(dev_outdir), "--work-dir",
                           str(tmp_path), "example", "--all"], cwd=REPO, capture_output=True, text=True,
                          timeout=1500)
    out = done.stdout
    assert done.returncode == 0, out[-4000:] + done.stderr[-3000:]
    assert "Traceback" not in out + done.stderr
    summary = out.splitlines()[-1]
    # the tally shows each verdict beside the status
    assert summary.startswith("examples: "), summary
    for part, name in zip(summary.removeprefix("examples: ").split("; "), EXAMPLES, strict=True):
        assert re.fullmatch(rf"{name} SUCCEEDED, (learned|not judged: \d+ steps) in \d+ s", part), summary

    _check_console_blocks(out)
    _assert_overrides_said_aloud(out)

    for name in EXAMPLES:
        spec = json.loads(shipped[name])
        record = json.loads((tmp_path / name / "report" / "run.json").read_text())
        _assert_example_succeeded(name, spec, record, tmp_path)
        _assert_ledger_adds_up(name, record)
        # the file itself is unchanged
        assert (REPO / "examples" / f"{name}.json").read_bytes() == shipped[name]

    result = _assert_each_verdict_is_said(tmp_path, out)
    _check_runctl_reads_the_local_runs(tmp_path, result)
    _check_a_closed_pipe_ends_runctl_quietly(tmp_path, result)
