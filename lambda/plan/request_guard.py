"""The last check before SageMaker: the request a start handler is about to send, against the environment.

Prepare validates the spec, but a start handler may be invoked with any `run` (by hand, or by a state machine
given a forged one). A `run` not shaped as a planned run is refused at the handler's edge (`planned_run`: plan/run.py
`from_json`); one with a plan's shape but forged values is typed like any other, so the request itself is checked, independent of how the run was planned: the role, image
and KMS key are the environment's, the instance type and count are allowed, the job is named for this run, reads
come from the project's buckets only and writes go to this run's own prefixes only, the VPC is the
environment's, the job's worst case fits `max_run_cost_usd`, and the hyperparameters obey the code-execution
policy. Any problem raises `RequestRejected` and nothing is created. The start handlers check here first, then
`_start_once` guards the other side: an existing job of the same name is adopted only when it is this request's
(else `JobConflictError`).
"""

from __future__ import annotations

import json
from typing import Any

from contract import stall_board, tracking
from hfsm_lambda import naming
from hfsm_lambda.errors import RequestRejected
from hfsm_lambda.plan import cost, efa, job_requests
from hfsm_lambda.plan import run as run_json
from hfsm_lambda.plan.job_requests import (
    CODE_CHANNEL,
    CONTAINER_LOG_LEVEL,
    ENTRY_POINT,
    ISOLATED_CODE_DIR,
    PROCESSING_ENTRYPOINT,
)
from hfsm_lambda.plan.run import Run
from hfsm_lambda.plan.sagemaker_limits import MAX_RUNTIME_LIMIT as MAX_TRAINING_RUNTIME
from hfsm_lambda.plan.sagemaker_limits import PROCESSING_RUNTIME_LIMIT as MAX_PROCESSING_RUNTIME
from hfsm_lambda.settings import Settings
from hfsm_lambda.spec import hp_paths, hyperparameters


class _Prefixes:
    """The S3 locations one run may read and write."""

    def __init__(self, settings: Settings, run_id: str) -> None:
        arts = f"s3://{settings.artifacts_bucket}/"
        self.code = settings.code_s3_prefix
        self.data = f"s3://{settings.data_bucket}/"
        self.models = f"{arts}models/"  # a previous run's model may be fine-tuned again
        self.own_outputs = f"{arts}outputs/{run_id}/"
        self.own_models = f"{arts}models/{run_id}/"
        self.own_checkpoints = f"{arts}checkpoints/{run_id}/"

    def readable(self, uri: str) -> bool:
        # The data bucket holds user data; specs (runs/) are not training data.
        if uri.startswith(self.data):
            return not uri.startswith(f"{self.data}runs/")
        return uri.startswith((self.code, self.models, self.own_outputs))


def _run_id(run: Run, problems: list[str]) -> str:
    run_id = run.run_id
    if not naming.RUN_ID_RE.fullmatch(run_id):
        problems.append(f"run.run_id: {str(run_id)[:80]!r} is not a run id (<name>-<yyyymmddHHMMSS>-<16 hex>)")
        return ""
    return run_id


def _same(problems: list[str], what: str, got: Any, want: Any) -> None:
    if got != want:
        problems.append(f"{what}: {got!r} is not this environment's {want!r}")


def _vpc(problems: list[str], vpc: dict[str, Any] | None, settings: Settings) -> None:
    if not settings.subnet_ids:
        if vpc:
            problems.append("VpcConfig: this environment runs jobs outside a VPC")
        return
    if not vpc:
        problems.append("VpcConfig: missing; jobs of this environment run in its training subnets")
        return
    allowed_subnets = set(settings.subnet_ids) | ({settings.fsx.subnet_id} if settings.fsx else set())
    if not vpc.get("Subnets") or not set(vpc["Subnets"]) <= allowed_subnets:
        problems.append(f"VpcConfig.Subnets: {vpc.get('Subnets')} are not this environment's training subnets")
    if set(vpc.get("SecurityGroupIds") or []) != set(settings.security_group_ids):
        problems.append(f"VpcConfig.SecurityGroupIds: {vpc.get('SecurityGroupIds')} are not this environment's "
                        f"training security groups {list(settings.security_group_ids)}")


def _instances(problems: list[str], what: str, instance_type: Any, count: Any, allowed: tuple[str, ...],
               settings: Settings) -> None:
    if instance_type not in allowed:
        problems.append(f"{what}.InstanceType: {instance_type} is not allowed in environment {settings.environment}")
    if not isinstance(count, int) or not 1 <= count <= settings.max_instance_count:
        problems.append(f"{what}.InstanceCount: {count} is over environment {settings.environment}'s limit of "
                        f"{settings.max_instance_count}")


def _cost(problems: list[str], operation: str, request: dict[str, Any], settings: Settings) -> None:
    if settings.max_run_cost_usd is None:
        return
    item = cost.request_cost(operation, request, settings.instance_prices)
    if item["worst_case_usd"] is None or item["worst_case_usd"] > settings.max_run_cost_usd:
        problems.append(f"cost: {cost.describe(item)} is over max_run_cost_usd=${settings.max_run_cost_usd:,.2f} "
                        "(or has no price)")


def _decoded(encoded: dict[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in encoded.items():
        try:
            out[key] = json.loads(value)
        except (TypeError, ValueError):
            out[key] = value
    return out


def _hyperparameter_names(values: dict[str, Any], request: dict[str, Any], settings: Settings) -> list[str]:
    """Only the reserved names the pipeline sends, with its values, and only names train.py accepts: a forged run
    could otherwise rename the script, point the toolkit elsewhere or pass options to its launcher."""
    expected = {"sagemaker_program": ENTRY_POINT, "sagemaker_container_log_level": CONTAINER_LOG_LEVEL,
                "sagemaker_region": settings.region, "sagemaker_job_name": request.get("TrainingJobName"),
                "sagemaker_torch_distributed_enabled": True,
                "sagemaker_instance_type": (request.get("ResourceConfig") or {}).get("InstanceType")}
    problems = []
    for name, value in values.items():
        if name == "sagemaker_submit_directory":
            continue  # checked with the code channel
        if name == "sagemaker_mpi_num_of_processes_per_host":
            if not (isinstance(value, int) and not isinstance(value, bool) and 1 <= value <= 128):
                problems.append(f"HyperParameters.{name}: {value!r} is not a process count (1-128)")
        elif name.startswith("sagemaker_"):
            if name not in expected:
                problems.append(f"HyperParameters.{name}: not a reserved name the pipeline sends")
            elif value != expected[name]:
                problems.append(f"HyperParameters.{name}: {str(value)[:80]!r} is not the pipeline's "
                                f"{expected[name]!r}")
        elif name not in hyperparameters.schema():
            problems.append(f"HyperParameters.{name}: not a hyperparameter train.py accepts")
    return problems


def _runtime(problems: list[str], request: dict[str, Any], limit: int) -> None:
    runtime = (request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")
    if not isinstance(runtime, int) or not 1 <= runtime <= limit:
        problems.append(f"StoppingCondition.MaxRuntimeInSeconds: {runtime} is not 1 - {limit}")


def _training_identity(problems: list[str], request: dict[str, Any], settings: Settings, run_id: str,
                       attempt: int, prefixes: _Prefixes) -> None:
    """Name, role, image, instances, keys, output and checkpoint prefixes: this environment's, this run's."""
    expected = naming.job_name(settings.name_prefix, run_id, "train", attempt) if run_id else None
    _same(problems, "TrainingJobName", request.get("TrainingJobName"), expected)
    _same(problems, "RoleArn", request.get("RoleArn"), settings.sagemaker_role_arn)
    _same(problems, "AlgorithmSpecification.TrainingImage",
          (request.get("AlgorithmSpecification") or {}).get("TrainingImage"), settings.training_image_uri)
    resources = request.get("ResourceConfig") or {}
    _instances(problems, "ResourceConfig", resources.get("InstanceType"), resources.get("InstanceCount"),
               settings.allowed_instance_types, settings)
    _same(problems, "ResourceConfig.VolumeKmsKeyId", resources.get("VolumeKmsKeyId"), settings.kms_key_arn)
    output = request.get("OutputDataConfig") or {}
    _same(problems, "OutputDataConfig.S3OutputPath", output.get("S3OutputPath"), prefixes.own_models)
    _same(problems, "OutputDataConfig.KmsKeyId", output.get("KmsKeyId"), settings.kms_key_arn)
    _same(problems, "CheckpointConfig.S3Uri", (request.get("CheckpointConfig") or {}).get("S3Uri"),
          prefixes.own_checkpoints)


def _training_channel(problems: list[str], channel: dict[str, Any], settings: Settings, run_id: str,
                      prefixes: _Prefixes) -> None:
    """An input channel reads the code tarball, what this run may read in S3, or the environment's FSx (read-only)."""
    name = channel.get("ChannelName")
    source = channel.get("DataSource") or {}
    if "S3DataSource" in source:
        uri = source["S3DataSource"].get("S3Uri", "")
        if name == CODE_CHANNEL:
            _same(problems, "InputDataConfig[code].S3Uri", uri, f"{settings.code_s3_prefix}sourcedir.tar.gz")
        elif not prefixes.readable(uri):
            problems.append(f"InputDataConfig[{name}].S3Uri: {uri} is outside what this run may read (the data "
                            f"bucket, models/, code/ and outputs/{run_id}/ of the artifacts bucket)")
    elif "FileSystemDataSource" in source:
        fs = source["FileSystemDataSource"]
        if settings.fsx is None or fs.get("FileSystemId") != settings.fsx.file_system_id:
            problems.append(f"InputDataConfig[{name}].FileSystemId: {fs.get('FileSystemId')} is not this "
                            "environment's FSx file system")
        if fs.get("FileSystemAccessMode") != "ro":
            problems.append(f"InputDataConfig[{name}].FileSystemAccessMode: jobs mount FSx read-only")


def _training_code_and_hyperparameters(problems: list[str], request: dict[str, Any], settings: Settings,
                                       run: Run) -> None:
    """The code is this environment's; the hyperparameters obey the code-execution policy; the environment
    variables and network isolation are what the pipeline sets for them."""
    resources = request.get("ResourceConfig") or {}
    values = _decoded(request.get("HyperParameters") or {})
    submit = values.get("sagemaker_submit_directory")
    code_uri = f"{settings.code_s3_prefix}sourcedir.tar.gz"
    if submit not in (code_uri, f"{ISOLATED_CODE_DIR}/sourcedir.tar.gz"):
        problems.append(f"HyperParameters.sagemaker_submit_directory: {submit!r} is not this environment's code "
                        f"{code_uri}")
    channels = {c.get("ChannelName") for c in request.get("InputDataConfig") or []}
    model = (values.get("model_name_or_path") if "model" not in channels
             else "s3://model-channel/")
    problems += hyperparameters.policy_problems(values, model, settings)
    problems += hp_paths.request_problems(values)
    problems += _hyperparameter_names(values, request, settings)
    environment = efa.training_environment(str(resources.get("InstanceType")),
                                           distributed=values.get("sagemaker_torch_distributed_enabled") is True)
    environment.update(stall_board.environment(run.stall_board_token))  # the run's own, never one from elsewhere
    tracked = job_requests.tracking_on(run.spec, settings)
    if tracked:  # the environment's tracking server and this run's experiment only (contract/tracking.py)
        environment.update(tracking.environment(settings.tracking_uri, job_requests.tracking_experiment(run.spec),
                                                run.run_id, run.mlflow_run_id))
    tensorboard = request.get("TensorBoardOutputConfig")
    if tensorboard is not None or job_requests.tensorboard_on(run.spec):
        environment["TENSORBOARD_LOGGING_DIR"] = tracking.TENSORBOARD_LOCAL_PATH
        expected = {"S3OutputPath": job_requests.tensorboard_uri(run, settings),
                    "LocalPath": tracking.TENSORBOARD_LOCAL_PATH}
        if tensorboard != expected:
            problems.append(f"TensorBoardOutputConfig: {tensorboard} is not this run's ({expected})")
    if (request.get("Environment") or {}) != environment:
        problems.append(f"Environment: {sorted(request.get('Environment') or {})} is not what the pipeline sets for "
                        f"this instance type ({sorted(environment)}): no variable (PYTHONPATH, LD_PRELOAD, NCCL_*...) "
                        "comes from a run")
    if not request.get("EnableNetworkIsolation") and not hyperparameters.needs_internet(model, values) and not tracked:
        problems.append("EnableNetworkIsolation: a job that needs no internet (model from S3) runs isolated")


def training_request_problems(request: dict[str, Any], run: Run, settings: Settings, attempt: int) -> list[str]:
    problems: list[str] = []
    run_id = _run_id(run, problems)
    prefixes = _Prefixes(settings, run_id)
    _training_identity(problems, request, settings, run_id, attempt, prefixes)
    for channel in request.get("InputDataConfig") or []:
        _training_channel(problems, channel, settings, run_id, prefixes)
    _training_code_and_hyperparameters(problems, request, settings, run)
    _runtime(problems, request, MAX_TRAINING_RUNTIME)
    _vpc(problems, request.get("VpcConfig"), settings)
    if not problems:
        _cost(problems, "CreateTrainingJob", request, settings)
    return problems


def _processing_identity(problems: list[str], request: dict[str, Any], settings: Settings, run_id: str,
                         stage: str) -> None:
    """Name, role, image, entrypoint, instances and volume key: this environment's, this run's."""
    expected = naming.job_name(settings.name_prefix, run_id, stage) if run_id else None
    _same(problems, "ProcessingJobName", request.get("ProcessingJobName"), expected)
    _same(problems, "RoleArn", request.get("RoleArn"), settings.sagemaker_role_arn)
    app = request.get("AppSpecification") or {}
    _same(problems, "AppSpecification.ImageUri", app.get("ImageUri"), settings.processing_image_uri)
    _same(problems, "AppSpecification.ContainerEntrypoint", app.get("ContainerEntrypoint"), PROCESSING_ENTRYPOINT)
    cluster = (request.get("ProcessingResources") or {}).get("ClusterConfig") or {}
    _instances(problems, "ClusterConfig", cluster.get("InstanceType"), cluster.get("InstanceCount"),
               settings.tokenizer_instance_types, settings)
    _same(problems, "ClusterConfig.VolumeKmsKeyId", cluster.get("VolumeKmsKeyId"), settings.kms_key_arn)


def _processing_storage(problems: list[str], request: dict[str, Any], settings: Settings,
                        prefixes: _Prefixes) -> None:
    """Inputs: the code and what this run may read; outputs: this run's outputs/ prefix, with the KMS key."""
    for item in request.get("ProcessingInputs") or []:
        name, uri = item.get("InputName"), (item.get("S3Input") or {}).get("S3Uri", "")
        if name == "code":
            _same(problems, "ProcessingInputs[code].S3Uri", uri, settings.code_s3_prefix)
        elif not prefixes.readable(uri):
            problems.append(f"ProcessingInputs[{name}].S3Uri: {uri} is outside what this run may read")
    outputs = request.get("ProcessingOutputConfig") or {}
    _same(problems, "ProcessingOutputConfig.KmsKeyId", outputs.get("KmsKeyId"), settings.kms_key_arn)
    for item in outputs.get("Outputs") or []:
        uri = (item.get("S3Output") or {}).get("S3Uri", "")
        if not uri.startswith(prefixes.own_outputs):
            problems.append(f"ProcessingOutputConfig.Outputs[{item.get('OutputName')}].S3Uri: {uri} is not under "
                            f"this run's {prefixes.own_outputs}")


def processing_request_problems(request: dict[str, Any], run: Run, settings: Settings, stage: str) -> list[str]:
    problems: list[str] = []
    run_id = _run_id(run, problems)
    _processing_identity(problems, request, settings, run_id, stage)
    _processing_storage(problems, request, settings, _Prefixes(settings, run_id))
    _runtime(problems, request, MAX_PROCESSING_RUNTIME)
    network = request.get("NetworkConfig") or {}
    if network.get("EnableNetworkIsolation") is not True:
        problems.append("NetworkConfig.EnableNetworkIsolation: the tokenizer jobs need no network and run isolated")
    _vpc(problems, network.get("VpcConfig"), settings)
    if not problems:
        _cost(problems, "CreateProcessingJob", request, settings)
    return problems


def planned_run(value: Any) -> Run:
    """`$.run` parsed at a start handler's edge; a run that is not shaped as a planned run is rejected."""
    try:
        return run_json.from_json(value)
    except (TypeError, ValueError) as err:
        raise RequestRejected([f"run: not a run planned by Prepare ({type(err).__name__}: {err})"]) from None


def build(builder: Any, run: Run, settings: Settings, which: Any) -> dict[str, Any]:
    """The request `builder(run, settings, which)` makes; a run that is not a planned run is rejected, not a crash."""
    try:
        return builder(run, settings, which)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as err:
        raise RequestRejected([f"run: not a run planned by Prepare ({type(err).__name__}: {err})"]) from None


def check_training(request: dict[str, Any], run: Run, settings: Settings, attempt: int) -> None:
    problems = training_request_problems(request, run, settings, attempt)
    if problems:
        raise RequestRejected(problems)


def check_processing(request: dict[str, Any], run: Run, settings: Settings, stage: str) -> None:
    problems = processing_request_problems(request, run, settings, stage)
    if problems:
        raise RequestRejected(problems)
