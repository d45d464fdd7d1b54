"""Every runctl error path a user can meet without AWS (issue: everything a user reads is true, point 4), through the
installed command in a subprocess with no AWS variables, no credentials, an endpoint that refuses and a Hub that
cannot be reached: each ends with one line naming what is wrong and the fix, never a traceback. Also: global
options before or after the command, status as text by default and JSON with --json, stage-model and plan with a
model folder on disk and no Hub id."""

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
from runctl.cli import _parser, main

REPO = Path(__file__).resolve().parents[2]
RUNCTL = Path(sys.executable).parent / "runctl"


def offline(*args: str, cwd: Path = REPO, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("AWS_", "HF_")) and k not in ("RUNCTL_STATE_MACHINE_ARN", "PYTHONPATH")}
    env.update(AWS_ENDPOINT_URL="http://127.0.0.1:9", AWS_CONFIG_FILE="/nonexistent", AWS_MAX_ATTEMPTS="1",
               AWS_SHARED_CREDENTIALS_FILE="/nonexistent", AWS_EC2_METADATA_DISABLED="true",
               HF_ENDPOINT="http://127.0.0.1:9", HF_HOME=str(cwd / ".hf-home-none"))  # no Hub: nothing downloads
    env.update(extra or {})
    return subprocess.run([str(RUNCTL), *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)


def model_folder(folder: Path) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "bert"}')
    (folder / "model.safetensors").write_bytes(b"\0" * 100)
    return folder


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    spec = json.loads((REPO / "examples" / "text-classification.json").read_text())
    (tmp_path / "good.json").write_text(json.dumps(spec))
    model_folder(tmp_path / "my-model")
    (tmp_path / "local-model.json").write_text(json.dumps({**spec, "model": "my-model"}))
    (tmp_path / "broken.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[]")
    (tmp_path / "not-a-model").mkdir()
    (tmp_path / "runs").mkdir()
    return {"dir": tmp_path, "spec": tmp_path / "good.json", "local": tmp_path / "local-model.json"}


CASES = {
    # name: (argv with {dir} for the temporary folder, exit code, what stderr says)
    "no region": (["status", "demo-1"], 2, "no AWS region configured"),
    "no credentials": (["--region", "us-east-1", "logs", "demo-1"], 2, "no AWS credentials configured"),
    "unreachable AWS": (["list", "--region", "us-east-1"], 1, "runctl: AWS error: Could not connect"),
    "unknown command": (["lsit"], 2, "invalid choice: 'lsit'"),
    "missing spec file": (["plan", "{dir}/none.json"], 2, "cannot read {dir}/none.json: No such file"),
    "spec not JSON": (["plan", "{dir}/broken.json"], 2, "{dir}/broken.json is not valid JSON"),
    "spec not an object": (["submit", "{dir}/list.json", "--region", "us-east-1"], 2, "a run spec is a JSON object"),
    "no cdk.out": (["plan", "{dir}/good.json", "--cdk-out", "{dir}/none"], 2, "run `make synth ENV=dev`"),
    "settings file missing": (["plan", "{dir}/good.json", "--settings", "{dir}/none", "--offline"], 2,
                              "cannot read {dir}/none"),
    "submit a local model": (["submit", "{dir}/local-model.json", "--region", "us-east-1"], 2,
                             "runctl stage-model --from-dir {dir}/my-model"),
    "stage-model with nothing": (["stage-model", "--bucket", "b"], 2, "name a Hugging Face Hub id"),
    "stage-model bad id": (["stage-model", "not an id", "--bucket", "b"], 2, "is not a Hugging Face Hub id"),
    "stage-model no network": (["stage-model", "acme/model", "--bucket", "b", "--region", "us-east-1"], 2,
                               "cannot download acme/model from the Hugging Face Hub"),
    "stage-model missing folder": (["stage-model", "--from-dir", "{dir}/none", "--bucket", "b"], 2,
                                   "{dir}/none is not a folder"),
    "stage-model not a model": (["stage-model", "--from-dir", "{dir}/not-a-model", "--bucket", "b"], 2,
                                "has no config.json"),
    "stage-model revision without id": (["stage-model", "--from-dir", "{dir}/my-model", "--revision", "v1",
                                         "--bucket", "b"], 2, "--revision names a Hub revision"),
    "stage-model no cdk.out": (["stage-model", "--from-dir", "{dir}/my-model", "--cdk-out", "{dir}/none"], 2,
                               "(or pass --bucket)"),
    "stage-model no credentials": (["stage-model", "--from-dir", "{dir}/my-model", "--bucket", "b", "--region",
                                    "us-east-1"], 2, "no AWS credentials configured"),
    "no local runs": (["list", "--local", "--local-runs", "{dir}/none"], 2, "no local runs under {dir}/none"),
    "unknown local run": (["status", "nope", "--local", "--local-runs", "{dir}/runs"], 2, "no local run 'nope'"),
    "stop a local run": (["stop", "x", "--local"], 2, "Ctrl-C stops it"),
    "submit --local": (["--local", "submit", "{dir}/good.json"], 2, "python -m local_mode run SPEC --data DIR"),
    "stage-model --local": (["stage-model", "--local", "--from-dir", "{dir}/my-model"], 2,
                            "put the folder's path in the spec's `model`"),
    "prune without --local": (["prune", "--older-than", "7d"], 2, "prune deletes local runs (add --local)"),
    "prune without a rule": (["prune", "--local", "--local-runs", "{dir}/runs"], 2, "--older-than AGE"),
    "prune bad age": (["prune", "--local", "--older-than", "7x", "--local-runs", "{dir}/runs"], 2,
                      "a number and a unit"),
    "bad run id": (["status", "not a run!", "--state-machine-arn",
                    "arn:aws:states:us-east-1:111111111111:stateMachine:x", "--region", "us-east-1"], 2,
                   "is neither an execution ARN nor a run id"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_error_path_names_the_fix_without_a_traceback(case: str, files: dict[str, Path]) -> None:
    argv, code, message = CASES[case]
    extra = {} if case not in ("no credentials", "stage-model no credentials") else {"AWS_DEFAULT_REGION": "us-east-1"}
    if case == "unreachable AWS":
        extra = {"AWS_ACCESS_KEY_ID": "x", "AWS_SECRET_ACCESS_KEY": "y"}  # credentials, but no network to AWS
    done = offline(*[a.format(dir=files["dir"]) for a in argv], extra=extra)
    assert done.returncode == code, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    assert message.format(dir=files["dir"]) in done.stderr, done.stderr[-2000:]
    assert len(done.stderr.strip().splitlines()) <= (12 if code == 2 and "invalid choice" in message else 3)


@pytest.mark.parametrize("command", [["status", "r1"], ["list"], ["logs", "r1"], ["stop", "r1"], ["submit", "s.json"],
                                     ["plan", "s.json"], ["stage-model", "a/b"], ["prune", "--keep", "2"]])
def test_global_options_work_before_or_after_the_command(command: list[str]) -> None:
    options = ["--json", "--region", "eu-west-1", "--profile", "p", "--env", "prod", "--project", "x",
               "--local-runs", "runs", "--cdk-out", "out", "--state-machine-arn", "arn:sm"]
    expected = {"json": True, "region": "eu-west-1", "profile": "p", "env": "prod", "project": "x",
                "local_runs": Path("runs"), "cdk_out": Path("out"), "state_machine_arn": "arn:sm"}
    for argv in (options + command, command + options, options[:5] + command + options[5:]):
        args = vars(_parser().parse_args(argv))
        assert {k: args[k] for k in expected} == expected, argv
    for argv in (["--local", *command], [*command, "--local"]):
        assert _parser().parse_args(argv).local is True
    defaults = vars(_parser().parse_args(command))
    assert defaults["json"] is False and defaults["local"] is False and defaults["region"] is None
    assert defaults["local_runs"] == Path(".local-runs") and defaults["cdk_out"] == Path("cdk.out")


def test_status_prints_text_and_json_with_json(tmp_path: Path) -> None:
    record = {"execution_arn": "arn:aws:states:us-east-1:1:execution:sm:run-x",
              "status": {"run_id": "demo-1", "status": "ABORTED", "execution_arn": "arn:...:run-x",
                         "started": "2026-01-01 00:00:00+00:00", "error": "States.Aborted", "cause": "Ctrl-C",
                         "console_url": "https://console"}, "row": None, "jobs": [], "log_events": []}
    (tmp_path / "one" / "report").mkdir(parents=True)
    (tmp_path / "one" / "report" / "runctl.json").write_text(json.dumps(record))
    text = offline("status", "demo-1", "--local", "--local-runs", str(tmp_path))
    assert text.returncode == 0, text.stderr
    assert text.stdout.startswith("Run:        demo-1\nStatus:     ABORTED\n") and "{" not in text.stdout
    for argv in (["--json", "status", "demo-1", "--local"], ["status", "demo-1", "--local", "--json"]):
        done = offline(*argv, "--local-runs", str(tmp_path))
        assert json.loads(done.stdout) == record["status"], done.stderr


def test_stage_model_and_plan_take_a_model_folder_without_a_hub_id(tmp_path: Path, capsys) -> None:
    folder = model_folder(tmp_path / "My Model")
    (folder / "pytorch_model.bin").write_bytes(b"pickle")
    with mock_aws():
        s3 = boto3.client("s3", region_name="us-east-1")
        s3.create_bucket(Bucket="hfsm-dev-data")
        clients = Clients(sfn=object(), s3=s3)
        assert main(["stage-model", "--from-dir", str(folder), "--bucket", "hfsm-dev-data"], clients=clients) == 0
        out = capsys.readouterr().out
        keys = sorted(o["Key"] for o in s3.list_objects_v2(Bucket="hfsm-dev-data")["Contents"])
    prefix = keys[0].rsplit("/", 1)[0] + "/"
    assert prefix.startswith("base-models/local/my-model/") and len(prefix.split("/")[3]) == 12  # content digest
    assert keys == [prefix + "config.json", prefix + "model.safetensors"]
    assert f'"model": "s3://hfsm-dev-data/{prefix}"' in out
    # the same content gives the same place; another content another one
    from runctl import stage_model

    assert stage_model.staged_uri("hfsm-dev-data", folder) == f"s3://hfsm-dev-data/{prefix}"
    (folder / "model.safetensors").write_bytes(b"\1" * 100)
    assert stage_model.staged_uri("hfsm-dev-data", folder) != f"s3://hfsm-dev-data/{prefix}"
