"""Run train.py on SageMaker "hosts" of this machine exactly as the local SageMaker does, without S3.

A test describes its job as a CreateTrainingJob request and the files each host's channels receive;
`lay_out` gives every host its folders and input/config/*.json (local_mode.sagemaker.container_layout) and `run`
launches them with local_mode.sagemaker.training_hosts: the code bundle unpacked per host, the real toolkit's `train`,
the real framework module, torchrun with the rendezvous on 127.0.0.1, the job environment of local mode
(offline: no package index, no Hub, no AWS endpoint). What is test-only: channel files copied in place of an
S3 download, a per-host datasets cache, `nice`, and a deadline that ends every host.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from local_mode.sagemaker.container_layout import Host, lay_out_training_host, plan_hosts
from local_mode.sagemaker.host_processes import wait_for_hosts
from local_mode.sagemaker.job import job_env
from local_mode.sagemaker.settings import LocalSageMakerSettings
from local_mode.sagemaker.training_hosts import install_code, training_processes
from stacks.assets.code_asset import sourcedir_bytes

REPO = Path(__file__).resolve().parents[2]
REGION = "us-east-1"
INSTANCE_TYPE = "ml.m5.xlarge"


def build_sourcedir(target: Path, wheels: tuple[Path, ...] = ()) -> Path:
    """sourcedir.tar.gz of training_code/ as the stack deploys it (stacks/assets/code_asset.py)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(sourcedir_bytes(REPO / "training_code", wheels))
    return target


def training_request(
    *,
    instance_count: int,
    hyperparameters: dict[str, Any],
    channels: dict[str, str],
    sourcedir: Path,
    processes_per_host: int = 1,
    environment: dict[str, str] | None = None,
    name: str = "hftrain-test",
) -> dict[str, Any]:
    """A CreateTrainingJob request with the reserved hyperparameters the SDK's estimator adds (values
    JSON-encoded); channels: name -> S3DataDistributionType."""
    hps = {
        "sagemaker_program": "train.py",
        "sagemaker_submit_directory": str(sourcedir),
        "sagemaker_container_log_level": 20,
        "sagemaker_job_name": name,
        "sagemaker_region": REGION,
        "sagemaker_torch_distributed_enabled": True,
        "sagemaker_mpi_num_of_processes_per_host": processes_per_host,
        **hyperparameters,
    }
    return {
        "TrainingJobName": name,
        "AlgorithmSpecification": {"TrainingInputMode": "File"},
        "HyperParameters": {k: json.dumps(v, default=str) for k, v in hps.items()},
        "ResourceConfig": {"InstanceType": INSTANCE_TYPE, "InstanceCount": instance_count},
        "InputDataConfig": [
            {"ChannelName": channel, "DataSource": {"S3DataSource": {
                "S3DataType": "S3Prefix", "S3Uri": f"s3://hftrain-tests/{channel}/",
                "S3DataDistributionType": distribution}}}
            for channel, distribution in channels.items()
        ],
        "Environment": {"TOKENIZERS_PARALLELISM": "false", **(environment or {})},
    }


@dataclass
class HostResult:
    host: Host
    returncode: int | None
    log: str


@dataclass
class LocalTraining:
    request: dict[str, Any]
    root: Path
    hosts: list[Host]
    sourcedir: Path

    def run(
        self,
        *,
        timeout: float = 600,
        python: Path | None = None,
        adjust_env: Callable[[dict[str, str]], dict[str, str]] | None = None,
    ) -> list[HostResult]:
        """Every host at once; on `timeout` every host is ended and TimeoutError raised.

        python: the hosts' interpreter (an image stand-in; its bin/ goes first on PATH); adjust_env: applied
        to the job environment before the per-host variables."""
        for host in self.hosts:
            install_code(host, self.sourcedir, program="train.py", submit=str(self.sourcedir))
        env = job_env(LocalSageMakerSettings(work_dir=self.root / "runs"), self.request, REGION)
        if python is not None:
            env["PATH"] = f"{python.parent}:{env['PATH']}"
        env = adjust_env(env) if adjust_env else env
        name = self.request["TrainingJobName"]
        processes = training_processes(
            self.hosts, base_env=env, job_name=name,
            job_arn=f"arn:aws:sagemaker:{REGION}:123456789012:training-job/{name}", bin_dir=self.root / "bin",
            log_dir=self.root / "logs", python=python, command_prefix=("nice", "-n", "5"),
            per_host_env=lambda host: {"HF_DATASETS_CACHE": str(host.root / "hf-cache")},
        )
        for process in processes:
            process.start()
        deadline = time.monotonic() + timeout
        outcome, _ = wait_for_hosts(
            processes, grace_seconds=5, poll_seconds=0.2,
            after_poll=lambda: "timeout" if time.monotonic() > deadline else None,
        )
        results = [HostResult(h, p.poll(), p.log_path.read_text(errors="replace"))
                   for h, p in zip(self.hosts, processes, strict=True)]
        if outcome == "timeout":
            tails = "\n".join(f"--- {r.host.name}\n{r.log[-2000:]}" for r in results)
            raise TimeoutError(f"hosts still running after {timeout}s, ended:\n{tails}")
        return results


def lay_out(
    root: Path,
    *,
    hosts: list[str],
    hyperparameters: dict[str, Any],
    channels: dict[str, dict[str, list[Path]]],
    sourcedir: Path,
    distribution: dict[str, str] | None = None,
    processes_per_host: int = 1,
    environment: dict[str, str] | None = None,
) -> LocalTraining:
    """channels: name -> host name -> the files that host's channel folder receives (what its share of the
    S3 prefix would be); hosts: their names (algo-1..N in SageMaker; others to test a restart elsewhere)."""
    request = training_request(
        instance_count=len(hosts), hyperparameters=hyperparameters, sourcedir=sourcedir,
        channels={name: (distribution or {}).get(name, "FullyReplicated") for name in channels},
        processes_per_host=processes_per_host, environment=environment,
    )
    planned = [dataclasses.replace(h, name=name, root=root / name)
               for h, name in zip(plan_hosts(request["ResourceConfig"], root), hosts, strict=True)]
    for host in planned:
        lay_out_training_host(request, planned, host)
        host.path("/opt/ml/checkpoints").mkdir(parents=True)  # CheckpointConfig's LocalPath, made by SageMaker
        for channel, per_host in channels.items():
            folder = host.path(f"/opt/ml/input/data/{channel}")
            folder.mkdir(parents=True, exist_ok=True)
            for file in per_host.get(host.name, []):
                shutil.copy(file, folder / Path(file).name)
    return LocalTraining(request, root, planned, sourcedir)
