"""Finish's CreateModelPackage request (lambda/runs/model_package.py: package_request), built without AWS and checked
against botocore's SageMaker service model."""

from __future__ import annotations

import copy
from hashlib import sha256
from typing import Any

import pytest
from testkit.lambdas import SETTINGS, sagemaker_request_errors

from hfsm_lambda import settings as settings_module
from hfsm_lambda.runs import model_package, verdict
from hfsm_lambda.runs.prepare import prepare_run

SPEC: dict[str, Any] = {
    "version": 1, "name": "qa", "task": "question-answering", "model": "s3://hfsm-dev-data/base-models/bert/",
    "description": "squad v1, two epochs", "tags": {"team": "nlp"},
    "data": {"train": {"s3": "datasets/squad/train/"}},
    "compute": {"instance_type": "ml.g5.2xlarge", "instance_count": 1}, "max_runtime_seconds": 3600,
}
FROZEN = {"uri": "s3://hfsm-dev-artifacts/registry/run/job/model.tar.gz", "etag": "0123456789abcdef0123456789abcdef",
          "version_id": "v-frozen", "source_version_id": None,
          "metrics_uri": "s3://hfsm-dev-artifacts/registry/run/job/metrics.json", "metrics_sha256": "ab" * 32}
JOB = "hfsm-dev-qa-train-0"


@pytest.fixture
def run(settings: settings_module.Settings) -> dict[str, Any]:  # `settings`: tests/lambda/conftest.py
    return prepare_run(SPEC, settings)


def test_the_request_is_valid_for_the_service_model(settings, run):
    metrics = {"eval_f1": 71.25, "eval_baseline_f1": 2.0, "train_loss": 0.5, "eval_loss": "nan"}
    request = model_package.package_request(settings, run, JOB, 1, metrics, verdict.judge(SPEC["task"], metrics),
                                            FROZEN)
    assert sagemaker_request_errors("CreateModelPackage", request) == []


def test_the_request_names_the_frozen_model_the_run_and_its_metrics(settings, run):
    metrics = {"eval_f1": 71.25, "train_loss": 0.5, "eval_loss": "nan", "epoch": 2}
    judged = {"verdict": "beats_baseline", "text": "beats the baseline"}
    request = model_package.package_request(settings, run, JOB, 1, metrics, judged, copy.deepcopy(FROZEN))
    assert request == {
        "ModelPackageGroupName": SETTINGS["model_package_group"],
        "ModelPackageDescription": f"[beats the baseline] question-answering fine-tune of {SPEC['model']}, run "
                                   f"{run.run_id}: squad v1, two epochs",
        "ModelApprovalStatus": "PendingManualApproval",
        "InferenceSpecification": {
            "Containers": [{"Image": SETTINGS["inference_image_uri"], "ModelDataUrl": FROZEN["uri"],
                            "Environment": {"HF_TASK": "question-answering"}, "ModelDataETag": FROZEN["etag"]}],
            "SupportedContentTypes": ["application/json"], "SupportedResponseMIMETypes": ["application/json"]},
        "ModelMetrics": {"ModelQuality": {"Statistics": {"ContentType": "application/json",
                                                         "S3Uri": FROZEN["metrics_uri"],
                                                         "ContentDigest": "sha256:" + "ab" * 32}}},
        "CustomerMetadataProperties": {
            "run_id": run.run_id, "training_job": JOB, "task": "question-answering", "base_model": SPEC["model"],
            "attempts": "2", "verdict": "beats_baseline", "model_etag": FROZEN["etag"], "model_version_id": "v-frozen",
            "source_version_id": "-", "eval_f1": "71.25", "train_loss": "0.5", "eval_loss": "nan", "epoch": "2"},
        "ClientToken": sha256(JOB.encode()).hexdigest()[:32],
        "Tags": [{"Key": "project", "Value": "hfsm"}, {"Key": "environment", "Value": "dev"},
                 {"Key": "run", "Value": run.run_id}, {"Key": "team", "Value": "nlp"}],
    }
    # The request's key order is the order the handler has always sent.
    assert list(request) == ["ModelPackageGroupName", "ModelPackageDescription", "ModelApprovalStatus",
                             "InferenceSpecification", "ModelMetrics", "CustomerMetadataProperties", "ClientToken",
                             "Tags"]


def test_limits_hold_and_the_verdict_survives_the_cut(settings, run):
    metrics = {f"eval_m{i:03d}": i / 3 for i in range(80)}
    judged = {"verdict": "not_judged", "text": "v" * 2000}
    request = model_package.package_request(settings, run, JOB, 0, metrics, judged, FROZEN)
    assert request["ModelPackageDescription"] == "[" + "v" * 1023
    properties = request["CustomerMetadataProperties"]
    assert len(properties) == 50 and properties["eval_m001"] == "0.333333"  # floats to 6 significant digits
    assert sagemaker_request_errors("CreateModelPackage", request) == []


def test_one_client_token_per_training_job(settings, run):
    judged = {"verdict": "not_judged", "text": "t"}
    first, again = (model_package.package_request(settings, run, JOB, a, {}, judged, FROZEN)["ClientToken"]
                    for a in (0, 3))
    other = model_package.package_request(settings, run, JOB + "x", 0, {}, judged, FROZEN)["ClientToken"]
    assert first == again != other and len(first) == 32
