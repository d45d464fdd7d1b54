"""Host planning and the config files a training / processing container finds."""

from __future__ import annotations

import json
from pathlib import Path

from local_mode.sagemaker.container_layout import (
    input_data_config,
    lay_out_processing_host,
    lay_out_training_host,
    plan_hosts,
)


def test_hosts_are_algo_1_to_n_with_their_own_root(tmp_path: Path):
    hosts = plan_hosts({"InstanceType": "ml.g5.2xlarge", "InstanceCount": 3}, tmp_path)
    assert [(h.name, h.index) for h in hosts] == [("algo-1", 0), ("algo-2", 1), ("algo-3", 2)]
    assert hosts[1].base_dir == tmp_path / "algo-2" / "opt" / "ml"
    assert hosts[1].path("/opt/ml/checkpoints") == tmp_path / "algo-2" / "opt" / "ml" / "checkpoints"


def test_instance_groups_number_hosts_across_groups(tmp_path: Path):
    hosts = plan_hosts(
        {
            "InstanceGroups": [
                {"InstanceGroupName": "gpu", "InstanceType": "ml.p4d.24xlarge", "InstanceCount": 2},
                {"InstanceGroupName": "cpu", "InstanceType": "ml.c5.xlarge", "InstanceCount": 1},
            ]
        },
        tmp_path,
    )
    assert [(h.name, h.group, h.instance_type) for h in hosts] == [
        ("algo-1", "gpu", "ml.p4d.24xlarge"),
        ("algo-2", "gpu", "ml.p4d.24xlarge"),
        ("algo-3", "cpu", "ml.c5.xlarge"),
    ]


def test_container_paths_in_arguments_move_under_the_base_dir(tmp_path: Path):
    host = plan_hosts({"InstanceType": "ml.c5.xlarge", "InstanceCount": 1}, tmp_path)[0]
    base = str(host.base_dir)
    assert (
        host.rewrite("/opt/ml/processing/input/code/runproc.sh") == f"{base}/processing/input/code/runproc.sh"
    )
    assert host.rewrite("--output-dir=/opt/ml/processing/output") == f"--output-dir={base}/processing/output"
    assert host.rewrite("/opt/ml") == base
    assert host.rewrite("/bin/bash") == "/bin/bash"
    assert host.rewrite("/opt/mlx/a") == "/opt/mlx/a"
    assert host.rewrite("s3://b/opt/ml/x") == "s3://b/opt/ml/x"


def test_training_config_files(tmp_path: Path):
    request = {
        "AlgorithmSpecification": {"TrainingInputMode": "File"},
        "HyperParameters": {"sagemaker_program": '"train.py"', "epochs": "3"},
        "InputDataConfig": [
            {
                "ChannelName": "train",
                "ContentType": "application/jsonlines",
                "DataSource": {
                    "S3DataSource": {
                        "S3Uri": "s3://b/t",
                        "S3DataType": "S3Prefix",
                        "S3DataDistributionType": "ShardedByS3Key",
                    }
                },
            },
            {
                "ChannelName": "fsx",
                "InputMode": "File",
                "DataSource": {
                    "FileSystemDataSource": {
                        "FileSystemId": "fs-1",
                        "FileSystemType": "FSxLustre",
                        "FileSystemAccessMode": "ro",
                        "DirectoryPath": "/abc/data",
                    }
                },
            },
        ],
        "ResourceConfig": {"InstanceType": "ml.g5.2xlarge", "InstanceCount": 2},
    }
    hosts = plan_hosts(request["ResourceConfig"], tmp_path)
    lay_out_training_host(request, hosts, hosts[1])
    config = hosts[1].base_dir / "input" / "config"
    assert json.loads((config / "hyperparameters.json").read_text()) == request["HyperParameters"]
    resource = json.loads((config / "resourceconfig.json").read_text())
    assert resource["current_host"] == "algo-2"
    assert resource["hosts"] == ["algo-1", "algo-2"]
    assert resource["current_instance_type"] == "ml.g5.2xlarge"
    assert resource["instance_groups"] == [
        {
            "instance_group_name": "homogeneousCluster",
            "instance_type": "ml.g5.2xlarge",
            "hosts": ["algo-1", "algo-2"],
        }
    ]
    data = json.loads((config / "inputdataconfig.json").read_text())
    assert data == input_data_config(request)
    assert data["train"] == {
        "TrainingInputMode": "File",
        "S3DistributionType": "ShardedByS3Key",
        "RecordWrapperType": "None",
        "ContentType": "application/jsonlines",
    }
    assert "S3DistributionType" not in data["fsx"]
    for sub in ("model", "output/data", "code", "input/data"):
        assert (hosts[1].base_dir / sub).is_dir()


def test_processing_config_files(tmp_path: Path):
    request = {
        "ProcessingJobName": "p",
        "ProcessingResources": {"ClusterConfig": {"InstanceCount": 2, "InstanceType": "ml.c5.xlarge"}},
    }
    hosts = plan_hosts(request["ProcessingResources"]["ClusterConfig"], tmp_path)
    lay_out_processing_host(request, "arn:p", hosts, hosts[0])
    config = hosts[0].base_dir / "config"
    assert json.loads((config / "resourceconfig.json").read_text()) == {
        "current_host": "algo-1",
        "hosts": ["algo-1", "algo-2"],
    }
    assert json.loads((config / "processingjobconfig.json").read_text())["ProcessingJobArn"] == "arn:p"
