"""The start handlers re-check the request they are about to send, whatever `run` they were given."""

from __future__ import annotations

import json
from typing import Any

import pytest
from moto.sagemaker.models import sagemaker_backends
from testkit.lambdas import SETTINGS, settings_dict

from hfsm_lambda import handlers
from hfsm_lambda import settings as settings_module
from hfsm_lambda.errors import RequestRejected
from hfsm_lambda.plan import job_requests, request_guard
from hfsm_lambda.plan import run as planned
from hfsm_lambda.runs.prepare import prepare_run

SPEC: dict[str, Any] = {
    "version": 1, "name": "qa", "task": "question-answering", "model": "s3://hfsm-dev-data/base-models/bert/",
    "data": {"train": {"s3": "datasets/squad/train/"}},
    "compute": {"instance_type": "ml.g5.2xlarge", "instance_count": 2}, "max_runtime_seconds": 3600,
    "tokenizer": {"type": "bpe", "instance_type": "ml.c5.2xlarge", "instance_count": 2},
}


@pytest.fixture
def settings() -> settings_module.Settings:
    return settings_module.Settings.from_dict(settings_dict())


@pytest.fixture
def run(settings: settings_module.Settings) -> dict[str, Any]:
    return prepare_run(SPEC, settings)


def test_planned_requests_pass(settings: settings_module.Settings, run: dict[str, Any]) -> None:
    assert request_guard.training_request_problems(job_requests.training_request(run, settings), run, settings, 0) == []
    for stage in ("tokenizer_map", "tokenizer_reduce"):
        request = job_requests.processing_request(run, settings, stage)
        assert request_guard.processing_request_problems(request, run, settings, stage) == []


def forged(run: planned.Run, **spec_changes: Any) -> dict[str, Any]:
    """The run as the state carries it (JSON), for a test to forge."""
    out = planned.to_json(run)
    out["spec"].update(spec_changes)
    return out


def test_the_forged_tokenizer_run_of_the_finding_is_rejected(settings: settings_module.Settings,
                                                               run: dict[str, Any]) -> None:
    """100 x ml.p5.48xlarge, reading a bucket outside the project, writing into another run's models/."""
    bad = forged(run)
    bad["spec"]["tokenizer"].update(instance_type="ml.p5.48xlarge", instance_count=100)
    bad["spec"]["data"]["train"]["s3"] = "s3://someone-elses-bucket/loot/"
    bad["uris"]["tokenizer_counts"] = f"s3://{SETTINGS['artifacts_bucket']}/models/victim-20250101000000-abcd/"
    bad_run = planned.from_json(bad)  # forged values, a planned run's shape: parsed, then refused
    request = job_requests.processing_request(bad_run, settings, "map")
    problems = request_guard.processing_request_problems(request, bad_run, settings, "tokenizer_map")
    text = "\n".join(problems)
    for fragment in ("ClusterConfig.InstanceType: ml.p5.48xlarge", "ClusterConfig.InstanceCount: 100",
                     "s3://someone-elses-bucket/loot/", "models/victim-20250101000000-abcd/"):
        assert fragment in text, (fragment, problems)


def test_processing_jobs_run_network_isolated(settings: settings_module.Settings, run: dict[str, Any]) -> None:
    """Issue 23: the tokenizer jobs need no network (runproc.sh installs from the shipped wheels only)."""
    for stage in ("tokenizer_map", "tokenizer_reduce"):
        request = job_requests.processing_request(run, settings, stage)
        assert request["NetworkConfig"]["EnableNetworkIsolation"] is True
        request["NetworkConfig"]["EnableNetworkIsolation"] = False
        problems = request_guard.processing_request_problems(request, run, settings, stage)
        assert any(p.startswith("NetworkConfig.EnableNetworkIsolation") for p in problems), problems


@pytest.mark.parametrize(("mutate", "fragment"), [
    (lambda r: r["ResourceConfig"].update(InstanceType="ml.p4de.24xlarge"), "ResourceConfig.InstanceType"),
    (lambda r: r["ResourceConfig"].update(InstanceCount=64), "ResourceConfig.InstanceCount"),
    (lambda r: r.update(RoleArn="arn:aws:iam::123456789012:role/admin"), "RoleArn"),
    (lambda r: r["AlgorithmSpecification"].update(TrainingImage="evil.example/train:latest"), "TrainingImage"),
    (lambda r: r["OutputDataConfig"].update(S3OutputPath="s3://hfsm-dev-artifacts/models/other-run/"),
     "OutputDataConfig.S3OutputPath"),
    (lambda r: r["OutputDataConfig"].update(KmsKeyId="arn:aws:kms:us-east-1:999999999999:key/x"), "KmsKeyId"),
    (lambda r: r["CheckpointConfig"].update(S3Uri="s3://hfsm-dev-artifacts/checkpoints/other-run/"),
     "CheckpointConfig.S3Uri"),
    (lambda r: r["InputDataConfig"][0]["DataSource"]["S3DataSource"].update(S3Uri="s3://elsewhere/x/"),
     "InputDataConfig[train]"),
    (lambda r: r["InputDataConfig"][0]["DataSource"]["S3DataSource"].update(
        S3Uri="s3://hfsm-dev-artifacts/checkpoints/other-run/"), "InputDataConfig[train]"),
    (lambda r: r["HyperParameters"].update(sagemaker_submit_directory='"s3://elsewhere/code.tar.gz"'),
     "sagemaker_submit_directory"),
    (lambda r: r["HyperParameters"].update(trust_remote_code="true"), "hyperparameters.trust_remote_code"),
    (lambda r: r.update(EnableNetworkIsolation=False), "EnableNetworkIsolation"),
    (lambda r: r["VpcConfig"].update(SecurityGroupIds=["sg-open"]), "VpcConfig.SecurityGroupIds"),
    (lambda r: r["VpcConfig"].update(Subnets=["subnet-public"]), "VpcConfig.Subnets"),
    (lambda r: r.update(TrainingJobName="hfsm-dev-somebody-else"), "TrainingJobName"),
    (lambda r: r["StoppingCondition"].update(MaxRuntimeInSeconds=10**8), "MaxRuntimeInSeconds"),
])
def test_each_kind_of_forged_training_request_is_rejected(settings: settings_module.Settings, run: dict[str, Any],
                                                         mutate: Any, fragment: str) -> None:
    request = job_requests.training_request(run, settings)
    mutate(request)
    problems = request_guard.training_request_problems(request, run, settings, 0)
    assert any(fragment in p for p in problems), problems


def test_a_single_job_over_the_cost_limit_is_rejected(run: dict[str, Any]) -> None:
    settings = settings_module.Settings.from_dict(settings_dict(max_run_cost_usd=3,
                                                                instance_prices={"ml.g5.2xlarge": 1.515}))
    request = job_requests.training_request(run, settings)
    (problem,) = request_guard.training_request_problems(request, run, settings, 0)
    # 2 x ml.g5.2xlarge x 1 h + 2 x 100 GB for 1 h: the same figure as cost.worst_case_cost (SageMaker's retries
    # inside the hour)
    assert problem.startswith("cost:") and "= $3.07" in problem and "$3.00" in problem


def test_start_handlers_refuse_before_calling_sagemaker(aws_account: dict[str, Any], context: Any) -> None:
    settings = settings_module.Settings.from_dict(settings_dict())
    run = prepare_run(SPEC, settings)
    bad = forged(run)
    bad["spec"]["compute"]["instance_count"] = 100
    bad["attempts"][0]["instance_count"] = 100  # what the request builder reads (the plan)
    with pytest.raises(RequestRejected) as info:
        handlers.start_training({"run": bad, "attempt": 0}, context)
    assert "ResourceConfig.InstanceCount: 100" in str(info.value)
    bad = forged(run)
    bad["run_id"] = "../../etc"
    with pytest.raises(RequestRejected):
        handlers.start_processing({"run": bad, "stage": "map"}, context)
    backend = sagemaker_backends[SETTINGS["account"]][SETTINGS["region"]]
    assert backend.training_jobs == {} and backend.processing_jobs == {}
    # The error is what Step Functions sees: a JSON-serializable name and message.
    assert type(info.value).__name__ == "RequestRejected" and json.dumps(str(info.value))


def test_a_run_that_is_not_a_plan_is_rejected_not_a_crash(aws_account: dict[str, Any], context: Any) -> None:
    with pytest.raises(RequestRejected) as info:
        handlers.start_processing({"run": {"run_id": "x-20250101000000-abcd", "spec": {}}, "stage": "map"}, context)
    assert "not a run planned by Prepare" in str(info.value)
