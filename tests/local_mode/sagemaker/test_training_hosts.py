"""What every training host gets from training_hosts.py (the local SageMaker and the train.py tests share it):
its environment, the torchrun wrapper, the toolkit's launcher and the code bundle."""

from __future__ import annotations

import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from local_mode.sagemaker.container_layout import plan_hosts
from local_mode.sagemaker.job import JobSetupError
from local_mode.sagemaker.training_hosts import (
    REAL_FRAMEWORK_MODULE,
    host_env,
    install_code,
    torchrun_wrapper,
    training_processes,
)


def _hosts(tmp_path: Path, count: int = 2):
    return plan_hosts({"InstanceType": "ml.m5.xlarge", "InstanceCount": count}, tmp_path)


def test_host_env_points_the_toolkit_at_the_host_and_the_local_rendezvous(tmp_path: Path):
    host = _hosts(tmp_path)[1]
    env = host_env({"PATH": "/usr/bin", "GLOO_SOCKET_IFNAME": "eth9"}, host, job_name="j", job_arn="arn:j",
                   master_port=4321, processes_per_host=None, bin_dir=tmp_path / "bin")
    assert env["SAGEMAKER_BASE_DIR"] == str(tmp_path / "algo-2" / "opt" / "ml")
    assert env["SAGEMAKER_TRAINING_MODULE"] == REAL_FRAMEWORK_MODULE  # the DLC's module, not a stand-in
    assert env["SM_STUDIO_LOCAL_MODE"] == "true"
    assert env["PATH"] == f"{tmp_path / 'bin'}:/usr/bin"  # the torchrun wrapper comes first
    assert (env["LOCAL_SM_MASTER_PORT"], env["LOCAL_SM_NPROC_PER_NODE"]) == ("4321", "")
    assert env["GLOO_SOCKET_IFNAME"] == "eth9"  # the job's own setting wins
    assert (env["TRAINING_JOB_NAME"], env["TRAINING_JOB_ARN"]) == ("j", "arn:j")


def test_the_torchrun_wrapper_runs_torchrun_local_with_the_hosts_python(tmp_path: Path):
    bin_dir = torchrun_wrapper(tmp_path / "bin", Path(sys.executable))
    done = subprocess.run([str(bin_dir / "torchrun"), "--help"], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "LOCAL_SM_MASTER_PORT": "5"})
    assert "local torchrun: --help" in done.stderr
    assert "--nproc_per_node" in done.stdout  # the real torchrun's own help


def test_training_processes_run_the_toolkits_train_for_every_host(tmp_path: Path):
    hosts = _hosts(tmp_path)
    processes = training_processes(hosts, base_env={"PATH": "/usr/bin"}, job_name="j", job_arn="arn:j",
                                   bin_dir=tmp_path / "bin", log_dir=tmp_path / "logs",
                                   command_prefix=("nice", "-n", "5"))
    assert [p.host for p in processes] == ["algo-1", "algo-2"]
    assert processes[0].command == ["nice", "-n", "5", str(Path(sys.executable).parent / "train")]
    assert processes[1].log_path == tmp_path / "logs" / "algo-2.log"
    assert (tmp_path / "bin" / "torchrun").stat().st_mode & 0o111


def test_install_code_unpacks_the_bundle_and_checks_the_entry_point(tmp_path: Path):
    (host,) = _hosts(tmp_path / "hosts", 1)
    source = tmp_path / "src"
    source.mkdir()
    (source / "train.py").write_text("print('hi')\n")
    bundle = tmp_path / "sourcedir.tar.gz"
    with tarfile.open(bundle, "w:gz") as tar:
        tar.add(source / "train.py", arcname="train.py")
    install_code(host, bundle, program="train.py", submit="s3://b/sourcedir.tar.gz")
    assert (host.base_dir / "code" / "train.py").read_text() == "print('hi')\n"
    with pytest.raises(JobSetupError, match="sagemaker_program other.py is not in s3://b/x"):
        install_code(host, source, program="other.py", submit="s3://b/x")
    with pytest.raises(JobSetupError, match="neither a tar.gz nor a folder"):
        install_code(host, source / "train.py", program="train.py", submit="/opt/ml/input/data/code/train.py")
