"""runctl list / logs / plan against the local emulator: the moto backends hold the executions, the jobs and
the log events the local jobs wrote under SageMaker's log group and stream names."""

from __future__ import annotations

import json
from pathlib import Path

import boto3
import pytest

from local_mode import spec_inputs
from local_mode.session import LocalSession
from pipeline_runs.clients import Clients
from runctl.cli import main as runctl

pytestmark = pytest.mark.slow


def _spec(bucket: str) -> dict:
    return {"version": 1, "name": "runctl-qa", "task": "question-answering",
            "model": f"s3://{bucket}/base-models/local-bert/",
            "data": {"train": {"s3": "datasets/runctl/train/"}, "validation": {"s3": "datasets/runctl/validation/"}},
            "compute": {"instance_type": "ml.g5.2xlarge", "instance_count": 1},
            "spot": {"enabled": True}, "checkpoint": {"every_steps": 100},
            "hyperparameters": {"max_steps": 6, "logging_steps": 2, "per_device_train_batch_size": 8}}


def _assert_list_shows_the_run(clients: Clients, common: list[str], run_id: str, capsys) -> None:
    # list: the run, its state, duration and cost
    assert runctl(["list", *common], clients=clients) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == ["RUN", "STATE", "STARTED", "(UTC)", "DURATION", "COST", "NOTE"]
    (row,) = [line for line in out if line.startswith(run_id)]
    assert " SUCCEEDED " in row and "$" in row and ":" in row


def _assert_logs_merged_in_time_order(clients: Clients, common: list[str], execution: str, capsys) -> None:
    assert runctl(["logs", execution, *common], clients=clients) == 0
    lines = capsys.readouterr().out.splitlines()
    marked = [line for line in lines if "[train attempt 0, algo-1] " in line]
    assert any("[train] step 6/6 (100%) loss=" in line for line in marked), lines[-20:]
    assert any("PROGRESS global_step=6" in line for line in marked)
    stamps = [line.split(" ", 1)[0] for line in lines if line[:2].isdigit()]
    assert stamps == sorted(stamps) and len(stamps) == len(lines)


def _assert_plan_checks_and_starts_nothing(s: LocalSession, clients: Clients, common: list[str], spec: dict,
                                           tmp_path: Path, capsys) -> None:
    # plan: the deployed settings (read from the Prepare function), storage checked, nothing started
    jobs_before = len(s.sagemaker.jobs)
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps(spec))
    assert runctl(["plan", str(spec_file), "--brief", *common], clients=clients) == 0
    out = capsys.readouterr().out
    assert "in environment dev (us-east-1): valid; checked spec, environment, requests, storage" in out
    assert "1 x ml.g5.2xlarge spot" in out and "total: $" in out
    # the shipped example names a Hub model: dev has no NAT, so pre-flight says why nothing would start
    assert runctl(["plan", "examples/question-answering.json", *common], clients=clients) == 1
    out = capsys.readouterr().out
    assert "PreflightError in environment dev: nothing would start." in out and "no internet access" in out
    assert len(s.sagemaker.jobs) == jobs_before


def test_list_logs_and_plan_against_the_emulator(dev_outdir: Path, tmp_path: Path, capsys) -> None:
    from local_mode.synthetic import build_model_dir

    with LocalSession(dev_outdir, tmp_path / "run") as s:
        spec = _spec(s.dep.data_bucket)
        inputs = tmp_path / "inputs"
        spec_inputs.write_spec_data(spec, inputs, parts=1, train_rows=64, eval_rows=16)
        build_model_dir("bert", inputs / "base-models" / "local-bert")
        s.upload_folder(inputs)
        outcome = s.run_spec(spec)
        assert outcome.status == "SUCCEEDED", outcome.cause
        run_id = outcome.output["result"]["run_id"]
        capsys.readouterr()
        region = s.dep.region
        clients = Clients(boto3.session.Session(region_name=region))
        common = ["--state-machine-arn", s.dep.fine_tune_arn, "--region", region]

        _assert_list_shows_the_run(clients, common, run_id, capsys)

        # logs: every line the training host wrote, merged in time order, marked with attempt and host
        execution = next(e["name"] for e in s.executions() if e["executionArn"] == outcome.execution_arn)
        _assert_logs_merged_in_time_order(clients, common, execution, capsys)

        _assert_plan_checks_and_starts_nothing(s, clients, common, spec, tmp_path, capsys)
