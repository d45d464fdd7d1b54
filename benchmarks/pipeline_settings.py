"""The Lambdas' PIPELINE_SETTINGS the Lambda benchmarks run with (a dev environment as the stack would set it)."""

from __future__ import annotations

SETTINGS = {
    "project": "hfsm", "environment": "dev", "region": "us-east-1", "account": "123456789012",
    "data_bucket": "hfsm-dev-data", "artifacts_bucket": "hfsm-dev-artifacts",
    "kms_key_arn": "arn:aws:kms:us-east-1:123456789012:key/k", "sagemaker_role_arn": "arn:aws:iam::123456789012:role/r",
    "training_image_uri": "img", "processing_image_uri": "img", "inference_image_uri": "img",
    "code_s3_prefix": "s3://hfsm-dev-artifacts/code/0123456789abcdef/", "subnet_ids": ["subnet-1"],
    "security_group_ids": ["sg-1"], "fsx": None,
    "allowed_instance_types": ["ml.g5.2xlarge", "ml.g5.12xlarge", "ml.g6.2xlarge", "ml.p4d.24xlarge"],
    "tokenizer_instance_types": ["ml.c5.2xlarge"], "max_instance_count": 4, "spot_default": True,
    "inter_container_encryption": False, "default_max_runtime_seconds": 86400, "default_max_wait_seconds": 172800,
    "poll_seconds": 60, "model_package_group": "g", "topic_arn": "arn:aws:sns:us-east-1:123456789012:t",
}
