"""What the SageMaker training container tells the script: paths, hosts, channels and their distribution.

Everything here reads environment variables and JSON files only (no torch), so it is cheap to test.
Outside a container `SAGEMAKER_BASE_DIR` relocates `/opt/ml`, as the sagemaker-training toolkit does.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

SHARDED = "ShardedByS3Key"
REPLICATED = "FullyReplicated"


def base_dir() -> Path:
    return Path(os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml"))


def default_checkpoint_dir() -> str:
    """CheckpointConfig.LocalPath default: /opt/ml/checkpoints, or under SAGEMAKER_BASE_DIR when set."""
    return str(base_dir() / "checkpoints")


def _read_json(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {}


@dataclass
class SageMakerEnv:
    """The parts of the container contract the training code uses."""

    hosts: list[str] = field(default_factory=lambda: ["algo-1"])
    current_host: str = "algo-1"
    model_dir: str = ""
    output_data_dir: str = ""
    channels: dict[str, str] = field(default_factory=dict)  # name -> local dir
    distribution: dict[str, str] = field(default_factory=dict)  # name -> S3DistributionType
    job_name: str = "local"  # TRAINING_JOB_NAME (set by SageMaker in the container)

    @property
    def host_index(self) -> int:
        return self.hosts.index(self.current_host) if self.current_host in self.hosts else 0

    @property
    def num_hosts(self) -> int:
        return len(self.hosts)

    def is_sharded(self, channel: str) -> bool:
        return self.distribution.get(channel, REPLICATED) == SHARDED and self.num_hosts > 1

    @classmethod
    def from_environ(cls, environ: dict[str, str] | None = None) -> SageMakerEnv:
        env = os.environ if environ is None else environ
        base = Path(env.get("SAGEMAKER_BASE_DIR", "/opt/ml"))
        config_dir = base / "input" / "config"
        hosts, current = _hosts(env, config_dir)
        distribution = _distribution(env, config_dir)
        return cls(
            hosts=list(hosts),
            current_host=current,
            model_dir=env.get("SM_MODEL_DIR") or str(base / "model"),
            output_data_dir=env.get("SM_OUTPUT_DATA_DIR") or str(base / "output" / "data"),
            channels=_channels(env, base / "input" / "data", set(distribution)),
            distribution=distribution,
            job_name=env.get("TRAINING_JOB_NAME") or _training_env_job_name(env) or "local",
        )


def _json_env(env, name: str, fallback):
    """The JSON in the variable `name` when it is set and parses (and is not empty), else `fallback`."""
    if env.get(name):
        with contextlib.suppress(ValueError):
            return json.loads(env[name]) or fallback
    return fallback


def _hosts(env, config_dir: Path) -> tuple[list[str], str]:
    """(sorted hosts, current host): SM_RESOURCE_CONFIG / SM_HOSTS / SM_CURRENT_HOST over resourceconfig.json."""
    resource = _json_env(env, "SM_RESOURCE_CONFIG", _read_json(config_dir / "resourceconfig.json"))
    hosts = resource.get("hosts")
    if env.get("SM_HOSTS"):
        with contextlib.suppress(ValueError):
            hosts = json.loads(env["SM_HOSTS"])  # an empty list counts too (then: algo-1)
    hosts = sorted(hosts) if hosts else ["algo-1"]
    return hosts, env.get("SM_CURRENT_HOST") or resource.get("current_host") or hosts[0]


def _distribution(env, config_dir: Path) -> dict[str, str]:
    """channel -> S3DistributionType, from SM_INPUT_DATA_CONFIG or inputdataconfig.json."""
    input_config = _json_env(env, "SM_INPUT_DATA_CONFIG", _read_json(config_dir / "inputdataconfig.json"))
    return {
        name: str(cfg.get("S3DistributionType", REPLICATED))
        for name, cfg in (input_config or {}).items()
        if isinstance(cfg, dict)
    }


def _channels(env, data_dir: Path, names: set[str]) -> dict[str, str]:
    """channel -> local dir: SM_CHANNEL_<NAME> first, then the configured names and the dirs under input/data."""
    channels: dict[str, str] = {}
    if env.get("SM_CHANNELS"):
        with contextlib.suppress(ValueError):
            names |= set(json.loads(env["SM_CHANNELS"]))
    for key, value in env.items():
        if key.startswith("SM_CHANNEL_"):
            channels[key[len("SM_CHANNEL_"):].lower()] = value
    for name in names:
        channels.setdefault(name, str(data_dir / name))
    if data_dir.is_dir():  # channels present on disk without a config (plain local runs)
        for child in data_dir.iterdir():
            if child.is_dir():
                channels.setdefault(child.name, str(child))
    return channels


def _training_env_job_name(env) -> str | None:
    with contextlib.suppress(ValueError, AttributeError):
        return json.loads(env.get("SM_TRAINING_ENV") or "{}").get("job_name")
    return None
