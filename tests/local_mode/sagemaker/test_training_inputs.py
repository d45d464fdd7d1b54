"""A training attempt's inputs (local_mode/sagemaker/training_inputs.py): channels per host, sharded as SageMaker shards them
or linked from the local FSx root, and the checkpoint sync a CheckpointConfig asks for."""

from __future__ import annotations

from pathlib import Path

import pytest
from testkit.local_sagemaker import mocked_bucket

from local_mode.sagemaker.container_layout import plan_hosts
from local_mode.sagemaker.job import JobSetupError
from local_mode.sagemaker.training_inputs import checkpoint_sync, decode_hyperparameter, download_channels

BUCKET = "training-inputs"


def _channel(name: str, source: dict, **extra) -> dict:
    return {"ChannelName": name, "DataSource": source, **extra}


def test_s3_channels_are_sharded_and_fsx_channels_linked(tmp_path: Path) -> None:
    hosts = plan_hosts({"InstanceType": "ml.g5.xlarge", "InstanceCount": 2}, tmp_path / "attempt-1")
    (tmp_path / "fsx" / "team" / "data").mkdir(parents=True)
    request = {"InputDataConfig": [
        _channel("train", {"S3DataSource": {"S3Uri": f"s3://{BUCKET}/d/", "S3DataDistributionType": "ShardedByS3Key"}}),
        _channel("all", {"S3DataSource": {"S3Uri": f"s3://{BUCKET}/d/"}}),
        _channel("shared", {"FileSystemDataSource": {"FileSystemType": "FSxLustre", "DirectoryPath": "/team/data"}}),
    ]}
    with mocked_bucket(BUCKET) as s3:
        for key in ("d/a", "d/b"):
            s3.put_object(Bucket=BUCKET, Key=key, Body=key.encode())
        download_channels(request, s3, hosts, (tmp_path / "fsx").resolve())
        assert checkpoint_sync(request, s3, hosts, 2.0) is None
        sync = checkpoint_sync({"CheckpointConfig": {"S3Uri": f"s3://{BUCKET}/ckpt/"}}, s3, hosts, 2.0)
        assert sync is not None and sync.restore() == 0
    assert [sorted(p.name for p in h.path("/opt/ml/input/data/train").iterdir()) for h in hosts] == [["a"], ["b"]]
    assert all(sorted(p.name for p in h.path("/opt/ml/input/data/all").iterdir()) == ["a", "b"] for h in hosts)
    assert hosts[1].path("/opt/ml/input/data/shared").resolve() == (tmp_path / "fsx" / "team" / "data").resolve()


@pytest.mark.parametrize(("channel", "message"), [
    (_channel("train", {"S3DataSource": {"S3Uri": "s3://b/d/"}}, InputMode="Pipe"), "Pipe input mode does not run"),
    (_channel("train", {"S3DataSource": {"S3Uri": "s3://b/d/", "S3DataType": "ManifestFile"}}),
     "S3DataType ManifestFile does not run locally"),
    (_channel("train", {"FileSystemDataSource": {"FileSystemType": "EFS", "DirectoryPath": "/x"}}),
     "reads EFS /x: set fsx_root"),
    (_channel("train", {"Other": {}}), "only S3 and file-system channels run locally"),
])
def test_channels_that_do_not_run_locally_are_setup_errors(tmp_path: Path, channel: dict, message: str) -> None:
    hosts = plan_hosts({"InstanceType": "ml.g5.xlarge", "InstanceCount": 1}, tmp_path)
    with pytest.raises(JobSetupError, match=message):
        download_channels({"InputDataConfig": [channel]}, None, hosts, None)


def test_hyperparameters_are_json_or_plain_strings() -> None:
    assert decode_hyperparameter('"train.py"') == "train.py" and decode_hyperparameter("train.py") == "train.py"
    assert decode_hyperparameter("3") == 3 and decode_hyperparameter(None) is None
