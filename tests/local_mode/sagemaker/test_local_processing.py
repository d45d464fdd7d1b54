"""Processing jobs through boto3 -> moto -> the local runner: per-host shards, per-host outputs."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from testkit.local_sagemaker import BUCKET, HERE, ROLE, Harness, assert_valid_output


def processing_request(name: str, arguments: list[str], instances: int = 2) -> dict[str, Any]:
    """The shape the pipeline's tokenizer map step sends (runproc.sh-style entrypoint, sharded data)."""
    return {
        "ProcessingJobName": name,
        "RoleArn": ROLE,
        "AppSpecification": {
            "ImageUri": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-cpu-py312",
            "ContainerEntrypoint": ["/bin/bash", "/opt/ml/processing/input/code/run.sh"],
            "ContainerArguments": arguments,
        },
        "ProcessingInputs": [
            {
                "InputName": "code",
                "S3Input": {
                    "S3Uri": f"s3://{BUCKET}/code/abc/",
                    "LocalPath": "/opt/ml/processing/input/code",
                    "S3DataType": "S3Prefix",
                    "S3InputMode": "File",
                    "S3DataDistributionType": "FullyReplicated",
                },
            },
            {
                "InputName": "data",
                "S3Input": {
                    "S3Uri": f"s3://{BUCKET}/datasets/corpus/",
                    "LocalPath": "/opt/ml/processing/input/data",
                    "S3DataType": "S3Prefix",
                    "S3InputMode": "File",
                    "S3DataDistributionType": "ShardedByS3Key",
                },
            },
        ],
        "ProcessingOutputConfig": {
            "Outputs": [
                {
                    "OutputName": "counts",
                    "S3Output": {
                        "S3Uri": f"s3://{BUCKET}/outputs/run-1/tokenizer/counts/",
                        "LocalPath": "/opt/ml/processing/output/counts",
                        "S3UploadMode": "EndOfJob",
                    },
                }
            ]
        },
        "ProcessingResources": {
            "ClusterConfig": {
                "InstanceCount": instances,
                "InstanceType": "ml.c5.xlarge",
                "VolumeSizeInGB": 30,
            }
        },
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
        "Environment": {"TOKENIZERS_PARALLELISM": "false"},
    }


def upload_inputs(harness: Harness) -> None:
    for path in (HERE / "dummy_processing").iterdir():
        harness.put(f"code/abc/{path.name}", path.read_bytes())
    for i in range(5):
        harness.put(f"datasets/corpus/part-{i}.txt", "line\n" * (i + 1))


MAP_ARGS = [
    "count.py",
    "--input-dir",
    "/opt/ml/processing/input/data",
    "--output-dir",
    "/opt/ml/processing/output/counts",
]


@pytest.mark.slow
def test_two_instances_get_disjoint_shards_and_write_per_host_outputs(harness: Harness):
    upload_inputs(harness)
    harness.sagemaker.create_processing_job(**processing_request("tok-map-1", MAP_ARGS))
    done = harness.wait_processing("tok-map-1")
    assert done["ProcessingJobStatus"] == "Completed", done.get("FailureReason")
    assert done["ProcessingStartTime"] <= done["ProcessingEndTime"]
    assert done["ProcessingResources"]["ClusterConfig"]["InstanceCount"] == 2
    assert done["Environment"] == {"TOKENIZERS_PARALLELISM": "false"}

    keys = harness.keys("outputs/run-1/tokenizer/counts/")
    assert keys == [
        "outputs/run-1/tokenizer/counts/counts-algo-1.json",
        "outputs/run-1/tokenizer/counts/counts-algo-2.json",
    ]
    counts = [json.loads(harness.read(k)) for k in keys]
    assert counts[0]["files"] == ["part-0.txt", "part-2.txt", "part-4.txt"]
    assert counts[1]["files"] == ["part-1.txt", "part-3.txt"]
    assert sum(c["lines"] for c in counts) == 1 + 2 + 3 + 4 + 5
    assert all(c["hosts"] == ["algo-1", "algo-2"] and c["skip_pip"] == "1" for c in counts)
    summaries = harness.sagemaker.list_processing_jobs()["ProcessingJobSummaries"]
    assert [(s["ProcessingJobName"], s["ProcessingJobStatus"]) for s in summaries] == [
        ("tok-map-1", "Completed")
    ]


def test_failing_entrypoint_fails_the_job_with_its_last_lines(harness: Harness):
    upload_inputs(harness)
    harness.sagemaker.create_processing_job(
        **processing_request("tok-map-bad", ["no_such_script.py"], instances=1)
    )
    done = harness.wait_processing("tok-map-bad", timeout=60)
    assert done["ProcessingJobStatus"] == "Failed"
    assert done["FailureReason"].startswith("AlgorithmError: algo-1 exited with code 2")
    assert "no_such_script.py" in done["FailureReason"]
    assert harness.keys("outputs/") == []


def test_missing_entrypoint_is_a_client_error(harness: Harness):
    upload_inputs(harness)
    request = processing_request("no-entry", MAP_ARGS, instances=1)
    del request["AppSpecification"]["ContainerEntrypoint"]
    harness.sagemaker.create_processing_job(**request)
    done = harness.wait_processing("no-entry", timeout=30)
    assert done["ProcessingJobStatus"] == "Failed"
    assert done["FailureReason"].startswith("ClientError: ContainerEntrypoint is required")


def test_stop_processing_job(harness: Harness):
    upload_inputs(harness)
    harness.sagemaker.create_processing_job(
        **processing_request("tok-stop", ["-c", "import time; time.sleep(120)"], 1)
    )
    deadline = time.monotonic() + 30
    while not harness.sm.job("tok-stop").hosts and time.monotonic() < deadline:
        time.sleep(0.1)
    harness.sagemaker.stop_processing_job(ProcessingJobName="tok-stop")
    done = harness.wait_processing("tok-stop", timeout=60)
    assert done["ProcessingJobStatus"] == "Stopped"
    assert harness.keys("outputs/") == []
    assert_valid_output("DescribeProcessingJob", harness.sm.job("tok-stop").describe())
