"""The execution role that SageMaker training and processing jobs assume: least privilege, no wildcard actions."""

from __future__ import annotations

import dataclasses

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from constructs import Construct

from hfsm_lambda.s3_layout import (
    CHECKPOINTS_PREFIX,
    CODE_PREFIX,
    MODELS_PREFIX,
    OUTPUTS_PREFIX,
    TENSORBOARD_PREFIX,
)
from stacks.assets.image_uris import ImageUris

S3_READ = ["s3:GetObject", "s3:GetObjectVersion"]
S3_WRITE = ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]
S3_UPLOAD = ["s3:PutObject", "s3:AbortMultipartUpload"]
# Actions SageMaker needs to attach a job's ENIs in the VPC (SageMaker Developer Guide, "SageMaker roles":
# "CreateTrainingJob API: Execution Role Permissions").
ENI_DESCRIBE = ["ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions",
                "ec2:DescribeSubnets", "ec2:DescribeSecurityGroups"]
ENI_MANAGE = ["ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission",
              "ec2:DeleteNetworkInterface", "ec2:DeleteNetworkInterfacePermission"]


def job_image_repository_arns(images: ImageUris) -> list[str]:
    """ECR repositories of the images jobs run: training and processing (the inference image is for hosting)."""
    jobs_only = dataclasses.replace(images, inference=images.processing)
    return [f"arn:aws:ecr:{region}:{account}:repository/{repo}" for account, region, repo in jobs_only.repositories()]


class SageMakerExecutionRole(Construct):
    """One role for every job of the environment (SageMaker has no per-job IAM context): README "Security" states
    what a job could still touch and what guards the rest (registry/, bucket policies, network isolation)."""

    def __init__(self, scope: Construct, construct_id: str, *, role_name: str, data_bucket_arn: str,
                 artifacts_bucket_arn: str, key: kms.IKey, images: ImageUris, vpc: ec2.IVpc,
                 subnets: list[ec2.ISubnet], security_groups: list[ec2.ISecurityGroup],
                 file_system_arn: str | None, create_log_groups: bool = False) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        # aws:SourceAccount: SageMaker assumes the role only for this account's jobs (confused deputy).
        self.role = iam.Role(self, "Role", role_name=role_name,
                             assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com", conditions={
                                 "StringEquals": {"aws:SourceAccount": stack.account}}),
                             description="Execution role of the project's SageMaker training and processing jobs")
        add = self.role.add_to_policy

        add(iam.PolicyStatement(sid="ReadData", actions=S3_READ, resources=[f"{data_bucket_arn}/*"]))
        add(iam.PolicyStatement(sid="ListBuckets", actions=["s3:ListBucket"],
                                resources=[data_bucket_arn, artifacts_bucket_arn]))
        read_prefixes = [CODE_PREFIX, CHECKPOINTS_PREFIX, MODELS_PREFIX, OUTPUTS_PREFIX]
        add(iam.PolicyStatement(sid="ReadArtifacts", actions=S3_READ,
                                resources=[f"{artifacts_bucket_arn}/{p}*" for p in read_prefixes]))
        # Checkpoints are synced both ways (a local deletion is mirrored); models and outputs are only uploaded.
        # Jobs never write code/ or registry/ (the registered models).
        add(iam.PolicyStatement(sid="WriteCheckpoints", actions=S3_WRITE,
                                resources=[f"{artifacts_bucket_arn}/{CHECKPOINTS_PREFIX}*"]))
        add(iam.PolicyStatement(sid="WriteModelsAndOutputs", actions=S3_UPLOAD, resources=[
            f"{artifacts_bucket_arn}/{p}*" for p in (MODELS_PREFIX, OUTPUTS_PREFIX, TENSORBOARD_PREFIX)]))
        add(iam.PolicyStatement(sid="UseProjectKey", resources=[key.key_arn], actions=[
            "kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey", "kms:DescribeKey"]))
        add(iam.PolicyStatement(sid="GrantKeyToJobVolumes", resources=[key.key_arn], actions=["kms:CreateGrant"],
                                conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}}))

        add(iam.PolicyStatement(sid="PullDlcImages", resources=job_image_repository_arns(images),
            actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"]))
        # GetAuthorizationToken has no resource-level permissions: AWS requires "*".
        add(iam.PolicyStatement(sid="EcrLogin", actions=["ecr:GetAuthorizationToken"], resources=["*"]))

        log_groups = f"arn:{stack.partition}:logs:{stack.region}:{stack.account}:log-group:/aws/sagemaker/"
        # The stack creates the two log groups (key, retention) unless config says the account has them.
        log_actions = ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"]
        add(iam.PolicyStatement(sid="WriteJobLogs", resources=[
            f"{log_groups}TrainingJobs:*", f"{log_groups}ProcessingJobs:*"],
            actions=(["logs:CreateLogGroup"] if create_log_groups else []) + log_actions))
        # PutMetricData has no resource-level permissions; the condition pins the SageMaker namespaces.
        add(iam.PolicyStatement(sid="PutJobMetrics", actions=["cloudwatch:PutMetricData"], resources=["*"],
                                conditions={"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}}))

        # ENIs for VPC jobs: describe calls take no resource; create/delete are pinned to the VPC.
        add(iam.PolicyStatement(sid="DescribeNetwork", actions=ENI_DESCRIBE, resources=["*"]))
        eni = f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}:network-interface/*"
        add(iam.PolicyStatement(sid="ManageJobEnis", actions=ENI_MANAGE, resources=[eni], conditions={
            "ArnEquals": {"ec2:Vpc": f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}:vpc/{vpc.vpc_id}"}}))
        add(iam.PolicyStatement(sid="AttachEnisToSubnetsAndGroups", actions=["ec2:CreateNetworkInterface"],
                                resources=[
            *(f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}:subnet/{s.subnet_id}" for s in subnets),
            *(f"arn:{stack.partition}:ec2:{stack.region}:{stack.account}:security-group/{g.security_group_id}"
              for g in security_groups)]))
        if file_system_arn:
            add(iam.PolicyStatement(sid="ReadFsx", actions=["fsx:DescribeFileSystems"], resources=[file_system_arn]))
