"""runctl against moto: submit, status, stop, and finding the state machine."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from moto import mock_aws
from moto.sagemaker.models import sagemaker_backends

from pipeline_runs.clients import Clients
from pipeline_runs.status import status
from runctl import core
from runctl.cli import main

REGION, ACCOUNT = "us-east-1", "123456789012"
REPO = Path(__file__).resolve().parents[2]
PASS = json.dumps({"StartAt": "Plan", "States": {"Plan": {"Type": "Pass", "End": True}}})
COMMON = ["--region", REGION]


@pytest.fixture
def aws(monkeypatch):
    monkeypatch.delenv(core.ARN_ENV, raising=False)
    monkeypatch.delenv(core.PROJECT_ENV, raising=False)
    monkeypatch.delenv(core.ENVIRONMENT_ENV, raising=False)
    with mock_aws():
        import boto3

        sfn = boto3.client("stepfunctions", region_name=REGION)
        arn = sfn.create_state_machine(name="hfsm-dev-fine-tune", definition=PASS,
                                       roleArn=f"arn:aws:iam::{ACCOUNT}:role/sfn")["stateMachineArn"]
        yield {"arn": arn, "sfn": sfn, "sagemaker": boto3.client("sagemaker", region_name=REGION),
               "cloudformation": boto3.client("cloudformation", region_name=REGION)}


@pytest.fixture
def spec_file(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text((REPO / "examples" / "question-answering.json").read_text())
    return path


class _RecordingSageMaker:
    """moto has no StopTrainingJob: record those calls, pass everything else to moto."""

    def __init__(self, client):
        self._client, self.stopped = client, []

    def stop_training_job(self, TrainingJobName):  # noqa: N803 - boto3's parameter name
        self.stopped.append(TrainingJobName)
        sagemaker_backends[ACCOUNT][REGION].training_jobs[TrainingJobName].training_job_status = "Stopped"

    def __getattr__(self, name):
        return getattr(self._client, name)


def run_cli(capsys, *argv, clients=None):
    code = main(list(argv), clients=clients)
    out, err = capsys.readouterr()
    return code, out, err


def test_submit_prints_the_execution_and_console_url(aws, spec_file, capsys):
    code, out, _ = run_cli(capsys, "submit", str(spec_file), "--name", "qa-try", "--state-machine-arn", aws["arn"],
                           *COMMON)
    assert code == 0
    run_id = out.split("Run:", 1)[1].split()[0]
    assert core.RUN_ID_RE.match(run_id) and run_id.startswith("qa-try-")
    execution_arn = aws["arn"].replace(":stateMachine:", ":execution:") + f":{run_id}"
    assert f"Execution:  {execution_arn}" in out
    assert (f"Console:    https://{REGION}.console.aws.amazon.com/states/home?region={REGION}"
            f"#/v2/executions/details/{execution_arn}") in out
    execution = aws["sfn"].describe_execution(executionArn=execution_arn)
    payload = json.loads(execution["input"])
    assert payload["run_id"] == run_id and payload["spec"]["name"] == "qa-try"
    assert payload["spec"]["task"] == "question-answering"


def test_state_machine_from_env_or_stack_output(aws, spec_file, capsys, monkeypatch):
    code, _, err = run_cli(capsys, "submit", str(spec_file), *COMMON)
    assert code == 2 and "cannot read stack hfsm-dev-pipeline" in err
    template = {"Resources": {"Topic": {"Type": "AWS::SNS::Topic"}},
                "Outputs": {core.OUTPUT_KEY: {"Value": aws["arn"]}}}
    aws["cloudformation"].create_stack(StackName="hfsm-prod-pipeline", TemplateBody=json.dumps(template))
    code, out, _ = run_cli(capsys, "submit", str(spec_file), "--env", "prod", "--json", *COMMON)
    assert code == 0 and json.loads(out)["execution_arn"].startswith(aws["arn"].replace("stateMachine", "execution"))
    monkeypatch.setenv(core.ARN_ENV, aws["arn"])
    assert run_cli(capsys, "submit", str(spec_file), *COMMON)[0] == 0
    assert len(aws["sfn"].list_executions(stateMachineArn=aws["arn"])["executions"]) == 2


def test_status_by_run_id_and_by_arn(aws, spec_file, capsys):
    code, out, _ = run_cli(capsys, "submit", str(spec_file), "--json", "--state-machine-arn", aws["arn"], *COMMON)
    started = json.loads(out)
    for ref in (started["run_id"], started["execution_arn"]):
        code, out, _ = run_cli(capsys, "status", ref, "--state-machine-arn", aws["arn"], *COMMON)
        assert code == 0
        # the machine here has no Prepare: the run is not planned, and the execution's name is no proof of one
        assert "Status:     RUNNING" in out and "Run:        (not planned yet)" in out
        assert f"Console:    {started['console_url']}" in out
    # JSON with --json, before or after the command (the global options of aws-cli)
    for argv in (["--json", "status", started["run_id"]], ["status", started["run_id"], "--json"]):
        code, out, _ = run_cli(capsys, *argv, "--state-machine-arn", aws["arn"], *COMMON)
        assert code == 0 and json.loads(out)["status"] == "RUNNING"
    code, _, err = run_cli(capsys, "status", "nope-20250101000000-abcd0123456789ef", "--state-machine-arn", aws["arn"], *COMMON)
    assert code == 2 and "no execution" in err


class _History:
    """An execution history from `_events()`, served as GetExecutionHistory and its paginator do."""

    def _events(self) -> list[dict]:
        raise NotImplementedError

    def get_execution_history(self, **kwargs):
        events = self._events()
        return {"events": events[::-1] if kwargs.get("reverseOrder") else events}

    def get_paginator(self, name):
        history = self.get_execution_history

        class _Pages:
            def paginate(self, **kwargs):
                return [history(**kwargs)]
        return _Pages()


class _PlannedSfn(_History):
    """moto's Step Functions with the execution history a real run has: its input, then Prepare's output."""

    def __init__(self, client, run: dict | None, execution_input: dict | None = None) -> None:
        self._client, self.run, self.input = client, run, execution_input or {}

    def _events(self) -> list[dict]:
        events = [{"id": 1, "type": "ExecutionStarted", "executionStartedEventDetails": {"input": json.dumps(
                      self.input)}},
                  {"id": 2, "type": "TaskStateEntered", "stateEnteredEventDetails": {
                      "name": "Prepare", "input": json.dumps(self.input)}}]
        if self.run is not None:
            events.append({"id": 3, "type": "TaskStateExited", "stateExitedEventDetails": {
                "name": "Prepare", "output": json.dumps({"run": self.run, "attempt": 0})}})
        return events

    def __getattr__(self, name):
        return getattr(self._client, name)


def _in_progress_jobs(aws, names: list[str]) -> None:
    for name in names:
        if "-tokmap" in name:
            aws["sagemaker"].create_processing_job(
                ProcessingJobName=name, RoleArn=f"arn:aws:iam::{ACCOUNT}:role/sm", AppSpecification={"ImageUri": "i"},
                StoppingCondition={"MaxRuntimeInSeconds": 60}, ProcessingResources={"ClusterConfig": {
                    "InstanceType": "ml.c5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10}})
            sagemaker_backends[ACCOUNT][REGION].processing_jobs[name].processing_job_status = "InProgress"
            continue
        aws["sagemaker"].create_training_job(
            TrainingJobName=name, RoleArn=f"arn:aws:iam::{ACCOUNT}:role/sm",
            AlgorithmSpecification={"TrainingImage": "img", "TrainingInputMode": "File"},
            OutputDataConfig={"S3OutputPath": "s3://b/models/"}, StoppingCondition={"MaxRuntimeInSeconds": 60},
            ResourceConfig={"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 10})
        sagemaker_backends[ACCOUNT][REGION].training_jobs[name].training_job_status = "InProgress"


def _planned(run_id: str) -> dict:
    tail = run_id[-16:]
    return {"run_id": run_id, "tokenizer_stage": True,
            "job_names": {"tokenizer_map": f"hfsm-squad-distilbert-{tail}-tokmap0",
                          "tokenizer_reduce": f"hfsm-squad-distilbert-{tail}-tokred0",
                          "train": [f"hfsm-squad-distilbert-{tail}-train0", f"hfsm-squad-distilbert-{tail}-train1"]}}


def test_stop_ends_the_execution_and_the_jobs_prepare_planned(aws, spec_file, capsys):
    _, out, _ = run_cli(capsys, "submit", str(spec_file), "--json", "--state-machine-arn", aws["arn"], *COMMON)
    started = json.loads(out)
    run = _planned(started["run_id"])
    other = "hfsm-other-20200101000000-ffff0000ffff0000-train0"
    _in_progress_jobs(aws, [run["job_names"]["train"][0], run["job_names"]["tokenizer_map"], other])
    clients = Clients(sfn=_PlannedSfn(aws["sfn"], run), sagemaker=_RecordingSageMaker(aws["sagemaker"]),
                           cloudformation=aws["cloudformation"])
    code, out, _ = run_cli(capsys, "stop", started["run_id"], "--state-machine-arn", aws["arn"], *COMMON,
                           clients=clients)
    assert code == 0
    assert f"Execution {started['execution_arn']} stopped" in out
    assert f"Stopped job {run['job_names']['tokenizer_map']}" in out
    assert f"Stopped job {run['job_names']['train'][0]}" in out and "hfsm-other" not in out
    assert aws["sfn"].describe_execution(executionArn=started["execution_arn"])["status"] == "ABORTED"
    jobs = sagemaker_backends[ACCOUNT][REGION].training_jobs
    assert jobs[run["job_names"]["train"][0]].training_job_status == "Stopped"
    assert jobs[other].training_job_status == "InProgress"
    code, out, _ = run_cli(capsys, "stop", started["run_id"], "--state-machine-arn", aws["arn"], *COMMON,
                           clients=clients)
    assert "was already ABORTED" in out and "Stopped job" not in out


VICTIM = "squad-distilbert-20250101000000-0123456789abcdef"


def test_a_crafted_execution_input_cannot_make_status_or_stop_act_on_another_run(aws, spec_file, capsys):
    """Issue 23: the run comes from Prepare's output only; an execution whose input names another run (and whose
    Prepare failed) shows no run, and `stop` stops none of the other run's jobs."""
    victim = _planned(VICTIM)
    _in_progress_jobs(aws, [victim["job_names"]["train"][0], victim["job_names"]["tokenizer_map"]])
    arn = aws["sfn"].start_execution(stateMachineArn=aws["arn"], name=VICTIM,  # the victim's id as its name too
                                     input=json.dumps({"spec": {}, "run": victim}))["executionArn"]
    clients = Clients(sfn=_PlannedSfn(aws["sfn"], None, {"spec": {}, "run": victim}),
                           sagemaker=_RecordingSageMaker(aws["sagemaker"]), cloudformation=aws["cloudformation"])
    code, out, _ = run_cli(capsys, "status", arn, "--state-machine-arn", aws["arn"], *COMMON, clients=clients)
    assert code == 0 and "Run:        (not planned yet)" in out and VICTIM not in out.split("Execution:")[0]
    code, out, _ = run_cli(capsys, "stop", arn, "--state-machine-arn", aws["arn"], *COMMON, clients=clients)
    assert code == 0 and "Stopped job" not in out
    assert sagemaker_backends[ACCOUNT][REGION].training_jobs[victim["job_names"]["train"][0]] \
        .training_job_status == "InProgress"
    assert sagemaker_backends[ACCOUNT][REGION].processing_jobs[victim["job_names"]["tokenizer_map"]] \
        .processing_job_status == "InProgress"


def test_bad_spec_files(aws, tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text("{oops")
    code, _, err = run_cli(capsys, "submit", str(bad), "--state-machine-arn", aws["arn"], *COMMON)
    assert code == 2 and "is not valid JSON" in err
    bad.write_text(json.dumps({"name": "Bad Name"}))
    code, _, err = run_cli(capsys, "submit", str(bad), "--state-machine-arn", aws["arn"], *COMMON)
    assert code == 2 and "name must be 1-32 characters" in err
    code, _, err = run_cli(capsys, "submit", str(tmp_path / "missing.json"), "--state-machine-arn", aws["arn"], *COMMON)
    assert code == 2 and "cannot read" in err


def test_module_entry_point():
    result = subprocess.run([sys.executable, "-m", "runctl", "--help"], cwd=REPO, capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0 and "submit" in result.stdout and "status" in result.stdout


class _HistorySfn(_History):
    """A Step Functions client whose execution history ends with a check_job status (durability included)."""

    def __init__(self, state: dict, status: str = "RUNNING", output: dict | None = None) -> None:
        self.state, self.status, self.output = state, status, output

    def describe_execution(self, executionArn):  # noqa: N803 - boto3's parameter name
        out = {"executionArn": executionArn, "status": self.status, "name": "tickets-20250601120000-abcd",
               "startDate": "2025-06-01 12:00:00"}
        if self.output is not None:
            out["output"] = json.dumps(self.output)
        return out

    def _events(self) -> list[dict]:
        return [{"id": 3, "stateExitedEventDetails": {"name": "Prepare", "output": json.dumps(
                    {"run": self.state["run"], "attempt": 0})}},
                {"id": 9, "stateExitedEventDetails": {"name": "CheckTraining", "output": json.dumps(self.state)}}]


def test_status_shows_the_last_durable_checkpoint_and_interruptions(capsys):
    durability = {"last_durable_step": 300, "last_durable_at": "2025-06-01T12:16:00Z", "age_minutes": 32.0,
                  "threshold_minutes": 30.0, "stale": True, "action": "warn", "warned_at": "2025-06-01T12:48:00Z",
                  "checked_at": "2025-06-01T12:48:00Z", "checkpoint_uri": "s3://b/checkpoints/r/"}
    state = {"run": {"run_id": "tickets-20250601120000-abcd"}, "attempt": 0, "job": {"job_name": "j0"},
             "status": {"state": "running", "status": "InProgress", "durability": durability}}
    sm = type("SM", (), {"describe_training_job": lambda self, **kw: {"TrainingJobStatus": "InProgress",
                                                                        "SecondaryStatus": "Training"}})()
    clients = Clients(sfn=_HistorySfn(state), sagemaker=sm, cloudformation=None)
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:hfsm-dev-fine-tune"
    code, out, _ = run_cli(capsys, "status", "tickets-20250601120000-abcd", "--state-machine-arn", arn,
                           clients=clients)
    assert code == 0
    assert "Checkpoint: step 300 saved 2025-06-01T12:16:00Z, 32 min of training since" in out
    assert "Warning:    no new checkpoint within 30 min (warned)" in out
    summary = {"result": {"model_uri": "s3://m", "interruptions": [
        {"step_reached": 104, "resumed_from_step": 80, "lost_steps": 24, "lost_minutes": 6.0}]}}
    clients = Clients(sfn=_HistorySfn(state, "SUCCEEDED", summary), sagemaker=sm, cloudformation=None)
    code, out, _ = run_cli(capsys, "status", "tickets-20250601120000-abcd", "--json", "--state-machine-arn", arn,
                           clients=clients)
    info = json.loads(out)
    assert info["durability"]["last_durable_step"] == 300 and info["result"]["interruptions"][0]["lost_steps"] == 24
    code, out, _ = run_cli(capsys, "status", "tickets-20250601120000-abcd", "--state-machine-arn", arn,
                           clients=clients)
    assert "Interrupted: step 104 reached, resumed from 80, 24 step(s) / 6.0 min lost" in out


def test_log_lines_and_reasons_reach_the_terminal_without_control_characters(capsys):
    """Issue 23: a job writes its logs and FailureReason; an ANSI escape, a bidi override or a carriage return in
    them must not drive the terminal `runctl logs` / `status` print to."""
    from runctl import observe

    hostile = "loss=0.1\x1b[2J\x1b]0;pwned\x07 ok\u202egnp.exe\x00"
    line = observe.format_event((1_700_000_000_000, "train attempt 0, algo-1", hostile))
    assert not any(not c.isprintable() for c in line)
    assert "\\x1b[2J" in line and "\\u202e" in line and "\\x07" in line and "\\x00" in line
    state = {"run": {"run_id": "tickets-20250601120000-abcd"}, "attempt": 0, "job": {"job_name": "j0"},
             "status": {"state": "failed", "status": "Failed", "failure_reason": f"AlgorithmError: {hostile}"}}
    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:hfsm-dev-fine-tune"
    clients = Clients(sfn=_HistorySfn(state, "FAILED"), sagemaker=None, cloudformation=None)
    code, out, _ = run_cli(capsys, "status", "tickets-20250601120000-abcd", "--state-machine-arn", arn,
                           clients=clients)
    assert code == 0 and "Reason:     AlgorithmError: loss=0.1\\x1b[2J" in out
    assert all(c.isprintable() or c == "\n" for c in out)


def test_status_shows_the_goodput_ledger_finished_and_live(capsys):
    import time

    arn = "arn:aws:states:us-east-1:123456789012:stateMachine:hfsm-dev-fine-tune"
    ledger = {"format": 1, "billed_seconds": 200.0, "waiting_seconds": 5.0, "ratio": 0.5,
              "parts": {"downloading": 4.0, "startup": 60.0, "productive": 100.0, "replayed": 30.0,
                        "evaluation": 2.0, "checkpointing": 2.0, "uploading": 2.0, "stalled": 0.0,
                        "unaccounted": 0.0},
              "details": {"startup": {"imports": 40.0, "tokenize": 12.0}}, "attempts": [{}, {}]}
    summary = {"result": {"model_uri": "s3://m", "goodput": ledger, "interruptions": [
        {"step_reached": None, "resumed_from_step": 0, "lost_steps": None, "lost_minutes": None,
         "unknown": "no algo-1 log stream of j0 for this attempt"}]}}
    state = {"run": {"run_id": "tickets-20250601120000-abcd"}, "attempt": 0, "job": {"job_name": "j0"}}
    clients = Clients(sfn=_HistorySfn(state, "SUCCEEDED", summary), cloudformation=None)
    code, out, _ = run_cli(capsys, "status", "tickets-20250601120000-abcd", "--state-machine-arn", arn,
                           clients=clients)
    assert code == 0 and "Goodput: 50.0% of 3.3 min billed instance time was productive training (2 attempt(s)" in out
    assert "    startup        30.0%  60 s (imports 40 s, tokenize 12 s)" in out and "    replayed       15.0%" in out
    assert "Interrupted: step unknown reached, resumed from 0, ? step(s) / unknown time lost (unknown: no algo-1" in out

    # a running run: computed now from the job's transitions and its leader's log (lambda/goodput/sources.py)
    moment = time.time() - 60  # the job started a minute ago and trains now
    desc = {"TrainingJobName": "j0", "TrainingJobStatus": "InProgress", "SecondaryStatus": "Training",
            "ResourceConfig": {"InstanceCount": 1},
            "SecondaryStatusTransitions": [{"Status": "Starting", "StartTime": moment, "EndTime": moment + 5},
                                           {"Status": "Downloading", "StartTime": moment + 5, "EndTime": moment + 10},
                                           {"Status": "Training", "StartTime": moment + 10}]}
    startup = {"v": 1, "event": "startup", "at": moment + 30, "script_started_at": moment + 12,
               "first_step_at": moment + 30, "start_step": 0, "step": 0, "steps": 0, "step_seconds": 0.0,
               "eval_seconds": 0.0, "save_seconds": 0.0, "startup": {"imports": 15.0}}

    class Logs:
        def get_paginator(self, name):
            class Pages:
                def paginate(self, **kwargs):
                    return [{"logStreams": [{"logStreamName": "j0/algo-1-1", "firstEventTimestamp": 1}]}]
            return Pages()

        def get_log_events(self, **kwargs):
            events = [{"timestamp": (moment + 30) * 1000, "message": "GOODPUT " + json.dumps(startup)}] + [
                {"timestamp": (moment + 30 + i) * 1000, "message": f"PROGRESS global_step={i} max_steps=99"}
                for i in range(1, 11)]
            return {"events": [] if kwargs.get("nextToken") else events, "nextForwardToken": "t"}

    class S3:
        def get_object(self, **kwargs):
            from botocore.exceptions import ClientError

            raise ClientError({"Error": {"Code": "NoSuchKey"}}, "GetObject")

    running = {"run": {"run_id": "tickets-20250601120000-abcd", "job_names": {"train": ["j0"]},
                       "uris": {"checkpoint": "s3://b/checkpoints/tickets/"}}, "attempt": 0,
               "job": {"job_name": "j0"}}
    sm = type("SM", (), {"describe_training_job": lambda self, **kw: desc})()
    clients = Clients(sfn=_HistorySfn(running), sagemaker=sm, cloudformation=None, logs=Logs(), s3=S3())
    code, out, _ = run_cli(capsys, "status", "tickets-20250601120000-abcd", "--state-machine-arn", arn,
                           clients=clients)
    assert code == 0 and "Goodput so far: " in out and "(1 attempt(s);" in out
    assert re.search(r"\n    startup +\d+\.\d%  20 s \(imports 15 s, other 3 s, launch 2 s\)", out)  # to 1st step
    assert re.search(r"\n    productive +\d+\.\d%  \d+ s", out)
    assert re.search(r"\n    other +\d+\.\d%  .*uploading 0 s", out)  # every part, the small ones in `other`


def test_status_shows_each_part_only_when_the_run_has_it():
    """status's keys, in order: a job status only when there is a job to describe or a recorded status (None when
    SageMaker cannot describe the running job), durability only when recorded, the summary only on success."""
    arn = "arn:aws:states:us-east-1:123456789012:execution:hfsm-dev-fine-tune:tickets-20250601120000-abcd"
    run = {"run_id": "tickets-20250601120000-abcd"}
    unknown_job = type("SM", (), {"describe_training_job": lambda self, **kw: {}})()
    base = ["execution_arn", "status", "started", "stopped", "run_id", "attempt", "job", "console_url"]

    running = status(Clients(sfn=_HistorySfn({"run": run, "job": {"job_name": "j0"}}),
                                       sagemaker=unknown_job), arn, live_ledger=False)
    assert list(running) == [*base, "job_status"] and running["job_status"] is None and running["job"] == "j0"

    failed = status(Clients(sfn=_HistorySfn({"run": run, "status": {"state": "failed", "x": 1}}, "FAILED")),
                         arn)
    assert list(failed) == [*base, "job_status"]
    assert failed["job_status"] == {"state": "failed", "status": None, "secondary_status": None,
                                    "failure_reason": None}

    done = status(Clients(sfn=_HistorySfn({"run": run, "job": "not a dict"}, "SUCCEEDED",
                                                    {"result": {"cost": 1.5}})), arn)
    assert list(done) == [*base, "result"] and done["job"] is None and done["result"]["cost"] == 1.5
    assert "result" not in status(Clients(sfn=_HistorySfn({"run": run}, "SUCCEEDED", {"result": 1})), arn)
