"""What a training attempt's hosts get before the training code starts: the input channels (S3 objects copied,
sharded as SageMaker shards them, or FSx folders linked), the code (sourcedir.tar.gz unpacked into each host's
code dir) and the checkpoints restored from S3. Errors the caller would get from CreateTrainingJob or its first
minutes in AWS are JobSetupError, with SageMaker's wording where it has one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from local_mode.sagemaker.checkpoint_sync import CheckpointSync
from local_mode.sagemaker.container_layout import DEFAULT_CHECKPOINT_PATH, Host
from local_mode.sagemaker.job import JobSetupError
from local_mode.sagemaker.s3_channels import download_objects, parse_s3_uri, select_objects, shard
from local_mode.sagemaker.training_hosts import install_code


def decode_hyperparameter(value: str | None) -> Any:
    """Hyperparameter values are JSON-encoded strings (the SDK's convention); plain strings pass through."""
    if value is None:
        return None
    try:
        return json.loads(value)
    except (TypeError, ValueError):
        return value


def download_channels(request: dict[str, Any], s3: Any, hosts: list[Host], fsx_root: Path | None) -> None:
    """Every input channel of the request into /opt/ml/input/data/<channel> of every host."""
    default_mode = request.get("AlgorithmSpecification", {}).get("TrainingInputMode", "File")
    for channel in request.get("InputDataConfig") or []:
        name = channel["ChannelName"]
        mode = channel.get("InputMode", default_mode)
        if mode == "Pipe":
            raise JobSetupError(
                f"channel {name!r}: Pipe input mode does not run locally; use File or FastFile"
            )
        source = channel["DataSource"]
        if "S3DataSource" in source:
            _copy_s3_channel(s3, name, source["S3DataSource"], hosts)
        elif "FileSystemDataSource" in source:
            target = _file_system_folder(fsx_root, name, source["FileSystemDataSource"])
            for host in hosts:
                link = host.path(f"/opt/ml/input/data/{name}")
                link.parent.mkdir(parents=True, exist_ok=True)
                link.symlink_to(target, target_is_directory=True)
        else:
            raise JobSetupError(f"channel {name!r}: only S3 and file-system channels run locally")


def _copy_s3_channel(s3: Any, name: str, source: dict[str, Any], hosts: list[Host]) -> None:
    data_type = source.get("S3DataType", "S3Prefix")
    if data_type != "S3Prefix":
        raise JobSetupError(
            f"channel {name!r}: S3DataType {data_type} does not run locally; use S3Prefix"
        )
    uri = source["S3Uri"]
    objects = select_objects(s3, uri)
    if not objects:
        raise JobSetupError(
            f'No S3 objects found under S3 URL "{uri}" given in input data source for channel {name!r}'
        )
    bucket, _ = parse_s3_uri(uri)
    distribution = source.get("S3DataDistributionType", "FullyReplicated")
    for host in hosts:
        mine = shard(objects, distribution, host.index, len(hosts))
        download_objects(s3, bucket, mine, host.path(f"/opt/ml/input/data/{name}"))


def _file_system_folder(root: Path | None, name: str, source: dict[str, Any]) -> Path:
    """The folder under the local FSx root that a file-system channel reads."""
    directory = source.get("DirectoryPath", "/")
    if root is None:
        raise JobSetupError(
            f"channel {name!r} reads {source.get('FileSystemType')} {directory}: set fsx_root"
        )
    target = (root / directory.lstrip("/")).resolve()
    if not target.is_relative_to(root) or not target.is_dir():
        raise JobSetupError(
            f"channel {name!r}: {directory} is not a folder under the local FSx root {root}"
        )
    return target


def install_training_code(request: dict[str, Any], s3: Any, hosts: list[Host], attempt_dir: Path) -> None:
    """sourcedir.tar.gz (from S3, once per attempt, or a container path under network isolation) unpacked into
    every host's code dir."""
    hyperparameters = request.get("HyperParameters") or {}
    program = decode_hyperparameter(hyperparameters.get("sagemaker_program"))
    submit = decode_hyperparameter(hyperparameters.get("sagemaker_submit_directory"))
    if not program or not submit:
        raise JobSetupError(
            "local SageMaker runs script-mode jobs: hyperparameters sagemaker_program and "
            "sagemaker_submit_directory are required"
        )
    for host in hosts:
        if str(submit).startswith("s3://"):
            tarball = attempt_dir / "sourcedir.tar.gz"
            if not tarball.exists():
                bucket, key = parse_s3_uri(submit)
                s3.download_file(bucket, key, str(tarball))
        else:  # network isolation: a container path, e.g. /opt/ml/input/data/code/sourcedir.tar.gz
            tarball = host.path(str(submit))
        install_code(host, tarball, program=str(program), submit=str(submit))


def checkpoint_sync(request: dict[str, Any], s3: Any, hosts: list[Host],
                    interval_seconds: float) -> CheckpointSync | None:
    """The sync of every host's checkpoint folder with CheckpointConfig.S3Uri (None without one)."""
    config = request.get("CheckpointConfig") or {}
    if not config.get("S3Uri"):
        return None
    local_path = config.get("LocalPath") or DEFAULT_CHECKPOINT_PATH
    return CheckpointSync(
        s3,
        config["S3Uri"],
        {host.name: host.path(local_path) for host in hosts},
        interval_seconds=interval_seconds,
    )
