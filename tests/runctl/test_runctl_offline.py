"""runctl without AWS: `plan --env NAME` from cdk.out (a subprocess with no AWS variables: any AWS call would
fail), `stage-model` against moto with a local folder standing in for the Hub download, and the status lines of
a run that did not beat its trivial baseline."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from pipeline_runs.clients import Clients
from runctl import observe, stage_model
from runctl.cli import _status_lines, main

REPO = Path(__file__).resolve().parents[2]
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def offline_runctl(*args: str, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """runctl as a user without an AWS account runs it: no credentials, no region, and an endpoint that refuses."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("AWS_") and k not in ("RUNCTL_STATE_MACHINE_ARN", "PYTHONPATH")}
    env.update(AWS_ENDPOINT_URL="http://127.0.0.1:9", AWS_CONFIG_FILE="/nonexistent",
               AWS_SHARED_CREDENTIALS_FILE="/nonexistent")
    return subprocess.run([sys.executable, "-m", "runctl", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.mark.slow
def test_plan_env_dev_from_cdk_out_without_aws(dev_outdir: Path, prod_outdir: Path, tmp_path: Path) -> None:
    spec = json.loads((REPO / "examples" / "text-classification.json").read_text())
    spec["model"] = "s3://hfsm-dev-data-111111111111-us-east-1/base-models/roberta-base/"
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    done = offline_runctl("plan", str(tmp_path / "spec.json"), "--env", "dev", "--cdk-out", str(dev_outdir))
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "in environment dev (us-east-1): valid; checked spec, environment and requests against the settings in " \
           f"{dev_outdir} (synthesized; no AWS call)" in out
    assert "2 x ml.g5.12xlarge spot, max 4h00m" in out and "total: $" in out
    request = json.loads(out.split("# CreateTrainingJob (training attempt 0)\n", 1)[1].split("\n# ", 1)[0])
    assert request["RoleArn"] == "arn:aws:iam::111111111111:role/hfsm-dev-sagemaker-execution"
    assert request["VpcConfig"]["Subnets"][0].startswith("<subnet id of hfsm-dev-network/")  # assigned at deploy

    # the shipped example: the Hub model cannot download in dev, said before anything starts
    done = offline_runctl("plan", "examples/question-answering.json", "--env", "dev", "--cdk-out", str(dev_outdir))
    assert done.returncode == 1 and "PreflightError in environment dev: nothing would start." in done.stdout
    assert "no internet access (no NAT gateway)" in done.stdout and "AWS error" not in done.stderr
    assert "(`python -m runctl stage-model distilbert/distilbert-base-uncased --env dev` prints the s3:// URI)" \
        in done.stdout  # the command that stages it

    done = offline_runctl("plan", str(tmp_path / "spec.json"), "--env", "dev", "--cdk-out", str(prod_outdir))
    assert done.returncode == 2
    assert done.stderr.strip() == (f"runctl: error: {prod_outdir} holds environment 'prod', not 'dev': run `make "
                                   "synth ENV=dev` (it replaces cdk.out), or plan with --env prod")
    done = offline_runctl("plan", str(tmp_path / "spec.json"), "--env", "dev", "--cdk-out", str(tmp_path / "none"))
    assert done.returncode == 2 and "run `make synth ENV=dev` (no AWS account needed)" in done.stderr

    # stage-model reads the data bucket's name from the same cdk.out
    assert stage_model.data_bucket(dev_outdir, "dev") == ("hfsm-dev-data-111111111111-us-east-1", "us-east-1")


def _model_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "model.safetensors").write_bytes(b"\0" * 1000)
    (folder / "tokenizer.json").write_text("{}")
    return folder


def test_stage_model_downloads_with_huggingface_hub_and_uploads_under_base_models(tmp_path, capsys, monkeypatch):
    """The Hub download is huggingface_hub.snapshot_download; a folder named after a commit stands in for it."""
    snapshot = _model_folder(tmp_path / "hub-cache" / "snapshots" / COMMIT)
    asked = {}

    def fake_snapshot_download(**kwargs):
        asked.update(kwargs)
        return str(snapshot)

    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_snapshot_download)
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="hfsm-dev-data")
        clients = Clients(sfn=object(), s3=s3)
        code = main(["stage-model", "google-bert/bert-base-uncased", "--bucket", "hfsm-dev-data"], clients=clients)
        out = capsys.readouterr().out
        assert code == 0, out
        uri = f"s3://hfsm-dev-data/base-models/google-bert/bert-base-uncased/{COMMIT}/"
        assert asked["repo_id"] == "google-bert/bert-base-uncased" and asked["revision"] is None
        assert "*.h5" in asked["ignore_patterns"]  # no TensorFlow/Flax/ONNX weights
        assert f"to {uri}" in out and f'put it in the run spec: "model": "{uri}"' in out
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="hfsm-dev-data")["Contents"])
        prefix = uri.split("/", 3)[3]
        assert keys == [prefix + n for n in ("config.json", "model.safetensors", "tokenizer.json")]

        # a folder on this machine instead of a download; a folder that is not a model is refused
        code = main(["stage-model", "acme/tuned", "--bucket", "hfsm-dev-data", "--from-dir",
                     str(_model_folder(tmp_path / "mine"))], clients=clients)
        assert code == 0 and "s3://hfsm-dev-data/base-models/acme/tuned/local/" in capsys.readouterr().out
        (tmp_path / "empty").mkdir()
        code = main(["stage-model", "acme/tuned", "--bucket", "hfsm-dev-data", "--from-dir", str(tmp_path / "empty")],
                    clients=clients)
        assert code == 2 and "has no config.json: not a model folder" in capsys.readouterr().err


def test_stage_model_leaves_pickles_out_and_refuses_a_pickle_only_model(tmp_path, capsys):
    """Issue 36, finding 5: the training code loads safetensors only unless the spec opts in, so stage-model
    uploads no pickle by default and refuses a model that has nothing else; --allow-pickle uploads them."""
    mixed = _model_folder(tmp_path / "mixed")
    (mixed / "pytorch_model.bin").write_bytes(b"pickle")
    (mixed / "training_args.bin").write_bytes(b"pickle")
    only_pickle = tmp_path / "only-pickle"
    only_pickle.mkdir()
    (only_pickle / "config.json").write_text('{"model_type": "bert"}')
    (only_pickle / "pytorch_model.bin").write_bytes(b"pickle")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="hfsm-dev-data")
        clients = Clients(sfn=object(), s3=s3)
        code = main(["stage-model", "acme/mixed", "--bucket", "hfsm-dev-data", "--from-dir", str(mixed)],
                    clients=clients)
        out = capsys.readouterr().out
        assert code == 0 and "left out pickle files: pytorch_model.bin, training_args.bin" in out
        keys = sorted(o["Key"].rsplit("/", 1)[1] for o in s3.list_objects_v2(Bucket="hfsm-dev-data")["Contents"])
        assert keys == ["config.json", "model.safetensors", "tokenizer.json"]
        code = main(["stage-model", "acme/old", "--bucket", "hfsm-dev-data", "--from-dir", str(only_pickle)],
                    clients=clients)
        assert code == 2 and "has no safetensors weights" in capsys.readouterr().err
        code = main(["stage-model", "acme/old", "--bucket", "hfsm-dev-data", "--from-dir", str(only_pickle),
                     "--allow-pickle"], clients=clients)
        assert code == 0, capsys.readouterr()
        assert "base-models/acme/old/local/pytorch_model.bin" in {
            o["Key"] for o in s3.list_objects_v2(Bucket="hfsm-dev-data")["Contents"]}


def test_status_of_a_run_that_did_not_learn() -> None:
    info = {"run_id": "r-1", "status": "SUCCEEDED", "execution_arn": "arn:x", "started": "t", "console_url": "u",
            "result": {"model_uri": "s3://m", "metrics": {"eval_rougeL": 0.0},
                       "verdict": {"verdict": "not-learned", "text": "not learned (...): rougeL 0 ..."}}}
    lines = _status_lines(info)
    assert "Status:     COMPLETED, but the model did not learn (execution SUCCEEDED)" in lines
    assert "Verdict:    not learned (...): rougeL 0 ..." in lines
    assert _status_lines({**info, "report": "/r/report.md"})[-1] == "Report:     /r/report.md"


def test_list_shows_the_verdict_beside_the_state() -> None:
    row = {"run_id": "r-1", "execution": "r-1", "status": "SUCCEEDED", "started": None, "seconds": 61.0,
           "cost_usd": 0.22, "billable_instance_seconds": 114, "error": None, "verdict": "not-learned"}
    lines = observe.list_lines([row, {**row, "run_id": "r-2", "verdict": "learned"},
                                {**row, "run_id": "r-3", "status": "RUNNING", "verdict": None},
                                {**row, "run_id": "r-4", "verdict": "not-judged",
                                 "verdict_text": "not judged: 20 steps"}])
    assert lines[1].split()[1] == "COMPLETED" and lines[1].split(None, 5)[-1] == "not learned"
    assert " SUCCEEDED " in lines[2] and lines[2].endswith("learned")
    assert lines[4].endswith("not judged: 20 steps")
    assert lines[3].endswith("in progress")
