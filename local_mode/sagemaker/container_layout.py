"""The container contract laid out in folders: one "root file system" folder per host.

A host's container path P lives at `<host root>/P`, so /opt/ml is `<host root>/opt/ml`, which is what
SAGEMAKER_BASE_DIR points at (the toolkit, the training code and runproc.sh relocate /opt/ml with it).
Config files follow what SageMaker writes into a training container (input/config/*.json) and a
processing container (config/resourceconfig.json, config/processingjobconfig.json).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

CONTAINER_BASE = "/opt/ml"
DEFAULT_CHECKPOINT_PATH = "/opt/ml/checkpoints"
DEFAULT_GROUP = "homogeneousCluster"
# /opt/ml as a whole path component, anywhere in an argument ("--x=/opt/ml/a" too).
_OPT_ML = re.compile(r"(?<![\w./-])/opt/ml(?=/|$|\s|[\"'])")


@dataclass(frozen=True)
class Host:
    name: str  # algo-1 ... algo-N
    index: int  # position in the sorted host list (node rank, shard index)
    instance_type: str
    group: str
    root: Path  # the host's "/"

    @property
    def base_dir(self) -> Path:
        return self.root / CONTAINER_BASE.lstrip("/")

    def path(self, container_path: str) -> Path:
        """Where a container path of this host is on this machine."""
        if not container_path.startswith("/"):
            raise ValueError(f"container path must be absolute: {container_path!r}")
        return self.root / container_path.lstrip("/")

    def rewrite(self, argument: str) -> str:
        """An argument with every /opt/ml path moved under this host's base dir."""
        return _OPT_ML.sub(lambda _: str(self.base_dir), argument)


def plan_hosts(resource_config: dict[str, Any], attempt_dir: Path) -> list[Host]:
    """Hosts algo-1..N for a ResourceConfig or ProcessingResources.ClusterConfig (instance groups too)."""
    groups = resource_config.get("InstanceGroups")
    if groups:
        spec = [(g["InstanceGroupName"], g["InstanceType"], int(g["InstanceCount"])) for g in groups]
    else:
        spec = [
            (
                DEFAULT_GROUP,
                resource_config.get("InstanceType", "local"),
                int(resource_config["InstanceCount"]),
            )
        ]
    hosts: list[Host] = []
    for group, instance_type, count in spec:
        for _ in range(count):
            name = f"algo-{len(hosts) + 1}"
            hosts.append(Host(name, len(hosts), instance_type, group, attempt_dir / name))
    return hosts


def training_resource_config(hosts: list[Host], host: Host) -> dict[str, Any]:
    groups: dict[str, dict[str, Any]] = {}
    for h in hosts:
        entry = groups.setdefault(
            h.group, {"instance_group_name": h.group, "instance_type": h.instance_type, "hosts": []}
        )
        entry["hosts"].append(h.name)
    return {
        "current_host": host.name,
        "current_instance_type": host.instance_type,
        "current_group_name": host.group,
        "hosts": [h.name for h in hosts],
        "instance_groups": list(groups.values()),
        "network_interface_name": "eth0",
    }


def input_data_config(request: dict[str, Any]) -> dict[str, Any]:
    """inputdataconfig.json: per channel, the fields SageMaker passes to the container."""
    default_mode = request.get("AlgorithmSpecification", {}).get("TrainingInputMode", "File")
    config: dict[str, Any] = {}
    for channel in request.get("InputDataConfig", []) or []:
        entry: dict[str, Any] = {
            "TrainingInputMode": channel.get("InputMode", default_mode),
            "RecordWrapperType": channel.get("RecordWrapperType", "None"),
        }
        s3 = channel["DataSource"].get("S3DataSource")
        if s3:
            entry["S3DistributionType"] = s3.get("S3DataDistributionType", "FullyReplicated")
        for key in ("ContentType", "CompressionType"):
            if key in channel:
                entry[key] = channel[key]
        config[channel["ChannelName"]] = entry
    return config


def write_json(path: Path, obj: Any) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, indent=2, sort_keys=True))


def lay_out_training_host(request: dict[str, Any], hosts: list[Host], host: Host) -> None:
    """input/config/*.json, model/, output/data/, code/ and the channel folders of one training host."""
    base = host.base_dir
    config_dir = base / "input" / "config"
    write_json(config_dir / "hyperparameters.json", dict(request.get("HyperParameters") or {}))
    write_json(config_dir / "resourceconfig.json", training_resource_config(hosts, host))
    write_json(config_dir / "inputdataconfig.json", input_data_config(request))
    for sub in ("model", "output/data", "code", "input/data"):
        (base / sub).mkdir(parents=True, exist_ok=True)


def lay_out_processing_host(request: dict[str, Any], arn: str, hosts: list[Host], host: Host) -> None:
    """config/resourceconfig.json (hosts, current_host) and config/processingjobconfig.json."""
    config_dir = host.base_dir / "config"
    write_json(
        config_dir / "resourceconfig.json", {"current_host": host.name, "hosts": [h.name for h in hosts]}
    )
    write_json(config_dir / "processingjobconfig.json", {**request, "ProcessingJobArn": arn})
    (host.base_dir / "output").mkdir(parents=True, exist_ok=True)
