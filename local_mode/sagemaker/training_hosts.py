"""The hosts of one training request on this machine: code installed, environment, launch with the toolkit.

Shared by the local SageMaker (training_job.py) and the tests that run train.py on 1..N hosts through the real
sagemaker-training toolkit (tests/training/hftrain_smhost.py). Per host: the sourcedir unpacked into its code
dir (the toolkit then skips its own download), and the toolkit's console script `train`, which runs the
framework module the PyTorch/Hugging Face images name in SAGEMAKER_TRAINING_MODULE. With torch_distributed
the toolkit calls `torchrun`: a wrapper first on PATH (torchrun.py) moves the rendezvous from
algo-1:7777 to 127.0.0.1 and a port of the job's own, so jobs and hosts share this machine.
"""

from __future__ import annotations

import importlib.util
import shutil
import socket
import sys
import tarfile
from collections.abc import Callable, Sequence
from pathlib import Path

from local_mode.sagemaker.container_layout import Host
from local_mode.sagemaker.host_processes import HostProcess, LineCallback
from local_mode.sagemaker.job import JobSetupError
from local_mode.sagemaker.s3_channels import safe_extract

PACKAGE_DIR = Path(__file__).resolve().parent
REAL_FRAMEWORK_MODULE = "sagemaker_pytorch_container.training:main"  # what the PyTorch/HF DLCs set


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def install_code(host: Host, source: Path, *, program: str, submit: str) -> None:
    """The sourcedir (a tar.gz or a folder) into the host's code dir; the entry point must be in it."""
    code_dir = host.base_dir / "code"
    if source.is_dir():
        shutil.copytree(source, code_dir, dirs_exist_ok=True)
    elif source.is_file() and tarfile.is_tarfile(source):
        safe_extract(source, code_dir)
    else:
        raise JobSetupError(f"sagemaker_submit_directory {submit} is neither a tar.gz nor a folder")
    if not (code_dir / program).exists():
        raise JobSetupError(f"sagemaker_program {program} is not in {submit}")


def torchrun_wrapper(bin_dir: Path, python: Path) -> Path:
    """`<bin_dir>/torchrun` running torchrun.py with `python` (the hosts' interpreter); returns bin_dir."""
    wrapper = bin_dir / "torchrun"
    if not wrapper.exists():
        bin_dir.mkdir(parents=True, exist_ok=True)
        wrapper.write_text(f'#!/bin/sh\nexec "{python}" "{PACKAGE_DIR / "torchrun.py"}" "$@"\n')
        wrapper.chmod(0o755)
    return bin_dir


def launcher_command(python: Path) -> list[str]:
    """The toolkit's `train` console script next to `python` (as in the images), else its module."""
    launcher = python.parent / "train"
    return [str(launcher)] if launcher.exists() else [str(python), "-m", "sagemaker_training.cli.train"]


def host_env(
    base_env: dict[str, str],
    host: Host,
    *,
    job_name: str,
    job_arn: str,
    master_port: int,
    processes_per_host: int | None,
    bin_dir: Path,
) -> dict[str, str]:
    """One host's environment: the job's, plus what SageMaker's container has and the local rendezvous."""
    env = dict(base_env)
    env.setdefault("SAGEMAKER_TRAINING_MODULE", REAL_FRAMEWORK_MODULE)
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")  # every "host" is this machine
    env.update(
        {
            "SAGEMAKER_BASE_DIR": str(host.base_dir),
            "SM_STUDIO_LOCAL_MODE": "true",  # the toolkit then skips waiting for algo-N to resolve
            "TRAINING_JOB_NAME": job_name,
            "TRAINING_JOB_ARN": job_arn,
            "LOCAL_SM_MASTER_PORT": str(master_port),
            "LOCAL_SM_NPROC_PER_NODE": str(processes_per_host or ""),
            "PATH": f"{bin_dir}:{env['PATH']}",
        }
    )
    if "TENSORBOARD_LOGGING_DIR" in env:  # TensorBoardOutputConfig.LocalPath, under this host's /opt/ml
        env["TENSORBOARD_LOGGING_DIR"] = host.rewrite(env["TENSORBOARD_LOGGING_DIR"])
    return env


def training_processes(
    hosts: Sequence[Host],
    *,
    base_env: dict[str, str],
    job_name: str,
    job_arn: str,
    bin_dir: Path,
    log_dir: Path,
    processes_per_host: int | None = None,
    python: Path | None = None,
    command_prefix: Sequence[str] = (),
    per_host_env: Callable[[Host], dict[str, str]] | None = None,
    on_line: LineCallback | None = None,
) -> list[HostProcess]:
    """One HostProcess per host running the toolkit's `train` (not started yet), one rendezvous port for all.

    python: the interpreter of the hosts ("the image"; default this one); command_prefix: e.g. `nice -n 5`;
    per_host_env: added to one host's environment last."""
    python = python or Path(sys.executable)
    torchrun_wrapper(bin_dir, python)
    port = free_port()  # one rendezvous port per job attempt: jobs run side by side
    command = [*command_prefix, *launcher_command(python)]
    if importlib.util.find_spec("sagemaker_pytorch_container") is None:
        raise RuntimeError(
            "sagemaker-pytorch-training (the DLC's launcher module) is not installed: "
            "run `make setup` (requirements-dev.txt pins it)"
        )
    processes = []
    for host in hosts:
        env = host_env(
            base_env,
            host,
            job_name=job_name,
            job_arn=job_arn,
            master_port=port,
            processes_per_host=processes_per_host,
            bin_dir=bin_dir,
        )
        env.update(per_host_env(host) if per_host_env else {})
        log_path = log_dir / f"{host.name}.log"
        processes.append(
            HostProcess(host.name, command, env=env, cwd=host.root, log_path=log_path, on_line=on_line)
        )
    return processes
