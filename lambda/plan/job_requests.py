"""CreateTrainingJob / CreateProcessingJob requests, built by pure functions from a planned run.

They read only the typed plan (`run.attempts`, `run.job_names`, `run.uris`: plan/run.py) and its typed spec: Prepare
builds every request of a run once (`build_requests`) for pre-flight to check; start_* build one again.

The content matches what the SageMaker Python SDK (v2) Hugging Face estimator and framework processor
send for the same settings (sagemaker-python-sdk v2, `sagemaker/estimator.py` Framework and
`sagemaker/processing.py` FrameworkProcessor): reserved `sagemaker_*` hyperparameters, every
hyperparameter value JSON-encoded, `sourcedir.tar.gz` from the deploy-time code prefix, torch_distributed
flags, managed spot with a checkpoint prefix kept across attempts. A training job that needs no internet (a model
from S3, nothing fetched from the Hub, no remote reporting: `hyperparameters.needs_internet`) runs with
EnableNetworkIsolation; it cannot download `sourcedir.tar.gz` itself, so the code arrives as the `code` channel
and `sagemaker_submit_directory` names the file inside the container (what the SDK v2 does).
"""

from __future__ import annotations

import json
from typing import Any

from contract import progress_lines, stall_board, tracking, verdict_metrics
from hfsm_lambda import s3_layout
from hfsm_lambda.plan import checkpoint_interval, efa
from hfsm_lambda.plan.run import Run
from hfsm_lambda.settings import Settings
from hfsm_lambda.spec import hyperparameters, typed
from hfsm_lambda.spec.typed import RunSpec

ENTRY_POINT = "train.py"
CONTAINER_LOG_LEVEL = 20  # logging.INFO, the SDK's default
CHECKPOINT_LOCAL_PATH = "/opt/ml/checkpoints"
RETRY_ATTEMPTS = 2  # SageMaker-side retries of InternalServerError
PROCESSING_CODE_DIR = "/opt/ml/processing/input/code"
PROCESSING_SCRIPT = "runproc.sh"  # shipped beside sourcedir.tar.gz under the code prefix (stacks/assets/code_asset.py)
PROCESSING_ENTRYPOINT = ["/bin/bash", f"{PROCESSING_CODE_DIR}/{PROCESSING_SCRIPT}"]
MAP_INPUT_DIR = "/opt/ml/processing/input/data"
MAP_OUTPUT_DIR = "/opt/ml/processing/output/counts"
REDUCE_INPUT_DIR = "/opt/ml/processing/input/counts"
REDUCE_OUTPUT_DIR = "/opt/ml/processing/output/tokenizer"
CODE_CHANNEL = "code"  # network-isolated training jobs: the code as an input channel
ISOLATED_CODE_DIR = f"/opt/ml/input/data/{CODE_CHANNEL}"

# Metric definitions match the training script's METRIC lines (contract/progress_lines.py).
COMMON_METRICS = ("loss", "grad_norm", "train_loss", "eval_loss", "epoch", "learning_rate", "train_runtime",
                  "train_samples_per_second", "train_steps_per_second", "eval_runtime",
                  "eval_samples_per_second")
# What each task's evaluation logs, with the trivial baseline the training code reports next to it
# (eval_baseline_<metric>): declared by the task modules of training_code, read from the exported schema
# (tests/training/test_metric_names.py checks them against real runs).
TASK_METRICS = hyperparameters.task_metrics()
# Read from the training code's per-window progress line (contract/progress_lines.py).
PROGRESS_METRICS = progress_lines.WINDOW_METRICS
# The training code's goodput timings (hftrain/run/goodput.py): mean step time per beat and the start-up parts, so
# that a team can chart them across runs (the run summary's `goodput` ledger has them per attempt).
GOODPUT_METRICS = ("step_seconds", "startup_seconds", "startup_imports_seconds", "startup_data_load_seconds",
                   "startup_model_load_seconds", "startup_tokenize_seconds", "startup_resume_verify_seconds",
                   "startup_restore_seconds")
MAX_METRIC_DEFINITIONS = 40  # CreateTrainingJob's limit
PROCESSING_STAGES = {"map": "tokenizer_map", "reduce": "tokenizer_reduce",
                     "tokenizer_map": "tokenizer_map", "tokenizer_reduce": "tokenizer_reduce"}


def encode_hyperparameters(values: dict[str, Any]) -> dict[str, str]:
    """JSON-encode every value, as the SDK does (`"train.py"` -> `"\\"train.py\\""`, True -> `"true"`)."""
    return {str(key): json.dumps(value) for key, value in values.items()}


def metric_definitions(task: str) -> list[dict[str, str]]:
    names = COMMON_METRICS + TASK_METRICS[task] + verdict_metrics.ALL + GOODPUT_METRICS
    return [progress_lines.metric_definition(name) for name in names] + [
        {"Name": name, "Regex": regex} for name, regex in PROGRESS_METRICS.items()]


def tags(settings: Settings, run: Run) -> list[dict[str, str]]:
    fixed = {"project": settings.project, "environment": settings.environment, "run": run.run_id}
    extra = sorted(run.spec.tags.items())
    return [{"Key": k, "Value": v} for k, v in list(fixed.items()) + extra]


def network_isolated(spec: RunSpec, settings: Settings | None = None) -> bool:
    """No network at all for the job, unless it needs the Hub, a remote reporter or the tracking server (which
    it reaches through the VPC's SageMaker Experiments endpoint: network isolation would block that too)."""
    return not hyperparameters.needs_internet(spec.model, spec.hyperparameters) and not (
        settings is not None and tracking_on(spec, settings))


def tracking_on(spec: RunSpec, settings: Settings) -> bool:
    """The run logs to MLflow: the environment has a tracking server and the spec does not turn it off."""
    return bool(settings.tracking_uri) and (spec.tracking is None or spec.tracking.enabled)


def tracking_experiment(spec: RunSpec) -> str:
    """The MLflow experiment of a run: `tracking.experiment`, default the task."""
    return spec.tracking.experiment if spec.tracking else spec.task


def tensorboard_on(spec: RunSpec) -> bool:
    """`tracking.tensorboard`, or `report_to` naming tensorboard: the event files are collected to S3."""
    reporters = hyperparameters.reporters(spec.hyperparameters.get("report_to", "none"))
    return (spec.tracking is not None and spec.tracking.tensorboard) or "tensorboard" in reporters


def tensorboard_uri(run: Run, settings: Settings) -> str:
    return f"s3://{settings.artifacts_bucket}/{s3_layout.TENSORBOARD_PREFIX}{run.run_id}/"


def code_tarball(settings: Settings) -> str:
    return f"{settings.code_s3_prefix}sourcedir.tar.gz"


def training_hyperparameters(run: Run, settings: Settings, attempt: int) -> dict[str, Any]:
    """Unencoded hyperparameters: reserved ones, the pipeline's, then the spec's."""
    spec, planned = run.spec, run.attempts[attempt]
    values: dict[str, Any] = {
        "sagemaker_program": ENTRY_POINT,
        "sagemaker_submit_directory": (f"{ISOLATED_CODE_DIR}/sourcedir.tar.gz" if network_isolated(spec, settings)
                                       else code_tarball(settings)),
        "sagemaker_container_log_level": CONTAINER_LOG_LEVEL,
        "sagemaker_job_name": planned.job_name,
        "sagemaker_region": settings.region,
    }
    if spec.distributed:
        # ddp, fsdp and smddp all launch with torchrun (SDK: distribution={"torch_distributed": ...}).
        values["sagemaker_torch_distributed_enabled"] = True
        values["sagemaker_instance_type"] = planned.instance_type
        if spec.compute.processes_per_host is not None:
            values["sagemaker_mpi_num_of_processes_per_host"] = spec.compute.processes_per_host
    values.update(hyperparameters.pipeline_values(typed.to_json(spec)))  # the validator's rules read these too
    values.update(checkpoint_interval.attempt_hyperparameters(spec.checkpoint, planned.instance_type, planned.spot))
    values.update({k: hyperparameters.argument(k, v) for k, v in spec.hyperparameters.items()})
    reporters = hyperparameters.reporters(values.get("report_to", "none"))
    if tensorboard_on(spec) and "tensorboard" not in reporters:  # tracking.tensorboard: the Trainer writes them
        values["report_to"] = ",".join([r for r in reporters if r != "none"] + ["tensorboard"])
    return values


def _s3_channel(name: str, uri: str, distribution: str = "FullyReplicated", mode: str = "File") -> dict[str, Any]:
    return {
        "ChannelName": name,
        "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": uri,
                                        "S3DataDistributionType": distribution}},
        "InputMode": mode,
    }


def uses_fsx(spec: RunSpec) -> bool:
    return any(channel.fsx is not None for channel in spec.data.channels().values())


def input_channels(run: Run, settings: Settings) -> list[dict[str, Any]]:
    spec = run.spec
    channels = []
    for name, channel in spec.data.channels().items():
        if channel.s3 is not None:
            channels.append(_s3_channel(name, channel.s3, channel.distribution, channel.input_mode))
        else:
            mount = settings.fsx.mount_name if settings.fsx else "fsx"
            fs_id = settings.fsx.file_system_id if settings.fsx else ""
            channels.append({
                "ChannelName": name,
                "DataSource": {"FileSystemDataSource": {
                    "FileSystemId": fs_id, "FileSystemType": "FSxLustre", "FileSystemAccessMode": "ro",
                    "DirectoryPath": f"/{mount}/{(channel.fsx or '').strip('/')}".rstrip("/"),
                }},
                "InputMode": "File",
            })
    if spec.model_in_s3:
        channels.append(_s3_channel("model", spec.model))
    if run.tokenizer_stage:
        channels.append(_s3_channel("tokenizer", run.uris.tokenizer))
    if network_isolated(spec, settings):
        channels.append(_s3_channel(CODE_CHANNEL, code_tarball(settings)))
    return channels


def vpc_config(settings: Settings, *, fsx: bool) -> dict[str, list[str]] | None:
    """Training security groups; the FSx subnet only (the file system's AZ) when an FSx channel is used."""
    subnets = [settings.fsx.subnet_id] if fsx and settings.fsx else list(settings.subnet_ids)
    if not subnets:
        return None
    return {"SecurityGroupIds": list(settings.security_group_ids), "Subnets": subnets}


def training_request(run: Run, settings: Settings, attempt: int = 0) -> dict[str, Any]:
    """CreateTrainingJob parameters for one attempt (0: the spec's compute; k: fallback option k)."""
    spec, config = run.spec, run.attempts[attempt]
    stopping: dict[str, int] = {"MaxRuntimeInSeconds": spec.max_runtime_seconds}
    if config.spot:
        stopping["MaxWaitTimeInSeconds"] = spec.spot.max_wait_seconds
    request: dict[str, Any] = {
        "TrainingJobName": config.job_name,
        "HyperParameters": encode_hyperparameters(training_hyperparameters(run, settings, attempt)),
        "AlgorithmSpecification": {
            "TrainingImage": settings.training_image_uri,
            "TrainingInputMode": "File",
            "MetricDefinitions": metric_definitions(spec.task),
            "EnableSageMakerMetricsTimeSeries": True,
        },
        "RoleArn": settings.sagemaker_role_arn,
        "InputDataConfig": input_channels(run, settings),
        "OutputDataConfig": {"S3OutputPath": run.uris.model_output, "KmsKeyId": settings.kms_key_arn},
        "ResourceConfig": {
            "InstanceType": config.instance_type,
            "InstanceCount": config.instance_count,
            "VolumeSizeInGB": spec.compute.volume_size_gb,
            "VolumeKmsKeyId": settings.kms_key_arn,
        },
        "StoppingCondition": stopping,
        "Tags": tags(settings, run),
        "EnableNetworkIsolation": network_isolated(spec, settings),
        "EnableInterContainerTrafficEncryption": settings.inter_container_encryption,
        "EnableManagedSpotTraining": config.spot,
        "CheckpointConfig": {"S3Uri": run.uris.checkpoint, "LocalPath": CHECKPOINT_LOCAL_PATH},
        "RetryStrategy": {"MaximumRetryAttempts": RETRY_ATTEMPTS},
    }
    environment = {**efa.training_environment(config.instance_type, distributed=spec.distributed,
                                              require_efa=spec.network.require_efa if spec.network else True),
                   **stall_board.environment(run.stall_board_token)}
    if tracking_on(spec, settings):  # contract/tracking.py: where the job logs (hftrain/tracking)
        environment.update(tracking.environment(settings.tracking_uri, tracking_experiment(spec), run.run_id,
                                                run.mlflow_run_id))
    if tensorboard_on(spec):  # the Trainer's event files, uploaded by SageMaker while the job runs
        environment["TENSORBOARD_LOGGING_DIR"] = tracking.TENSORBOARD_LOCAL_PATH
        request["TensorBoardOutputConfig"] = {"S3OutputPath": tensorboard_uri(run, settings),
                                              "LocalPath": tracking.TENSORBOARD_LOCAL_PATH}
    if environment:  # EFA variables the toolkit would not set, NCCL's transport report, the stall board's token,
        request["Environment"] = environment  # tracking
    vpc = vpc_config(settings, fsx=uses_fsx(spec))
    if vpc:
        request["VpcConfig"] = vpc
    return request


def _processing_input(name: str, uri: str, local_path: str, distribution: str = "FullyReplicated") -> dict[str, Any]:
    return {
        "InputName": name,
        "AppManaged": False,
        "S3Input": {"S3Uri": uri, "LocalPath": local_path, "S3DataType": "S3Prefix", "S3InputMode": "File",
                    "S3DataDistributionType": distribution},
    }


def processing_job_name(run: Run, stage: str) -> str:
    return run.job_names.processing(PROCESSING_STAGES[stage])


def processing_request(run: Run, settings: Settings, stage: str) -> dict[str, Any]:
    """CreateProcessingJob parameters for the tokenizer stage: `map` (N hosts, sharded) or `reduce` (1 host)."""
    stage = PROCESSING_STAGES[stage]
    spec, uris = run.spec, run.uris
    tok = spec.tokenizer
    if tok is None:
        raise ValueError("the run has no tokenizer stage")
    common = ["--tokenizer-type", tok.type, "--text-field", tok.text_field,
              "--lowercase", "true" if tok.lowercase else "false"]
    code = _processing_input("code", settings.code_s3_prefix, PROCESSING_CODE_DIR)
    if stage == "tokenizer_map":
        arguments = ["tokenizer_map.py", *common, "--input-dir", MAP_INPUT_DIR, "--output-dir", MAP_OUTPUT_DIR]
        channel = spec.data.get(tok.channel)
        if channel is None or channel.s3 is None:
            raise KeyError(f"data.{tok.channel}.s3")
        data_uri = channel.s3
        inputs = [code, _processing_input("data", data_uri, MAP_INPUT_DIR, "ShardedByS3Key")]
        output = {"OutputName": "counts", "S3Output": {"S3Uri": uris.tokenizer_counts, "LocalPath": MAP_OUTPUT_DIR,
                                                       "S3UploadMode": "EndOfJob"}}
        instance_count = tok.instance_count
    else:
        arguments = ["tokenizer_reduce.py", *common,
                     "--vocab-size", str(tok.vocab_size), "--min-frequency", str(tok.min_frequency),
                     "--special-tokens", json.dumps(list(tok.special_tokens)),
                     "--model-max-length", str(tok.model_max_length),
                     "--input-dir", REDUCE_INPUT_DIR, "--output-dir", REDUCE_OUTPUT_DIR]
        inputs = [code, _processing_input("counts", uris.tokenizer_counts, REDUCE_INPUT_DIR)]
        output = {"OutputName": "tokenizer", "S3Output": {"S3Uri": uris.tokenizer, "LocalPath": REDUCE_OUTPUT_DIR,
                                                          "S3UploadMode": "EndOfJob"}}
        instance_count = 1
    # The tokenizer jobs reach nothing: SageMaker moves their inputs and outputs, runproc.sh installs from the
    # wheels shipped in the code (--no-index), and the map hosts never talk to each other.
    network: dict[str, Any] = {
        "EnableInterContainerTrafficEncryption": settings.inter_container_encryption,
        "EnableNetworkIsolation": True,
    }
    vpc = vpc_config(settings, fsx=False)
    if vpc:
        network["VpcConfig"] = vpc
    return {
        "ProcessingJobName": processing_job_name(run, stage),
        "ProcessingInputs": inputs,
        "ProcessingOutputConfig": {"Outputs": [output], "KmsKeyId": settings.kms_key_arn},
        "ProcessingResources": {"ClusterConfig": {
            "InstanceCount": instance_count,
            "InstanceType": tok.instance_type,
            "VolumeSizeInGB": tok.volume_size_gb,
            "VolumeKmsKeyId": settings.kms_key_arn,
        }},
        "StoppingCondition": {"MaxRuntimeInSeconds": tok.max_runtime_seconds},
        "AppSpecification": {"ImageUri": settings.processing_image_uri, "ContainerEntrypoint": list(PROCESSING_ENTRYPOINT),
                             "ContainerArguments": arguments},
        "NetworkConfig": network,
        "RoleArn": settings.sagemaker_role_arn,
        "Tags": tags(settings, run),
    }


def build_requests(run: Run, settings: Settings) -> list[tuple[str, dict[str, Any]]]:
    """(operation, parameters) for every request the run can send: each attempt, then the tokenizer jobs."""
    requests = [("CreateTrainingJob", training_request(run, settings, a)) for a in range(run.max_attempts)]
    if run.tokenizer_stage:
        requests += [("CreateProcessingJob", processing_request(run, settings, s)) for s in ("map", "reduce")]
    return requests
