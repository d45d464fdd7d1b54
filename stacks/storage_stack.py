"""Storage: the project KMS key, the data bucket, the artifacts bucket and the server-access-log bucket."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from stacks.common import removal_policy
from stacks.config import EnvironmentConfig

# Prefixes of the artifacts bucket (CONTRACTS.md "S3 layout"); the SageMaker role is scoped to them.
CODE_PREFIX = "code/"
CHECKPOINTS_PREFIX = "checkpoints/"
MODELS_PREFIX = "models/"
OUTPUTS_PREFIX = "outputs/"
RUNS_PREFIX = "runs/"


def bucket_name(config: EnvironmentConfig, purpose: str) -> str:
    """Fixed, globally unique names, so that policies in other stacks can name the buckets' ARNs literally."""
    return f"{config.prefix}-{purpose}-{config.account}-{config.region}"


class StorageStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        removal = removal_policy(config)

        self.key = kms.Key(
            self, "Key", alias=f"alias/{config.prefix}", enable_key_rotation=True, removal_policy=removal,
            description=f"{config.prefix}: data, artifacts, logs and notifications")
        # CloudWatch Logs (state machine and flow logs) encrypts its log groups with this key.
        self.key.add_to_resource_policy(iam.PolicyStatement(
            actions=["kms:Encrypt", "kms:Decrypt", "kms:ReEncryptFrom", "kms:ReEncryptTo",
                     "kms:GenerateDataKey", "kms:GenerateDataKeyWithoutPlaintext", "kms:DescribeKey"],
            principals=[iam.ServicePrincipal(f"logs.{config.region}.amazonaws.com")],
            resources=["*"],  # a key policy's resource is always the key itself
            conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn":
                                    f"arn:aws:logs:{config.region}:{config.account}:log-group:*"}},
        ))

        # Server access logs: S3 delivers them with SSE-S3 only (the log service cannot use a KMS key).
        self.access_logs = s3.Bucket(
            self, "AccessLogs", bucket_name=bucket_name(config, "access-logs"), encryption=s3.BucketEncryption.S3_MANAGED,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL, enforce_ssl=True, versioned=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
            removal_policy=removal,
            lifecycle_rules=[s3.LifecycleRule(id="expire-access-logs", expiration=Duration.days(365),
                                              noncurrent_version_expiration=Duration.days(30))],
        )
        common = dict(
            encryption=s3.BucketEncryption.KMS, encryption_key=self.key, bucket_key_enabled=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL, enforce_ssl=True, versioned=True,
            server_access_logs_bucket=self.access_logs, removal_policy=removal,
        )
        abort_uploads = s3.LifecycleRule(id="abort-incomplete-uploads",
                                         abort_incomplete_multipart_upload_after=Duration.days(7))
        old_versions = s3.LifecycleRule(
            id="expire-old-versions",
            noncurrent_version_expiration=Duration.days(config.noncurrent_version_expiry_days))
        # Data: user datasets and run specs; uploads under runs/ start runs through EventBridge.
        self.data_bucket = s3.Bucket(
            self, "Data", bucket_name=bucket_name(config, "data"), server_access_logs_prefix="data/",
            lifecycle_rules=[abort_uploads, old_versions], **common)
        # EventBridge notifications set on the bucket itself: the L2 flag would add a custom-resource Lambda.
        cfn_data = self.data_bucket.node.default_child
        cfn_data.add_property_override("NotificationConfiguration.EventBridgeConfiguration.EventBridgeEnabled", True)
        # Artifacts: code, checkpoints (short-lived), models, outputs.
        self.artifacts_bucket = s3.Bucket(
            self, "Artifacts", bucket_name=bucket_name(config, "artifacts"), server_access_logs_prefix="artifacts/",
            lifecycle_rules=[
                abort_uploads, old_versions,
                s3.LifecycleRule(id="expire-checkpoints", prefix=CHECKPOINTS_PREFIX,
                                 expiration=Duration.days(config.checkpoint_expiry_days),
                                 noncurrent_version_expiration=Duration.days(1)),
            ],
            **common)
