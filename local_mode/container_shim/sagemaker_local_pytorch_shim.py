"""Stand-in for the PyTorch DLC's framework module when `sagemaker-pytorch-training` is not installed.

The DLC sets SAGEMAKER_TRAINING_MODULE=sagemaker_pytorch_container.training:main, which picks the
toolkit's runner from the reserved hyperparameters. The local runner uses that real module when it is
importable; this file only keeps the same choice (MPI, SMDDP/pytorchddp, torch_distributed, else one
process) so jobs still launch through the toolkit's own runners. It lives in a folder of its own that is
put on PYTHONPATH for the `train` process only when needed.
"""

from sagemaker_training import entry_point, environment, runner


def main() -> None:
    env = environment.Environment()
    params = env.additional_framework_parameters
    runner_type = runner.ProcessRunnerType
    if env.current_instance_group in env.distribution_instance_groups:
        if params.get("sagemaker_mpi_enabled"):
            runner_type = runner.MPIRunnerType
        elif params.get("sagemaker_pytorch_ddp_enabled"):
            runner_type = runner.SMDataParallelRunnerType
        elif params.get("sagemaker_torch_distributed_enabled"):
            runner_type = runner.TorchDistributedRunnerType
        elif params.get("sagemaker_distributed_dataparallel_enabled"):
            runner_type = runner.SMDataParallelRunnerType
    entry_point.run(
        uri=env.module_dir,
        user_entry_point=env.user_entry_point,
        args=env.to_cmd_args(),
        env_vars=env.to_env_vars(),
        capture_error=True,
        runner_type=runner_type,
    )
