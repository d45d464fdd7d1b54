"""CreateTrainingJob / CreateProcessingJob requests: SDK-equivalent content, service-model validity, limits."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from sagemaker_training import environment as toolkit_env
from sagemaker_training import mapping as toolkit_mapping
from sagemaker_training import params as toolkit_params
from testkit.lambdas import (
    FSX,
    KMS,
    NOW,
    SMDDP_IMAGE,
    all_requests,
    run_for,
    sagemaker_request_errors,
    settings_dict,
    training,
)

from hfsm_lambda.plan import job_requests, preflight
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.settings import Settings

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples").glob("*.json"))
RESERVED = {
    "sagemaker_program": '"train.py"',
    "sagemaker_submit_directory": '"s3://hfsm-dev-artifacts/code/0123456789abcdef/sourcedir.tar.gz"',
    "sagemaker_container_log_level": "20",
    "sagemaker_region": '"us-east-1"',
}


def assert_valid(operation, request):
    assert sagemaker_request_errors(operation, request) == []


@pytest.mark.parametrize(("strategy", "extra"), [
    ("none", {}),
    ("ddp", {"sagemaker_torch_distributed_enabled": "true", "sagemaker_instance_type": '"ml.p4d.24xlarge"'}),
    ("smddp", {"sagemaker_torch_distributed_enabled": "true", "sagemaker_instance_type": '"ml.p4d.24xlarge"',
               "ddp_backend": '"smddp"'}),
    ("fsdp", {"sagemaker_torch_distributed_enabled": "true", "sagemaker_instance_type": '"ml.p4d.24xlarge"',
              "fsdp": '"full_shard auto_wrap"', "fsdp_config": json.dumps('{"version":2}')}),
])
def test_hyperparameters_per_distribution_strategy(settings, strategy, extra):
    compute = {"instance_type": "ml.p4d.24xlarge", "instance_count": 1 if strategy == "none" else 2}
    if strategy == "smddp":  # only images that ship the library accept it
        settings = Settings.from_dict(settings_dict(training_image_uri=SMDDP_IMAGE))
    request = training(settings, compute=compute, distribution={"strategy": strategy})
    name = request["TrainingJobName"]
    assert name == "hfsm-dev-dist-20250102030405-" + name.split("-")[-2] + "-train0"
    assert request["HyperParameters"] == {
        **RESERVED, "sagemaker_job_name": json.dumps(name), **extra,
        "task": '"question-answering"', "model_name_or_path": '"distilbert/distilbert-base-uncased"',
        "save_steps": "500", "save_interval": '"auto"', "interruption_prior_hours": "6.0",  # spot ml.p4d's prior
        "stall_minutes": '"auto"',  # the stall watchdog's limits (stall.*; the start-up limit's auto: the code's)
        "in_job_restarts": "2",  # recovery.in_job_restarts (recovery in place)
        "num_train_epochs": "1", "bf16": "true"}
    assert_valid("CreateTrainingJob", request)


def test_reserved_names_are_the_toolkits(settings):
    names = set(training(settings, compute={"instance_type": "ml.p4d.24xlarge", "instance_count": 2,
                                            "processes_per_host": 4})["HyperParameters"])
    assert {toolkit_params.USER_PROGRAM_PARAM, toolkit_params.SUBMIT_DIR_PARAM, toolkit_params.LOG_LEVEL_PARAM,
            toolkit_params.JOB_NAME_PARAM, toolkit_params.REGION_NAME_PARAM,
            toolkit_params.MPI_PROCESSES_PER_HOST} <= names


def test_the_toolkit_decodes_what_the_script_expects(settings, tmp_path, monkeypatch):
    """The real sagemaker-training toolkit turns the request's hyperparameters into the script's arguments."""
    fsdp = {"strategy": "fsdp", "fsdp": {"sharding": "full_shard auto_wrap",
                                         "config": {"transformer_layer_cls_to_wrap": ["BertLayer"]}}}
    request = training(settings, distribution=fsdp,
                       hyperparameters={"lr_scheduler_kwargs": {"num_cycles": 2}, "label_names": ["start_positions"],
                                        "gradient_checkpointing": False, "text_column": "a b"})
    (tmp_path / "hyperparameters.json").write_text(json.dumps(request["HyperParameters"]))
    monkeypatch.setattr(toolkit_env, "hyperparameters_file_dir", str(tmp_path / "hyperparameters.json"))
    decoded = toolkit_env.read_hyperparameters()
    framework, user = toolkit_mapping.split_by_criteria(decoded, keys=toolkit_params.SAGEMAKER_HYPERPARAMETERS,
                                                        prefix=toolkit_params.SAGEMAKER_PREFIX)
    assert framework["sagemaker_torch_distributed_enabled"] is True
    assert framework["sagemaker_program"] == "train.py"
    args = toolkit_mapping.to_cmd_args(user)
    pairs = dict(zip(args[::2], args[1::2], strict=True))
    assert pairs["--task"] == "question-answering"
    assert pairs["--fsdp"] == "full_shard auto_wrap"
    assert json.loads(pairs["--fsdp_config"]) == {"transformer_layer_cls_to_wrap": ["BertLayer"], "version": 2}
    assert json.loads(pairs["--lr_scheduler_kwargs"]) == {"num_cycles": 2}
    assert pairs["--label_names"] == "start_positions"
    assert pairs["--gradient_checkpointing"] == "False"
    assert pairs["--text_column"] == "a b"
    assert pairs["--save_steps"] == "500"


def test_spot_attempts_share_the_checkpoint_and_fallbacks_apply(settings):
    run = run_for(settings, compute={"instance_type": "ml.g5.12xlarge", "instance_count": 2},
                  fallback={"max_attempts": 4, "options": [{"instance_type": "ml.g6.2xlarge"}, {"spot": False}]})
    requests = [job_requests.training_request(run, settings, a) for a in range(4)]
    assert len({r["TrainingJobName"] for r in requests}) == 4
    assert {json.dumps(r["CheckpointConfig"]) for r in requests} == {json.dumps(
        {"S3Uri": f"s3://hfsm-dev-artifacts/checkpoints/{run.run_id}/", "LocalPath": "/opt/ml/checkpoints"})}
    assert [r["ResourceConfig"]["InstanceType"] for r in requests] == ["ml.g5.12xlarge", "ml.g6.2xlarge",
                                                                      "ml.g5.12xlarge", "ml.g5.12xlarge"]
    assert [r["EnableManagedSpotTraining"] for r in requests] == [True, True, False, False]
    assert requests[0]["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600, "MaxWaitTimeInSeconds": 7200}
    assert requests[2]["StoppingCondition"] == {"MaxRuntimeInSeconds": 3600}
    assert requests[1]["HyperParameters"]["sagemaker_instance_type"] == '"ml.g6.2xlarge"'
    assert requests[1]["HyperParameters"]["sagemaker_job_name"] == json.dumps(requests[1]["TrainingJobName"])
    for request in requests:
        assert request["RetryStrategy"] == {"MaximumRetryAttempts": 2}
        assert request["OutputDataConfig"] == {"S3OutputPath": f"s3://hfsm-dev-artifacts/models/{run.run_id}/",
                                               "KmsKeyId": KMS}
        assert request["ResourceConfig"]["VolumeKmsKeyId"] == KMS
        assert_valid("CreateTrainingJob", request)


def test_channels_vpc_and_encryption(settings):
    request = training(settings, data={"train": {"s3": "datasets/a/", "distribution": "ShardedByS3Key",
                                                 "input_mode": "FastFile"}})
    assert request["InputDataConfig"] == [{
        "ChannelName": "train", "InputMode": "FastFile",
        "DataSource": {"S3DataSource": {"S3DataType": "S3Prefix", "S3Uri": "s3://hfsm-dev-data/datasets/a/",
                                        "S3DataDistributionType": "ShardedByS3Key"}}}]
    assert request["VpcConfig"] == {"SecurityGroupIds": ["sg-0123456789abcdef0"],
                                    "Subnets": ["subnet-0aaa1111", "subnet-0bbb2222"]}
    assert request["EnableInterContainerTrafficEncryption"] is False
    prod = Settings.from_dict(settings_dict(environment="prod", inter_container_encryption=True))
    assert training(prod)["EnableInterContainerTrafficEncryption"] is True
    no_vpc = Settings.from_dict(settings_dict(subnet_ids=[], security_group_ids=[]))
    assert "VpcConfig" not in training(no_vpc)
    tagged = training(settings, tags={"team": "nlp"})
    assert {t["Key"]: t["Value"] for t in tagged["Tags"]} == {
        "project": "hfsm", "environment": "dev", "run": tagged["Tags"][2]["Value"], "team": "nlp"}
    assert tagged["Tags"][2]["Value"] in tagged["TrainingJobName"]


def test_fsx_channel_runs_in_the_file_systems_subnet(fsx_settings):
    request = training(fsx_settings, data={"train": {"s3": "datasets/a/"}, "validation": {"fsx": "/squad/val/"}})
    assert request["InputDataConfig"][1] == {
        "ChannelName": "validation", "InputMode": "File",
        "DataSource": {"FileSystemDataSource": {"FileSystemId": FSX["file_system_id"], "FileSystemType": "FSxLustre",
                                                "FileSystemAccessMode": "ro", "DirectoryPath": "/abcdefgh/squad/val"}}}
    assert request["VpcConfig"]["Subnets"] == [FSX["subnet_id"]]
    assert_valid("CreateTrainingJob", request)
    assert training(fsx_settings)["VpcConfig"]["Subnets"] == ["subnet-0aaa1111", "subnet-0bbb2222"]


def test_s3_model_is_a_channel_not_a_hyperparameter(settings):
    request = training(settings, model="s3://hfsm-dev-artifacts/models/base/model.tar.gz")
    assert "model_name_or_path" not in request["HyperParameters"]
    channels = {c["ChannelName"]: c for c in request["InputDataConfig"]}
    assert channels["model"]["DataSource"]["S3DataSource"]["S3Uri"] == \
        "s3://hfsm-dev-artifacts/models/base/model.tar.gz"


def test_metric_definitions_match_the_training_scripts_lines(settings):
    definitions = training(settings, task="summarization")["AlgorithmSpecification"]["MetricDefinitions"]
    names = [d["Name"] for d in definitions]
    assert {"train_loss", "eval_loss", "train_samples_per_second", "epoch", "eval_rougeL"} <= set(names)
    log = "METRIC train_loss=0.5123\nMETRIC eval_rougeL=35.2\nMETRIC eval_loss=nan\nMETRIC epoch=1e+00\n"
    found = {d["Name"]: m.group(1) for d in definitions if (m := re.search(d["Regex"], log))}
    assert found == {"train_loss": "0.5123", "eval_rougeL": "35.2", "eval_loss": "nan", "epoch": "1e+00"}
    assert {"eval_exact_match", "eval_f1"} <= {d["Name"] for d in job_requests.metric_definitions("question-answering")}
    assert "eval_accuracy" in {d["Name"] for d in job_requests.metric_definitions("text-classification")}


def test_tokenizer_stage_requests(settings):
    tokenizer = {"type": "wordpiece", "vocab_size": 8000, "instance_count": 3, "lowercase": True}
    run = run_for(settings, tokenizer=tokenizer,
                  data={"train": {"s3": "datasets/a/"}, "validation": {"s3": "datasets/b/"}})
    outputs = f"s3://hfsm-dev-artifacts/outputs/{run.run_id}/tokenizer/"
    map_request = job_requests.processing_request(run, settings, "map")
    reduce_request = job_requests.processing_request(run, settings, "reduce")
    code = {"InputName": "code", "AppManaged": False, "S3Input": {
        "S3Uri": "s3://hfsm-dev-artifacts/code/0123456789abcdef/", "LocalPath": "/opt/ml/processing/input/code",
        "S3DataType": "S3Prefix", "S3InputMode": "File", "S3DataDistributionType": "FullyReplicated"}}
    assert map_request["ProcessingInputs"] == [code, {"InputName": "data", "AppManaged": False, "S3Input": {
        "S3Uri": "s3://hfsm-dev-data/datasets/a/", "LocalPath": "/opt/ml/processing/input/data",
        "S3DataType": "S3Prefix", "S3InputMode": "File", "S3DataDistributionType": "ShardedByS3Key"}}]
    assert map_request["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]["S3Uri"] == outputs + "counts/"
    assert map_request["ProcessingResources"]["ClusterConfig"] == {
        "InstanceCount": 3, "InstanceType": "ml.c5.2xlarge", "VolumeSizeInGB": 30, "VolumeKmsKeyId": KMS}
    assert map_request["AppSpecification"] == {
        "ImageUri": settings.processing_image_uri,
        "ContainerEntrypoint": ["/bin/bash", "/opt/ml/processing/input/code/runproc.sh"],
        "ContainerArguments": ["tokenizer_map.py", "--tokenizer-type", "wordpiece", "--text-field", "text",
                               "--lowercase", "true", "--input-dir", "/opt/ml/processing/input/data",
                               "--output-dir", "/opt/ml/processing/output/counts"]}
    assert reduce_request["ProcessingResources"]["ClusterConfig"]["InstanceCount"] == 1
    assert reduce_request["ProcessingInputs"][1]["S3Input"]["S3Uri"] == outputs + "counts/"
    assert reduce_request["ProcessingInputs"][1]["S3Input"]["LocalPath"] == "/opt/ml/processing/input/counts"
    assert reduce_request["ProcessingOutputConfig"]["Outputs"][0]["S3Output"]["S3Uri"] == outputs + "tokenizer/"
    assert reduce_request["AppSpecification"]["ContainerArguments"] == [
        "tokenizer_reduce.py", "--tokenizer-type", "wordpiece", "--text-field", "text", "--lowercase", "true",
        "--vocab-size", "8000", "--min-frequency", "2",
        "--special-tokens", '["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]', "--model-max-length", "512",
        "--input-dir", "/opt/ml/processing/input/counts", "--output-dir", "/opt/ml/processing/output/tokenizer"]
    for request in (map_request, reduce_request):
        assert request["NetworkConfig"]["VpcConfig"]["Subnets"] == ["subnet-0aaa1111", "subnet-0bbb2222"]
        assert request["ProcessingOutputConfig"]["KmsKeyId"] == KMS
        assert_valid("CreateProcessingJob", request)
    train = job_requests.training_request(run, settings)
    assert train["InputDataConfig"][-1]["ChannelName"] == "tokenizer"
    assert train["InputDataConfig"][-1]["DataSource"]["S3DataSource"]["S3Uri"] == outputs + "tokenizer/"


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_every_example_request_is_valid(settings, example):
    run = prepare_run(json.loads(example.read_text()), settings, now=NOW)
    for operation, request in all_requests(run, settings):
        assert_valid(operation, request)


def test_the_validator_catches_what_botocore_lets_through(settings):
    request = training(settings)
    request["TrainingJobName"] = "bad_name"
    request["HyperParameters"] = {f"k{i}": "v" for i in range(101)}
    request["ResourceConfig"]["InstanceType"] = "ml.nope.large"
    request["VpcConfig"]["Subnets"] = [f"subnet-{i}" for i in range(17)]
    request["Tags"].append({"Key": "bad\nkey", "Value": "x"})
    errors = "\n".join(sagemaker_request_errors("CreateTrainingJob", request))
    for needle in ("TrainingJobName", "HyperParameters: 101 entries", "InstanceType: 'ml.nope.large' not in enum",
                   "Subnets: 17 items", "Key: 'bad\\nkey'"):
        assert needle in errors
    del request["RoleArn"]
    assert "Missing required parameter" in "\n".join(sagemaker_request_errors("CreateTrainingJob", request))


def test_request_limit_checks(settings):
    request = training(settings)
    assert preflight.training_request_problems(request) == []
    request["HyperParameters"] = {f"k{i}": "v" for i in range(101)}
    request["StoppingCondition"] = {"MaxRuntimeInSeconds": 7200, "MaxWaitTimeInSeconds": 3600}
    request["InputDataConfig"] = request["InputDataConfig"] * 11
    problems = "\n".join(preflight.training_request_problems(request))
    assert "hyperparameters: 101 hyperparameters" in problems
    assert "spot.max_wait_seconds: 3600 is less than max_runtime_seconds=7200" in problems
    assert "data: 22 channels; SageMaker allows 1-20" in problems
