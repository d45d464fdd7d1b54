"""Training jobs through boto3 -> moto -> the local runner -> the real sagemaker-training toolkit."""

from __future__ import annotations

import io
import json
import math
import tarfile
import time
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.exceptions import ClientError
from testkit.local_sagemaker import (
    BUCKET,
    REGION,
    Harness,
    assert_valid_output,
    fsx_channel,
    training_request,
)


def statuses(response: dict[str, Any]) -> list[str]:
    return [t["Status"] for t in response["SecondaryStatusTransitions"]]


def untar(blob: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
        return {m.name: tar.extractfile(m).read() for m in tar.getmembers() if m.isfile()}


def _assert_completed_after_one_interruption(harness: Harness, request: dict[str, Any], done: dict[str, Any]) -> None:
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    assert statuses(done) == [
        "Starting", "Downloading", "Training", "Interrupted",
        "Starting", "Downloading", "Training", "Uploading", "Completed",
    ]  # fmt: skip
    assert_valid_output("DescribeTrainingJob", harness.sm.job(request["TrainingJobName"]).describe())

    # The request as sent comes back (moto's own record would have replaced the metric definitions).
    assert done["HyperParameters"] == request["HyperParameters"]
    assert (
        done["AlgorithmSpecification"]["MetricDefinitions"]
        == request["AlgorithmSpecification"]["MetricDefinitions"]
    )
    assert done["Environment"] == {"LOCAL_SM_TEST": "1"}


def _assert_model_checkpoints_and_billing(harness: Harness, done: dict[str, Any]) -> None:
    model = json.loads(
        untar(harness.read("models/run-1/hfsm-run-1-train-spot1/output/model.tar.gz"))["model.json"]
    )
    assert done["ModelArtifacts"]["S3ModelArtifacts"].endswith("/hfsm-run-1-train-spot1/output/model.tar.gz")
    assert model["world_size"] == 2 and model["allreduce"] == 3.0  # gloo across both "hosts"
    assert model["hosts"] == ["algo-1", "algo-2"]
    assert model["channel_files"] == ["part-0.jsonl", "part-2.jsonl", "part-4.jsonl"]  # algo-1's shard
    assert model["resumed_from"] >= 3  # restarted from the checkpoint synced to S3 before the interruption
    output = untar(harness.read("models/run-1/hfsm-run-1-train-spot1/output/output.tar.gz"))
    assert json.loads(output["metrics.json"]) == {"train_loss": pytest.approx(1 / 6)}

    metrics = {m["MetricName"]: m["Value"] for m in done["FinalMetricDataList"]}
    assert metrics == {"train_loss": pytest.approx(0.1667), "eval_accuracy": 0.75}
    # rotation (two kept) mirrored to S3
    assert {k.split("/")[2] for k in harness.keys("checkpoints/run-1/")} == {"checkpoint-5", "checkpoint-6"}

    training, billable = done["TrainingTimeInSeconds"], done["BillableTimeInSeconds"]
    assert billable == max(1, math.ceil(training * (1 - harness.sm.settings.spot_discount)))
    assert done["TrainingStartTime"] <= done["TrainingEndTime"]


def _assert_progress_and_host_logs(harness: Harness, request: dict[str, Any]) -> Path:
    steps = [e.global_step for e in harness.events if e.kind == "progress"]
    assert steps[0] == 1 and steps[-1] == 6 and 3 in steps
    summaries = harness.sagemaker.list_training_jobs(StatusEquals="Completed")["TrainingJobSummaries"]
    assert [s["TrainingJobName"] for s in summaries] == [request["TrainingJobName"]]
    work_dir = harness.sm.job(request["TrainingJobName"]).work_dir
    assert not (work_dir / "attempt-1").exists() and (work_dir / "attempt-2" / "algo-2").is_dir()
    logs = work_dir / "logs"
    assert sorted(p.relative_to(logs).as_posix() for p in logs.rglob("*.log")) == [
        "attempt-1/algo-1.log", "attempt-1/algo-2.log", "attempt-2/algo-1.log", "attempt-2/algo-2.log",
    ]  # fmt: skip
    return logs


def _assert_cloudwatch_has_the_same_lines(request: dict[str, Any], logs: Path) -> None:
    # The same lines are in CloudWatch Logs under SageMaker's names: one stream per host and attempt.
    cw = boto3.client("logs", region_name=REGION)
    streams = cw.describe_log_streams(logGroupName="/aws/sagemaker/TrainingJobs",
                                      logStreamNamePrefix=request["TrainingJobName"] + "/")["logStreams"]
    names = sorted(s["logStreamName"] for s in streams)
    assert len(names) == 4 and sorted({n.split("/")[1].rsplit("-", 1)[0] for n in names}) == ["algo-1", "algo-2"]
    leader_lines = [
        e["message"] for n in names if "/algo-1-" in n
        for e in cw.get_log_events(logGroupName="/aws/sagemaker/TrainingJobs", logStreamName=n)["events"]
    ]
    assert any("PROGRESS global_step=6" in line for line in leader_lines)
    local_leader = [x for x in (logs / "attempt-2" / "algo-1.log").read_text().splitlines() if x.strip()]
    assert set(local_leader) <= set(leader_lines)


@pytest.mark.slow
def test_distributed_spot_job_is_interrupted_and_resumes_from_its_s3_checkpoints(
    harness: Harness, code_uri: str
):
    for i in range(5):
        harness.put(f"datasets/squad/train/part-{i}.jsonl", '{"text": "x"}\n')
    harness.sm.interrupt_training(at_step=3, name_contains="spot")
    request = training_request(
        "hfsm-run-1-train-spot1",
        code_uri,
        "train.py",
        hyperparameters={
            "sagemaker_torch_distributed_enabled": "true",
            "sagemaker_instance_type": json.dumps("ml.g5.2xlarge"),
            "max_steps": "6",
            "step_seconds": "0.3",
        },
        InputDataConfig=[
            {
                "ChannelName": "train",
                "InputMode": "File",
                "DataSource": {
                    "S3DataSource": {
                        "S3DataType": "S3Prefix",
                        "S3Uri": f"s3://{BUCKET}/datasets/squad/train/",
                        "S3DataDistributionType": "ShardedByS3Key",
                    }
                },
            }
        ],
        ResourceConfig={"InstanceType": "ml.g5.2xlarge", "InstanceCount": 2, "VolumeSizeInGB": 30},
        StoppingCondition={"MaxRuntimeInSeconds": 900, "MaxWaitTimeInSeconds": 1800},
        EnableManagedSpotTraining=True,
        CheckpointConfig={"S3Uri": f"s3://{BUCKET}/checkpoints/run-1/"},
    )
    harness.sagemaker.create_training_job(**request)
    running = harness.sagemaker.describe_training_job(TrainingJobName=request["TrainingJobName"])
    assert running["TrainingJobStatus"] == "InProgress"

    done = harness.wait_training(request["TrainingJobName"], timeout=240)
    _assert_completed_after_one_interruption(harness, request, done)
    _assert_model_checkpoints_and_billing(harness, done)
    logs = _assert_progress_and_host_logs(harness, request)
    _assert_cloudwatch_has_the_same_lines(request, logs)


@pytest.mark.slow
def test_script_error_fails_the_job_with_the_error_as_reason(harness: Harness, code_uri: str):
    sqs = boto3.client("sqs", region_name=REGION)
    queue = sqs.create_queue(QueueName="sagemaker-events")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"][
        "QueueArn"
    ]
    events = boto3.client("events", region_name=REGION)
    events.put_rule(
        Name="training-state",
        EventPattern=json.dumps(
            {"source": ["aws.sagemaker"], "detail-type": ["SageMaker Training Job State Change"]}
        ),
    )
    events.put_targets(Rule="training-state", Targets=[{"Id": "q", "Arn": queue_arn}])

    request = training_request("plain-fail", code_uri, "plain.py", hyperparameters={"fail_at_step": "2"})
    harness.sagemaker.create_training_job(**request)
    done = harness.wait_training("plain-fail")
    assert done["TrainingJobStatus"] == "Failed"
    assert done["SecondaryStatus"] == "Failed"
    assert done["FailureReason"].startswith("AlgorithmError: ")
    assert "dummy failure at step 2" in done["FailureReason"]
    assert len(done["FailureReason"]) <= 1024
    assert done["BillableTimeInSeconds"] == done["TrainingTimeInSeconds"] >= 1  # on-demand: billed in full
    assert harness.keys("models/run-1/plain-fail/") == []
    assert_valid_output("DescribeTrainingJob", harness.sm.job("plain-fail").describe())

    received: list[dict[str, Any]] = []
    deadline = time.monotonic() + 30  # events are asynchronous: the last one may follow the status change
    while (
        not any(e["detail"]["TrainingJobStatus"] == "Failed" for e in received)
        and time.monotonic() < deadline
    ):
        messages = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=0).get(
            "Messages", []
        )
        received += [json.loads(m["Body"]) for m in messages]
        time.sleep(0 if messages else 0.2)
    final = [e for e in received if e["detail"]["TrainingJobStatus"] == "Failed"]
    assert final and final[0]["detail"]["TrainingJobName"] == "plain-fail"
    assert final[0]["resources"] == [done["TrainingJobArn"]]


@pytest.mark.slow
def test_stop_training_job_stops_and_still_uploads_the_model_dir(harness: Harness, code_uri: str):
    request = training_request(
        "plain-stop", code_uri, "plain.py", hyperparameters={"steps": "300", "step_seconds": "0.2"}
    )
    harness.sagemaker.create_training_job(**request)
    deadline = time.monotonic() + 90
    while not any(e.kind == "progress" for e in harness.events) and time.monotonic() < deadline:
        time.sleep(0.2)
    harness.sagemaker.stop_training_job(TrainingJobName="plain-stop")
    assert harness.sagemaker.describe_training_job(TrainingJobName="plain-stop")["TrainingJobStatus"] in (
        "Stopping",
        "Stopped",
    )
    done = harness.wait_training("plain-stop")
    assert (done["TrainingJobStatus"], done["SecondaryStatus"]) == ("Stopped", "Stopped")
    assert "Stopping" in statuses(done)
    assert harness.keys("models/run-1/plain-stop/output/") == [
        "models/run-1/plain-stop/output/model.tar.gz",
        "models/run-1/plain-stop/output/output.tar.gz",
    ]
    with pytest.raises(ClientError, match="ValidationException"):
        harness.sagemaker.stop_training_job(TrainingJobName="plain-stop")


@pytest.mark.slow
def test_max_runtime_stops_the_job(harness: Harness, code_uri: str):
    request = training_request(
        "plain-timeout",
        code_uri,
        "plain.py",
        hyperparameters={"steps": "300", "step_seconds": "0.2"},
        StoppingCondition={"MaxRuntimeInSeconds": 2},
    )
    harness.sagemaker.create_training_job(**request)
    done = harness.wait_training("plain-timeout")
    assert (done["TrainingJobStatus"], done["SecondaryStatus"]) == ("Stopped", "MaxRuntimeExceeded")
    assert done["TrainingTimeInSeconds"] >= 2


@pytest.mark.slow
def test_fsx_channel_is_a_local_folder(harness: Harness, code_uri: str):
    data = harness.sm.settings.fsx_root / "fsxmount" / "datasets" / "train"
    data.mkdir(parents=True)
    (data / "shard-0.jsonl").write_text("{}\n")
    request = training_request(
        "plain-fsx",
        code_uri,
        "plain.py",
        InputDataConfig=[fsx_channel("/fsxmount/datasets/train")],
    )
    harness.sagemaker.create_training_job(**request)
    done = harness.wait_training("plain-fsx")
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    model = json.loads(untar(harness.read("models/run-1/plain-fsx/output/model.tar.gz"))["model.json"])
    assert model == {"steps": 3, "files": ["shard-0.jsonl"]}


@pytest.mark.slow
def test_processes_per_host_sets_torchruns_process_count(harness: Harness, code_uri: str):
    harness.sm.settings.processes_per_host = 2
    request = training_request(
        "plain-two-procs",
        code_uri,
        "plain.py",
        hyperparameters={"sagemaker_torch_distributed_enabled": "true", "steps": "1"},
    )
    harness.sagemaker.create_training_job(**request)
    done = harness.wait_training("plain-two-procs")
    assert done["TrainingJobStatus"] == "Completed", done.get("FailureReason")
    files = untar(harness.read("models/run-1/plain-two-procs/output/model.tar.gz"))
    ranks = {name: json.loads(body) for name, body in files.items() if name.startswith("rank-")}
    assert sorted(ranks) == ["rank-0.json", "rank-1.json"]
    assert all(r == {"world_size": 2, "master": "127.0.0.1"} for r in ranks.values())


def test_empty_channel_fails_before_any_process_starts(harness: Harness, code_uri: str):
    request = training_request(
        "no-data",
        code_uri,
        "plain.py",
        InputDataConfig=[
            {
                "ChannelName": "train",
                "DataSource": {
                    "S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": f"s3://{BUCKET}/nothing/here/"}
                },
            }
        ],
    )
    harness.sagemaker.create_training_job(**request)
    done = harness.wait_training("no-data", timeout=30)
    assert done["TrainingJobStatus"] == "Failed"
    assert done["FailureReason"].startswith("ClientError: ")
    assert "No S3 objects found" in done["FailureReason"]
    assert_valid_output("DescribeTrainingJob", harness.sm.job("no-data").describe())


def test_unknown_fsx_folder_and_missing_program_are_client_errors(harness: Harness, code_uri: str):
    fsx = training_request(
        "bad-fsx",
        code_uri,
        "plain.py",
        InputDataConfig=[fsx_channel("/fsxmount/none")],
    )
    harness.sagemaker.create_training_job(**fsx)
    harness.sagemaker.create_training_job(**training_request("bad-program", code_uri, "missing.py"))
    assert "local FSx root" in harness.wait_training("bad-fsx", timeout=30)["FailureReason"]
    assert "sagemaker_program missing.py" in harness.wait_training("bad-program", timeout=30)["FailureReason"]


def test_job_names_are_unique(harness: Harness, code_uri: str):
    request = training_request("dup", code_uri, "missing.py")
    harness.sagemaker.create_training_job(**request)
    with pytest.raises(ClientError, match="ResourceInUse"):
        harness.sagemaker.create_training_job(**request)
    harness.wait_training("dup", timeout=30)
    with pytest.raises(ClientError, match="ValidationException"):
        harness.sagemaker.stop_training_job(TrainingJobName="never-created")
