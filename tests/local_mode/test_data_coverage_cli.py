"""Every object accounted for, as a user meets it: `python -m local_mode run` (a subprocess) with

- a ShardedByS3Key channel over 2 instances that also holds a `.txt` file: refused in Prepare, naming the object and
  the fix, before any job starts (SageMaker could give one instance only that file);
- a run whose training data is sharded over 2 hosts and whose validation channel holds a `README.txt`: Prepare
  lists what will be skipped, and the summary shows the data coverage, rows and objects per host against the
  channel's totals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow
REPO = Path(__file__).resolve().parents[2]
BUCKET = "hfsm-dev-data-111111111111-us-east-1"


def _cli(*args: str, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    return subprocess.run([sys.executable, "-m", "local_mode", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=timeout, env=env)


def test_a_sharded_channel_with_an_unreadable_object_is_refused_and_coverage_is_reported(dev_outdir: Path,
                                                                                          tmp_path: Path) -> None:
    from local_mode import synthetic

    data, specs, work = tmp_path / "data", tmp_path / "specs", tmp_path / "runs"
    specs.mkdir()
    done = _cli("--cdk-out", str(dev_outdir), "data", "text-classification", str(data))
    assert done.returncode == 0, done.stderr
    base = json.loads((data / "text-classification.json").read_text())
    base["compute"]["instance_count"] = 2
    base["hyperparameters"] = {**base["hyperparameters"], "max_steps": 4, "verdict_eval_samples": 8}
    train = base["data"]["train"]["s3"]
    synthetic.write_jsonl(data / "datasets/mixed/train/part-0.jsonl", synthetic.cls_examples(40, 1))
    synthetic.write_jsonl(data / "datasets/mixed/train/part-1.jsonl", synthetic.cls_examples(40, 2))
    (data / "datasets/mixed/train/notes.txt").write_text("how this data was made\n")
    refused = {**base, "data": {**base["data"], "train": {"s3": "datasets/mixed/train/",
                                                          "distribution": "ShardedByS3Key"}}}
    validation = base["data"]["validation"]["s3"]
    (data / validation / "README.txt").write_text("the validation split\n")
    covered = {**base, "data": {**base["data"], "train": {"s3": train, "distribution": "ShardedByS3Key"}}}
    paths = []
    for name, spec in (("refused", refused), ("covered", covered)):
        paths.append(specs / f"{name}.json")
        paths[-1].write_text(json.dumps(spec))
    done = _cli("--cdk-out", str(dev_outdir), "--work-dir", str(work), "run", *map(str, paths), "--data", str(data))
    out = done.stdout
    assert done.returncode == 1, out[-3000:] + done.stderr[-3000:]
    assert "Traceback" not in out + done.stderr

    record = json.loads((work / "01-refused" / "report" / "run.json").read_text())
    assert record["error"] == "PreflightError" and record["failed_state"] == "Prepare", record["cause"]
    assert record["jobs"] == []  # refused before any job started
    problem = ("data.train: ShardedByS3Key, and SageMaker decides which instance gets which object, so one may get "
               "only objects the job cannot read and train on nothing: keep only .csv, .json, .jsonl, .ndjson, "
               f".parquet, .pq files (.gz too) under s3://{BUCKET}/datasets/mixed/train/, moving the rest to another "
               "prefix, or use FullyReplicated. Not read: 1 object(s): notes.txt")
    assert problem in json.loads(record["cause"])["errorMessage"] and "Not read: 1 object(s): notes.txt" in out

    record = json.loads((work / "02-covered" / "report" / "run.json").read_text())
    assert record["status"] == "SUCCEEDED", record["cause"]
    coverage = record["result"]["data_coverage"]
    channel = coverage["channels"]["train"]
    assert channel["sharded"] and [h["host"] for h in channel["hosts"]] == ["algo-1", "algo-2"]
    assert channel["objects"] == channel["read"] == sum(h["objects"] for h in channel["hosts"]) >= 2
    assert channel["rows"] == sum(h["rows"] for h in channel["hosts"]) and all(h["rows"] for h in channel["hosts"])
    assert coverage["channels"]["validation"]["hosts"][0]["skipped"] == [
        {"name": "README.txt", "reason": "an extension the reader does not take"}]
    assert coverage["prepare_skipped"] == [
        f"data.validation: 1 object(s) under s3://{BUCKET}/{validation} will be skipped: README.txt (an extension "
        "the reader does not take)"]
    assert "Data coverage (rows and objects read per host, against the channel's totals):" in out
    assert f"  train (ShardedByS3Key: each host its own objects): {channel['rows']:,} rows from " \
           f"{channel['read']} of {channel['objects']} object(s)" in out
    assert "    skipped on algo-1: README.txt (an extension the reader does not take)" in out
