"""Storage: the project KMS key, the data bucket, the artifacts bucket and the server-access-log bucket."""

from __future__ import annotations

from aws_cdk import Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from constructs import Construct

from hfsm_lambda import s3_layout as layout  # the buckets' prefixes (CONTRACTS.md "S3 layout")
from stacks import names
from stacks.common import removal_policy
from stacks.key_policy import key_policy
from stacks.settings.environment import EnvironmentConfig


def bucket_name(config: EnvironmentConfig, purpose: str) -> str:
    """Fixed, globally unique names, so that policies in other stacks can name the buckets' ARNs literally."""
    return f"{config.prefix}-{purpose}-{config.account}-{config.region}"


class StorageStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        removal = removal_policy(config)

        bucket_arns = [f"arn:aws:s3:::{bucket_name(config, p)}" for p in ("data", "artifacts")]
        # An explicit key policy (stacks/key_policy.py): who may use the key, for what, through which service.
        self.key = kms.Key(
            self, "Key", alias=f"alias/{config.prefix}", enable_key_rotation=True, removal_policy=removal,
            description=f"{config.prefix}: data, artifacts, logs and notifications",
            policy=key_policy(config, bucket_arns))

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
                s3.LifecycleRule(id="expire-checkpoints", prefix=layout.CHECKPOINTS_PREFIX,
                                 expiration=Duration.days(config.checkpoint_expiry_days),
                                 noncurrent_version_expiration=Duration.days(1)),
                # what the training code refused, moved out of checkpoints/ (lambda/runs/set_aside.py): kept as long
                s3.LifecycleRule(id="expire-refused", prefix=layout.REFUSED_PREFIX,
                                 expiration=Duration.days(config.checkpoint_expiry_days),
                                 noncurrent_version_expiration=Duration.days(1)),
            ],
            **common)
        self._bucket_policies(config)

    def _bucket_policies(self, config: EnvironmentConfig) -> None:
        """Guardrails no IAM policy can widen: the project key only, run specs from run submitters only,
        registered models and code written by their one writer only."""
        for bucket in (self.data_bucket, self.artifacts_bucket):
            objects = bucket.arn_for_objects("*")
            bucket.add_to_resource_policy(iam.PolicyStatement(
                sid="DenyOtherEncryption", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
                actions=["s3:PutObject"], resources=[objects],
                conditions={"StringNotEquals": {"s3:x-amz-server-side-encryption": "aws:kms"},
                            "Null": {"s3:x-amz-server-side-encryption": "false"}}))
            # SSE-C: an object under a key the uploader keeps (unreadable to the project, or a ransom-style
            # re-encryption with a key AWS never sees); the header's presence is enough to refuse the upload.
            bucket.add_to_resource_policy(iam.PolicyStatement(
                sid="DenyCustomerProvidedKeys", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
                actions=["s3:PutObject"], resources=[objects],
                conditions={"Null": {"s3:x-amz-server-side-encryption-customer-algorithm": "false"}}))
            bucket.add_to_resource_policy(iam.PolicyStatement(
                sid="DenyOtherKeys", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
                actions=["s3:PutObject"], resources=[objects],
                conditions={"StringNotEquals": {"s3:x-amz-server-side-encryption-aws-kms-key-id": [
                                self.key.key_arn, self.key.key_id]},
                            "Null": {"s3:x-amz-server-side-encryption-aws-kms-key-id": "false"}}))
        # Who may start a run is its own permission: an uploaded runs/*.json starts one (README "Security").
        submitters = [names.role_arn(config, names.run_submitter_role_name(config)), *config.run_submitter_arns]
        self.data_bucket.add_to_resource_policy(iam.PolicyStatement(
            sid="RunSpecsOnlyFromRunSubmitters", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=["s3:PutObject", "s3:ReplicateObject"],
            resources=[self.data_bucket.arn_for_objects(f"{layout.RUNS_PREFIX}*")],
            conditions={"ArnNotEquals": {"aws:PrincipalArn": submitters}}))
        finish = names.role_arn(config, names.function_role_name(config, "finish"))
        self.artifacts_bucket.add_to_resource_policy(iam.PolicyStatement(
            sid="RegisteredModelsOnlyFromFinish", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=["s3:PutObject", "s3:DeleteObject", "s3:ReplicateObject"],
            resources=[self.artifacts_bucket.arn_for_objects(f"{layout.REGISTRY_PREFIX}*")],
            conditions={"ArnNotEquals": {"aws:PrincipalArn": finish}}))
        self.artifacts_bucket.add_to_resource_policy(iam.PolicyStatement(
            sid="RegisteredModelVersionsAreKept", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=["s3:DeleteObjectVersion"],
            resources=[self.artifacts_bucket.arn_for_objects(f"{layout.REGISTRY_PREFIX}*")]))
        prepare = names.role_arn(config, names.function_role_name(config, "prepare"))
        self.artifacts_bucket.add_to_resource_policy(iam.PolicyStatement(
            sid="RunIdsClaimedOnlyByPrepare", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=["s3:PutObject", "s3:DeleteObject", "s3:ReplicateObject"],
            resources=[self.artifacts_bucket.arn_for_objects(f"{layout.CLAIMS_PREFIX}*")],
            conditions={"ArnNotEquals": {"aws:PrincipalArn": prepare}}))
        self.artifacts_bucket.add_to_resource_policy(iam.PolicyStatement(
            sid="RunIdClaimsAreKept", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=["s3:DeleteObject", "s3:DeleteObjectVersion"],
            resources=[self.artifacts_bucket.arn_for_objects(f"{layout.CLAIMS_PREFIX}*")]))
        deployer = names.role_arn(config, names.code_deployment_role_name(config))
        self.artifacts_bucket.add_to_resource_policy(iam.PolicyStatement(
            sid="CodeOnlyFromTheCodeDeployment", effect=iam.Effect.DENY, principals=[iam.AnyPrincipal()],
            actions=["s3:PutObject", "s3:DeleteObject", "s3:ReplicateObject"],
            resources=[self.artifacts_bucket.arn_for_objects(f"{layout.CODE_PREFIX}*")],
            conditions={"ArnNotEquals": {"aws:PrincipalArn": deployer}}))
