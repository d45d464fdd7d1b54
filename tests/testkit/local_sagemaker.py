"""Helpers for the local SageMaker tests: the harness, requests shaped like the Lambda's, code tarballs."""

from __future__ import annotations

import contextlib
import io
import json
import tarfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import botocore.session
from botocore.validate import ParamValidator
from moto import mock_aws

from local_mode.sagemaker.backend import LocalSageMaker
from local_mode.sagemaker.settings import JobEvent

HERE = Path(__file__).resolve().parent
REGION = "us-east-1"
BUCKET = "local-sm-tests"
ROLE = "arn:aws:iam::123456789012:role/sagemaker-execution"
METRIC_REGEX = "METRIC {}=([-+0-9.eE]+|nan|inf)"
SAGEMAKER = botocore.session.get_session().get_service_model("sagemaker")


@contextlib.contextmanager
def mocked_bucket(name: str, region: str = "us-east-1") -> Iterator[Any]:
    """An S3 client on moto with one empty bucket (the mock ends with the block)."""
    with mock_aws():
        client = boto3.client("s3", region_name=region)
        client.create_bucket(Bucket=name)
        yield client


def tarball(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for path in sorted(folder.iterdir()):
            tar.add(path, arcname=path.name)
    return buffer.getvalue()


@dataclass
class Harness:
    sm: LocalSageMaker
    s3: Any
    sagemaker: Any
    events: list[JobEvent] = field(default_factory=list)

    def put(self, key: str, body: bytes | str) -> str:
        self.s3.put_object(Bucket=BUCKET, Key=key, Body=body)
        return f"s3://{BUCKET}/{key}"

    def keys(self, prefix: str) -> list[str]:
        return sorted(
            o["Key"] for o in self.s3.list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
        )

    def read(self, key: str) -> bytes:
        return self.s3.get_object(Bucket=BUCKET, Key=key)["Body"].read()

    def wait_training(self, name: str, timeout: float = 120) -> dict[str, Any]:
        return self._wait(
            lambda: self.sagemaker.describe_training_job(TrainingJobName=name), "TrainingJobStatus", timeout
        )

    def wait_processing(self, name: str, timeout: float = 120) -> dict[str, Any]:
        return self._wait(
            lambda: self.sagemaker.describe_processing_job(ProcessingJobName=name),
            "ProcessingJobStatus",
            timeout,
        )

    @staticmethod
    def _wait(describe: Any, key: str, timeout: float) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        while True:  # the way the pipeline's poll loop sees the job: through boto3
            response = describe()
            if response[key] not in ("InProgress", "Stopping") or time.monotonic() > deadline:
                return response
            time.sleep(0.3)


def training_request(name: str, code_uri: str, program: str, **overrides: Any) -> dict[str, Any]:
    """A CreateTrainingJob request in the shape the pipeline's Lambda (and the SDK's estimator) sends."""
    hyperparameters = {
        "sagemaker_program": json.dumps(program),
        "sagemaker_submit_directory": json.dumps(code_uri),
        "sagemaker_container_log_level": "20",
        "sagemaker_job_name": json.dumps(name),
        "sagemaker_region": json.dumps(REGION),
        **overrides.pop("hyperparameters", {}),
    }
    request: dict[str, Any] = {
        "TrainingJobName": name,
        "AlgorithmSpecification": {
            "TrainingImage": "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:2.9.0",
            "TrainingInputMode": "File",
            "MetricDefinitions": [
                {"Name": metric, "Regex": METRIC_REGEX.format(metric)}
                for metric in ("train_loss", "eval_accuracy")
            ],
        },
        "RoleArn": ROLE,
        "HyperParameters": hyperparameters,
        "OutputDataConfig": {"S3OutputPath": f"s3://{BUCKET}/models/run-1/"},
        "ResourceConfig": {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 1, "VolumeSizeInGB": 30},
        "StoppingCondition": {"MaxRuntimeInSeconds": 600},
        "Environment": {"LOCAL_SM_TEST": "1"},
    }
    request.update(overrides)
    return request


def fsx_channel(directory: str, name: str = "train") -> dict[str, Any]:
    """An FSx for Lustre channel of a CreateTrainingJob request (read only) on the test file system."""
    return {"ChannelName": name, "DataSource": {"FileSystemDataSource": {
        "FileSystemId": "fs-0123456789abcdef0", "FileSystemType": "FSxLustre", "FileSystemAccessMode": "ro",
        "DirectoryPath": directory}}}


def assert_valid_output(operation: str, response: dict[str, Any]) -> None:
    """A response dict satisfies botocore's output shape: no unknown keys, required ones present, types."""
    shape = SAGEMAKER.operation_model(operation).output_shape
    report = ParamValidator().validate(response, shape)
    assert not report.has_errors(), report.generate_report()
    assert response.get("TrainingJobStatus", "InProgress") in SAGEMAKER.shape_for("TrainingJobStatus").enum
    assert (
        response.get("ProcessingJobStatus", "InProgress") in SAGEMAKER.shape_for("ProcessingJobStatus").enum
    )
    for transition in response.get("SecondaryStatusTransitions", []):
        assert transition["Status"] in SAGEMAKER.shape_for("SecondaryStatus").enum
