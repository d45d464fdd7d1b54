"""Pre-flight checks run by Prepare before any job starts; every problem names the spec field it is about.

`check` is the one entry point; it reads the planned run and the requests Prepare built (it builds none):
- `static_problems`: the spec against the environment (instance types, counts, SMDDP, FSx, buckets) and the
  code-execution policy (`hyperparameters.policy_problems`: what the hyperparameters may make a job import,
  fetch or send out here).
- `training_request_problems` / `processing_request_problems`: the SageMaker API limits the service model does
  not check client-side (names, hyperparameter sizes, channels, VPC, stopping condition, container arguments).
- `storage_problems`: S3 prefixes exist and hold enough objects (ShardedByS3Key: one per instance at least).
- `data_preflight.problems`: a bounded sample of every channel parses and has the columns the task reads.
- `job_name_problems`: the planned job names are still free in the account.
- `subnet_problems`: the subnets have the free private IPs the EFA attempts need.
- spend limits (lambda/plan/spend.py): the worst case of every built request (cost.worst_case_cost) within
  `max_run_cost_usd`; fewer than `max_concurrent_runs` other executions running (ListExecutions).
"""

from __future__ import annotations

from typing import Any

from botocore.exceptions import ClientError

from hfsm_lambda import naming
from hfsm_lambda.aws import aws_errors, error_code, error_message, is_not_found
from hfsm_lambda.data import preflight as data_preflight
from hfsm_lambda.plan import efa, smddp_support, spend
from hfsm_lambda.plan.run import Run
from hfsm_lambda.plan.sagemaker_limits import (
    MAX_CHANNELS,
    MAX_CONTAINER_ARGUMENT,
    MAX_HYPERPARAMETER_KEY,
    MAX_HYPERPARAMETER_VALUE,
    MAX_HYPERPARAMETERS,
    MAX_RUNTIME_LIMIT,
    MAX_TAGS,
    PROCESSING_RUNTIME_LIMIT,
)
from hfsm_lambda.settings import Settings
from hfsm_lambda.spec import hyperparameters
from hfsm_lambda.spec.hyperparameters import PIPELINE
from hfsm_lambda.spec.typed import RunSpec

# Hyperparameter -> spec field it comes from (for messages); the rest come from `hyperparameters.<name>`.
_HP_FIELDS = {"fsdp_config": "distribution.fsdp.config", "fsdp": "distribution.fsdp.sharding",
              "sagemaker_submit_directory": "settings.code_s3_prefix", "model_name_or_path": "model"}


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """(bucket, key) of a URI the spec's patterns accepted."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    return bucket, key


def _allowed(values: tuple[str, ...]) -> str:
    return ", ".join(values)


def static_problems(spec: RunSpec, settings: Settings) -> list[str]:
    """The spec against the environment: instances, then data sources and the model, then the code policy."""
    return (_instance_problems(spec, settings) + _source_problems(spec, settings)
            + hyperparameters.policy_problems(dict(spec.hyperparameters), spec.model, settings))


def _instance_problems(spec: RunSpec, settings: Settings) -> list[str]:
    problems: list[str] = []
    compute, strategy, env = spec.compute, spec.distribution.strategy, settings.environment
    types = [("compute.instance_type", compute.instance_type)] + [
        (f"fallback.options[{i}].instance_type", opt.instance_type)
        for i, opt in enumerate(spec.fallback.options) if opt.instance_type is not None]
    for path, instance_type in types:
        if instance_type not in settings.allowed_instance_types:
            problems.append(f"{path}: {instance_type} is not allowed in environment {env}; "
                            f"allowed: {_allowed(settings.allowed_instance_types)}")
        elif strategy == "smddp" and smddp_support.instance_problem(instance_type):
            problems.append(f"{path}: (distribution.strategy smddp) {smddp_support.instance_problem(instance_type)}")
    if strategy == "smddp" and smddp_support.image_problem(settings.training_image_uri):
        problems.append(f"distribution.strategy: smddp: {smddp_support.image_problem(settings.training_image_uri)}")
    counts = [("compute.instance_count", compute.instance_count)]
    tok = spec.tokenizer
    if tok:
        counts.append(("tokenizer.instance_count", tok.instance_count))
        if tok.instance_type not in settings.tokenizer_instance_types:
            problems.append(f"tokenizer.instance_type: {tok.instance_type} is not allowed in environment {env}; "
                            f"allowed: {_allowed(settings.tokenizer_instance_types)}")
    problems += [f"{path}: {count} is over environment {env}'s limit of {settings.max_instance_count}"
                 for path, count in counts if count > settings.max_instance_count]
    return problems


def _source_problems(spec: RunSpec, settings: Settings) -> list[str]:
    problems: list[str] = []
    env, buckets = settings.environment, settings.project_buckets
    channels = spec.data.channels()
    if settings.fsx is None:
        problems += [f"data.{name}.fsx: environment {env} has no FSx for Lustre file system; use an s3 prefix"
                     for name, channel in channels.items() if channel.fsx is not None]
    if not settings.internet_access and not spec.model_in_s3:
        problems.append(f"model: environment {env} has no internet access (no NAT gateway), so the Hub model "
                        f"{spec.model} cannot be downloaded; stage it in the data bucket (`python -m runctl stage-model "
                        f"{spec.model} --env {env}` prints the s3:// URI) and give that URI as model")
    uris = [(f"data.{n}.s3", c.s3) for n, c in channels.items() if c.s3 is not None]
    if spec.model_in_s3:
        uris.append(("model", spec.model))
    for path, uri in uris:
        bucket, _ = parse_s3_uri(uri)
        if bucket not in buckets:
            problems.append(f"{path}: bucket {bucket} is not one of this environment's buckets "
                            f"({_allowed(buckets)}); copy the data there")
    return problems


def _hp_field(key: str) -> str:
    return _HP_FIELDS.get(key) or PIPELINE.get(key, f"hyperparameters.{key}")


def training_request_problems(request: dict[str, Any]) -> list[str]:
    """The CreateTrainingJob limits the service model does not check client-side."""
    problems: list[str] = []
    name = request["TrainingJobName"]
    if not naming.is_job_name(name):
        problems.append(f"name: job name {name!r} is not a legal SageMaker name (1-63 of [a-zA-Z0-9-])")
    hps = request["HyperParameters"]
    if len(hps) > MAX_HYPERPARAMETERS:
        problems.append(f"hyperparameters: {len(hps)} hyperparameters with the pipeline's own; SageMaker allows "
                        f"{MAX_HYPERPARAMETERS}")
    for key, value in hps.items():
        if len(key) > MAX_HYPERPARAMETER_KEY:
            problems.append(f"{_hp_field(key)}: name is {len(key)} characters; SageMaker allows "
                            f"{MAX_HYPERPARAMETER_KEY}")
        if len(value) > MAX_HYPERPARAMETER_VALUE:
            problems.append(f"{_hp_field(key)}: JSON-encoded value is {len(value)} characters; SageMaker allows "
                            f"{MAX_HYPERPARAMETER_VALUE}")
    stopping = request["StoppingCondition"]
    if stopping["MaxRuntimeInSeconds"] > MAX_RUNTIME_LIMIT:
        problems.append(f"max_runtime_seconds: over SageMaker's limit of {MAX_RUNTIME_LIMIT} (28 days)")
    if request.get("EnableManagedSpotTraining"):
        if stopping.get("MaxWaitTimeInSeconds", 0) < stopping["MaxRuntimeInSeconds"]:
            problems.append(f"spot.max_wait_seconds: {stopping.get('MaxWaitTimeInSeconds')} is less than "
                            f"max_runtime_seconds={stopping['MaxRuntimeInSeconds']}; the wait covers waiting plus "
                            "running, so for managed spot it must be at least the runtime")
        if not request.get("CheckpointConfig"):
            problems.append("checkpoint: managed spot needs a CheckpointConfig")
    if not 1 <= len(request["InputDataConfig"]) <= MAX_CHANNELS:
        problems.append(f"data: {len(request['InputDataConfig'])} channels; SageMaker allows 1-{MAX_CHANNELS}")
    problems += _vpc_problems(request.get("VpcConfig"))
    if len(request.get("Tags", [])) > MAX_TAGS:
        problems.append(f"tags: {len(request['Tags'])} tags with the pipeline's own; SageMaker allows {MAX_TAGS}")
    return problems


def processing_request_problems(request: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    name = request["ProcessingJobName"]
    if not naming.is_job_name(name):
        problems.append(f"name: job name {name!r} is not a legal SageMaker name (1-63 of [a-zA-Z0-9-])")
    for arg in request["AppSpecification"]["ContainerArguments"]:
        if len(arg) > MAX_CONTAINER_ARGUMENT:
            problems.append(f"tokenizer: container argument {arg[:40]!r}... is over {MAX_CONTAINER_ARGUMENT} characters")
    if request["StoppingCondition"]["MaxRuntimeInSeconds"] > PROCESSING_RUNTIME_LIMIT:
        problems.append(f"tokenizer.max_runtime_seconds: over {PROCESSING_RUNTIME_LIMIT}")
    if not 1 <= request["ProcessingResources"]["ClusterConfig"]["InstanceCount"] <= 100:
        problems.append("tokenizer.instance_count: processing jobs run on 1-100 instances")
    problems += _vpc_problems(request["NetworkConfig"].get("VpcConfig"))
    return problems


def _vpc_problems(vpc: dict[str, Any] | None) -> list[str]:
    if vpc is None:
        return []
    problems = []
    if not 1 <= len(vpc["SecurityGroupIds"]) <= 5:
        problems.append("settings.security_group_ids: SageMaker needs 1-5 security groups")
    if not 1 <= len(vpc["Subnets"]) <= 16:
        problems.append("settings.subnet_ids: SageMaker needs 1-16 subnets")
    return problems


def request_problems(requests: list[tuple[str, dict[str, Any]]]) -> list[str]:
    """Check the built requests (each problem once); attempts must get distinct job names."""
    problems: list[str] = []
    for operation, request in requests:
        found = (training_request_problems(request) if operation == "CreateTrainingJob"
                 else processing_request_problems(request))
        problems += [p for p in found if p not in problems]
    names = [r["TrainingJobName"] for op, r in requests if op == "CreateTrainingJob"]
    if len(set(names)) != len(names):
        problems.append("name: job names of the attempts are not distinct")
    return problems


def job_name_problems(run: Run, sagemaker: Any) -> list[str]:
    """Every planned training job name is still free (names are unique per account and region)."""
    problems = []
    for name in run.job_names.train:
        try:
            with aws_errors():
                sagemaker.describe_training_job(TrainingJobName=name)
        except ClientError as err:
            if is_not_found(err):
                continue
            raise
        problems.append(f"name: training job {name} already exists; submit again for a new run id")
    return problems


def count_objects(s3: Any, uri: str, enough: int) -> int:
    """Objects under an S3 prefix (folder markers excluded), counting no further than `enough`."""
    bucket, prefix = parse_s3_uri(uri)
    count = 0
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix,
                                                               PaginationConfig={"PageSize": 1000}):
        count += sum(1 for obj in page.get("Contents", []) if not obj["Key"].endswith("/"))
        if count >= enough:
            break
    return count


def storage_problems(spec: RunSpec, settings: Settings, s3: Any) -> list[str]:
    """Input prefixes exist and are non-empty; sharded inputs have at least one object per instance."""
    # (field, uri, objects needed, sharded-over description)
    checks: list[tuple[str, str, int, str | None]] = []
    count = spec.compute.instance_count
    for name, channel in spec.data.channels().items():
        if channel.s3 is not None:
            sharded = channel.distribution == "ShardedByS3Key"
            checks.append((f"data.{name}.s3", channel.s3, count if sharded else 1,
                           f"compute.instance_count={count}" if sharded else None))
    tok = spec.tokenizer
    tok_channel = spec.data.get(tok.channel) if tok else None
    if tok and tok_channel is not None and tok_channel.s3 is not None:
        checks.append(("tokenizer.instance_count", tok_channel.s3, tok.instance_count,
                       f"tokenizer.instance_count={tok.instance_count}"))
    if spec.model_in_s3:
        checks.append(("model", spec.model, 1, None))
    problems: list[str] = []
    counted: dict[str, int] = {}
    for path, uri, needed, sharded_over in checks:
        if parse_s3_uri(uri)[0] not in settings.project_buckets:
            continue  # reported by static_problems
        try:
            if counted.get(uri, -1) < needed:
                with aws_errors():
                    counted[uri] = count_objects(s3, uri, max(needed, 1))
        except ClientError as err:
            problems.append(f"{path}: cannot list {uri}: {error_code(err)} {error_message(err)}".rstrip())
            continue
        found = counted[uri]
        if found == 0:
            problems.append(f"{path}: no objects under {uri}; upload the data first or fix the prefix")
        elif found < needed and sharded_over:
            problems.append(f"{path}: ShardedByS3Key needs at least one object per instance, but {uri} has "
                            f"{found} object(s) for {sharded_over}; split the data into at least {needed} files, "
                            "use fewer instances or FullyReplicated")
    return problems


def subnet_problems(requests: list[tuple[str, dict[str, Any]]], ec2: Any) -> list[str]:
    """EFA attempts: every subnet the job may use has the free private IPs its instances need (lambda/plan/efa.py)."""
    problems: list[str] = []
    cache: dict[tuple[str, ...], list[dict[str, Any]]] = {}
    trainings = [request for operation, request in requests if operation == "CreateTrainingJob"]
    for attempt, request in enumerate(trainings):
        instance_type = request["ResourceConfig"]["InstanceType"]
        subnets = tuple(request.get("VpcConfig", {}).get("Subnets", ()))
        if not efa.is_efa(instance_type) or not subnets:
            continue
        if subnets not in cache:
            try:
                with aws_errors():
                    cache[subnets] = ec2.describe_subnets(SubnetIds=list(subnets))["Subnets"]
            except ClientError as err:
                problems.append(f"settings.subnet_ids: cannot check free IPs for EFA instances in {', '.join(subnets)}: "
                                f"{error_code(err)} {error_message(err)}; check the network stack's subnets")
                cache[subnets] = []
        field = "compute.instance_type" if attempt == 0 else f"fallback.options[{attempt - 1}].instance_type"
        for problem in efa.subnet_ip_problems(field, instance_type, request["ResourceConfig"]["InstanceCount"],
                                              cache[subnets]):
            if problem not in problems:
                problems.append(problem)
    return problems


def check(run: Run, requests: list[tuple[str, dict[str, Any]]], settings: Settings, *, s3: Any = None,
          sagemaker: Any = None, ec2: Any = None, stepfunctions: Any = None) -> list[str]:
    """Every pre-flight problem of a planned run and its built requests; without clients (pure use) the storage,
    job-name, EFA subnet and concurrent-run checks are skipped."""
    spec = run.spec
    problems = static_problems(spec, settings) + request_problems(requests)
    problems += spend.cost_problems(run, requests, settings)
    if s3 is not None:
        problems += storage_problems(spec, settings, s3)
        problems += folder_named_like_object_problems(spec, settings, s3)
        problems += data_preflight.problems(spec, settings, s3)
    if sagemaker is not None:
        problems += job_name_problems(run, sagemaker)
    if ec2 is not None and not problems:  # one more API call only for runs that could otherwise start
        problems += subnet_problems(requests, ec2)
    if stepfunctions is not None and not problems:  # the run could start: does the environment have room for it?
        problems += spend.concurrency_problems(settings, stepfunctions, run.execution_arn)
    return problems


def folder_named_like_object_problems(spec: RunSpec, settings: Settings, s3: Any) -> list[str]:
    """A location read as a folder (the '/' is added: run_spec._in_data_bucket) whose name, without the '/', is an
    object: the spec named a file and the job would read another set of objects (the folder's, or none). Said with
    what was understood, before any job starts (issue 36). One HeadObject per location."""
    checks = [(f"data.{name}.s3", channel.s3) for name, channel in spec.data.channels().items()
              if channel.s3 is not None]
    if spec.model_in_s3 and spec.model.endswith("/"):
        checks.append(("model", spec.model))
    problems: list[str] = []
    for path, uri in checks:
        bucket, prefix = parse_s3_uri(uri)
        key = prefix.rstrip("/")
        if bucket != settings.data_bucket or not key or key == prefix:
            continue  # Prepare reads the data bucket only (the model registry's copies are folders it wrote)
        try:
            with aws_errors():
                s3.head_object(Bucket=bucket, Key=key)
        except ClientError:
            continue  # no such object (or not readable: storage_problems says so)
        problems.append(f"{path}: s3://{bucket}/{key} is an object, but {path.split('.')[0]} is read as the folder "
                        f"{uri} (the '/' is added: a prefix would also read its siblings); give the folder the "
                        "file is in, or move the file into a folder of its own")
    return problems
