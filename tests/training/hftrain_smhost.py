"""Lay out SageMaker "hosts" on this machine and run them with the real sagemaker-training toolkit.

Each host gets its own SAGEMAKER_BASE_DIR with input/config/{hyperparameters,resourceconfig,
inputdataconfig}.json, input/data/<channel>/ and the code as a sourcedir.tar.gz; the toolkit's `train`
console script then downloads (extracts) the code, installs requirements.txt, and launches torchrun exactly
as in the training container. See sm_framework_shim.py for the one substitution (the master address).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tarfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TRAINING_CODE = REPO / "training_code"
HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def build_sourcedir(target: Path, source: Path = TRAINING_CODE) -> Path:
    """sourcedir.tar.gz of training_code/ as the SDK makes it (files at the archive root)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(target, "w:gz") as tar:
        for path in sorted(source.rglob("*")):
            rel = path.relative_to(source)
            if "__pycache__" in rel.parts or path.suffix == ".pyc" or not path.is_file():
                continue
            tar.add(path, arcname=str(rel))
    return target


def encode_hyperparameters(hps: dict) -> dict:
    """Every value JSON-encoded as a string, as CreateTrainingJob carries them."""
    return {k: json.dumps(v) for k, v in hps.items()}


@dataclass
class Host:
    name: str
    base: Path

    @property
    def model_dir(self) -> Path:
        return self.base / "model"

    @property
    def checkpoint_dir(self) -> Path:
        return self.base / "checkpoints"

    @property
    def output_dir(self) -> Path:
        return self.base / "output"


def layout_hosts(
    root: Path,
    *,
    hosts: list[str],
    hyperparameters: dict,
    channels: dict[str, dict[str, list[Path]]],
    distribution: dict[str, str],
    sourcedir: Path,
    processes_per_host: int = 1,
) -> list[Host]:
    """channels: name -> host -> files to place in that host's channel dir."""
    out = []
    for host in hosts:
        base = root / host
        config = base / "input" / "config"
        config.mkdir(parents=True, exist_ok=True)
        for made in ("model", "output/data", "checkpoints"):  # SageMaker creates these before the job starts
            (base / made).mkdir(parents=True, exist_ok=True)
        hps = {
            "sagemaker_program": "train.py",
            "sagemaker_submit_directory": str(sourcedir),
            "sagemaker_container_log_level": 20,
            "sagemaker_job_name": "hftrain-test",
            "sagemaker_region": "us-east-1",
            "sagemaker_torch_distributed_enabled": True,
            "sagemaker_mpi_num_of_processes_per_host": processes_per_host,
            **hyperparameters,
        }
        (config / "hyperparameters.json").write_text(json.dumps(encode_hyperparameters(hps)))
        (config / "resourceconfig.json").write_text(json.dumps({
            "current_host": host, "current_instance_type": "ml.m5.xlarge", "current_group_name": "homogeneousCluster",
            "hosts": hosts, "network_interface_name": "lo",
            "instance_groups": [{"instance_group_name": "homogeneousCluster", "instance_type": "ml.m5.xlarge",
                                 "hosts": hosts}],
        }))
        (config / "inputdataconfig.json").write_text(json.dumps({
            name: {"TrainingInputMode": "File", "S3DistributionType": distribution.get(name, "FullyReplicated"),
                   "RecordWrapperType": "None"}
            for name in channels
        }))
        for name, per_host in channels.items():
            channel_dir = base / "input" / "data" / name
            channel_dir.mkdir(parents=True, exist_ok=True)
            for file in per_host.get(host, []):
                shutil.copy(file, channel_dir / Path(file).name)
        out.append(Host(host, base))
    return out


def host_env(host: Host, *, master_port: int, extra: dict | None = None) -> dict:
    env = dict(os.environ)
    venv_bin = str(Path(sys.executable).parent)
    env.update({
        "SAGEMAKER_BASE_DIR": str(host.base),
        "SAGEMAKER_TRAINING_MODULE": "sm_framework_shim:main",
        "SM_STUDIO_LOCAL_MODE": "true",  # the toolkit then skips waiting for algo-N to resolve
        "HFTRAIN_TEST_MASTER_ADDR": "127.0.0.1",
        "HFTRAIN_TEST_MASTER_PORT": str(master_port),
        "GLOO_SOCKET_IFNAME": "lo",
        "PYTHONPATH": os.pathsep.join([str(HERE), env.get("PYTHONPATH", "")]).rstrip(os.pathsep),
        "PATH": os.pathsep.join([venv_bin, env.get("PATH", "")]),
        "PIP_NO_INDEX": "1",  # requirements.txt is already satisfied here: never reach for the network
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "HF_DATASETS_CACHE": str(host.base / "hf-cache"),
        "OMP_NUM_THREADS": "1",
        "TOKENIZERS_PARALLELISM": "false",
    })
    env.update(extra or {})
    return env


@dataclass
class HostResult:
    host: Host
    returncode: int
    log: str


def run_hosts(hosts: list[Host], *, timeout: float = 600, extra_env: dict | None = None) -> list[HostResult]:
    """Start `train` for every host at once and wait (killing all on timeout: no hang survives a test)."""
    port = free_port()
    procs = []
    train = str(Path(sys.executable).parent / "train")
    for host in hosts:
        log_path = host.base / "train.log"
        handle = open(log_path, "w")  # noqa: SIM115 - closed below
        proc = subprocess.Popen(
            ["nice", "-n", "5", train], env=host_env(host, master_port=port, extra=extra_env), stdout=handle,
            stderr=subprocess.STDOUT, cwd=str(host.base), start_new_session=True,
        )
        procs.append((host, proc, handle, log_path))
    deadline = time.time() + timeout
    results = []
    try:
        for _host, proc, _handle, _log in procs:
            remaining = max(1.0, deadline - time.time())
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=remaining)
    finally:
        for host, proc, handle, log_path in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 9)
                proc.wait()
            handle.close()
            results.append(HostResult(host, proc.returncode, log_path.read_text()))
    return results
