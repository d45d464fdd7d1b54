"""Fixtures for the local SageMaker: emulated AWS with the backend installed, the dummy code in S3."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest
from moto import mock_aws
from testkit.local_sagemaker import BUCKET, HERE, REGION, Harness, tarball

from local_mode.sagemaker.backend import local_sagemaker
from local_mode.sagemaker.settings import JobEvent, LocalSageMakerSettings


@pytest.fixture
def harness(tmp_path: Path) -> Iterator[Harness]:
    events: list[JobEvent] = []
    settings = LocalSageMakerSettings(
        work_dir=tmp_path / "runs",
        fsx_root=tmp_path / "fsx",
        stop_grace_seconds=3,
        spot_restart_delay_seconds=0.2,
        checkpoint_sync_seconds=0.5,
        poll_seconds=0.1,
        on_event=events.append,
    )
    with mock_aws(), local_sagemaker(settings) as sm:
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET)
        yield Harness(sm, s3, boto3.client("sagemaker", region_name=REGION), events)


@pytest.fixture
def code_uri(harness: Harness) -> str:
    return harness.put("code/abc/sourcedir.tar.gz", tarball(HERE / "dummy_code"))
