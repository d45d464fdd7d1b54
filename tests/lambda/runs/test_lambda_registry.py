"""Issue 23: the model registry copies the exact version the job wrote, not the key's current one.

Every job shares the execution role that may write `models/`: another run's job can put a new version of this
job's model.tar.gz between the job's end and Finish. Finish picks the version created in the job's own upload
window (DescribeTrainingJob: the Uploading phase to TrainingEndTime) by its VersionId."""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

import pytest
from moto.sagemaker.models import sagemaker_backends
from testkit.lambdas import ACCOUNT, REGION, SETTINGS

from hfsm_lambda import aws, handlers
from hfsm_lambda.errors import ModelArtifactError

SPEC = {"version": 1, "name": "reg", "task": "question-answering", "model": "distilbert/distilbert-base-uncased",
        "data": {"train": {"s3": "datasets/reg/train/"}}, "spot": {"enabled": False}}


@pytest.fixture
def finished_job(aws_account, put_data, context) -> tuple[dict[str, Any], dict[str, Any], Any, str, str]:
    """A completed training job whose upload window holds one version of its model (the job's own)."""
    aws.client("s3").put_bucket_versioning(Bucket=SETTINGS["artifacts_bucket"],
                                           VersioningConfiguration={"Status": "Enabled"})  # as deployed
    put_data(f"s3://{SETTINGS['data_bucket']}/datasets/reg/train/", 1)
    run = handlers.prepare({"spec": SPEC}, context)["run"]
    job = handlers.start_training({"run": run, "attempt": 0}, context)
    fake = sagemaker_backends[ACCOUNT][REGION].training_jobs[job["job_name"]]
    bucket, key = fake.model_artifacts["S3ModelArtifacts"].removeprefix("s3://").split("/", 1)
    uploading = datetime.now(UTC)
    aws.client("s3").put_object(Bucket=bucket, Key=key, Body=b"the weights the job trained")
    fake.secondary_status_transitions = [{"Status": "Uploading", "StartTime": uploading,
                                          "StatusMessage": "Uploading generated training model"}]
    fake.training_end_time = datetime.now(UTC)
    return run, job, fake, bucket, key


def _registered_body(summary: dict[str, Any]) -> bytes:
    bucket, key = summary["registered_model_uri"].removeprefix("s3://").split("/", 1)
    return aws.client("s3").get_object(Bucket=bucket, Key=key)["Body"].read()


def test_a_version_written_after_the_job_ended_is_not_registered(finished_job, context) -> None:
    run, job, _, bucket, key = finished_job
    time.sleep(2.1)  # after the job's end and the 1 s allowed for clocks (S3 keeps whole seconds)
    aws.client("s3").put_object(Bucket=bucket, Key=key, Body=b"another run's job swapped the weights")
    summary = handlers.finish({"run": run, "job": job}, context)
    assert _registered_body(summary) == b"the weights the job trained"
    versions = aws.client("s3").list_object_versions(Bucket=bucket, Prefix=key)["Versions"]
    first = min(versions, key=lambda v: v["LastModified"])
    package = aws.client("sagemaker").describe_model_package(ModelPackageName=summary["model_package_arn"])
    assert package["CustomerMetadataProperties"]["source_version_id"] == first["VersionId"]


def test_two_versions_in_the_upload_window_register_nothing(finished_job, context) -> None:
    run, job, fake, bucket, key = finished_job
    aws.client("s3").put_object(Bucket=bucket, Key=key, Body=b"written while the job uploaded")
    fake.training_end_time = datetime.now(UTC)
    with pytest.raises(ModelArtifactError, match="2 versions written while job"):
        handlers.finish({"run": run, "job": job}, context)
    assert aws.client("sagemaker").list_model_packages(
        ModelPackageGroupName=SETTINGS["model_package_group"])["ModelPackageSummaryList"] == []
