"""Test stand-in for the framework module that the PyTorch/Hugging Face training images name in
SAGEMAKER_TRAINING_MODULE (`sagemaker_pytorch_container.training:main`, from the sagemaker-pytorch-training
package; requirements-dev.txt pins it and local mode runs it, this harness runs this stand-in).

Like that module it picks the runner from the reserved hyperparameters (torch_distributed -> the
toolkit's own TorchDistributedRunner, which builds the torchrun command) and calls the toolkit's
`entry_point.run`. One addition lets two "hosts" share this machine: HFTRAIN_TEST_MASTER_ADDR and
HFTRAIN_TEST_MASTER_PORT replace the master host name (algo-1, which does not resolve here) and the fixed
port 7777 in the torchrun command. Nothing else is changed.
"""

from __future__ import annotations

import os

from sagemaker_training import entry_point, environment, runner, torch_distributed


def main() -> None:
    env = environment.Environment()
    params = env.additional_framework_parameters
    if params.get("sagemaker_torch_distributed_enabled"):
        runner_type = runner.TorchDistributedRunnerType
    elif params.get("sagemaker_distributed_dataparallel_enabled"):
        runner_type = runner.SMDataParallelRunnerType
    elif params.get("sagemaker_mpi_enabled"):
        runner_type = runner.MPIRunnerType
    else:
        runner_type = runner.ProcessRunnerType

    master = os.environ.get("HFTRAIN_TEST_MASTER_ADDR")
    if master:
        environment.Environment.master_hostname = property(lambda self: master)
    port = os.environ.get("HFTRAIN_TEST_MASTER_PORT")
    if port:
        torch_distributed.MASTER_PORT = port

    entry_point.run(
        uri=env.module_dir,
        user_entry_point=env.user_entry_point,
        args=env.to_cmd_args(),
        env_vars=env.to_env_vars(),
        capture_error=True,
        runner_type=runner_type,
    )
