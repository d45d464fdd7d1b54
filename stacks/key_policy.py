"""The project key's policy, written out instead of CDK's default (account root `kms:*`).

Each statement names who may use the key for what, and through which service:

- KeyAdministration: the account (its IAM administrators, CloudFormation) manages the key; no crypto operation.
- UseThroughProjectBuckets: principals of the account encrypt/decrypt only through S3 and only for objects of
  the project's buckets (encryption context `aws:s3:arn`). Their IAM policies must allow it too: the project's
  roles and the run-submitter/dataset-uploader roles do; nobody else does by default.
- SageMakerGrants: the execution role and the two start roles let SageMaker create grants (encrypted job volumes
  and outputs) for AWS resources only (`kms:GrantIsForAWSResource`), through SageMaker/EC2.
- NotificationsThroughSns: Finish, NotifyFailure and CheckJob (durability warnings) publish to the
  encrypted topic, through SNS.
- LambdaEnvironment: the account's deployers encrypt the functions' environment variables through Lambda, for the
  project's functions only (encryption context `aws:lambda:FunctionArn`); Lambda decrypts them through the grant
  it creates (for AWS resources only).
- CloudWatchLogs: the Logs service for the project's own log groups only (encryption context `aws:logs:arn`).
- Service principals that publish alarms to the topic (CloudWatch alarms, AWS Budgets) from this account only.
- FsxVolumes (FSx PERSISTENT types): the deployers let FSx create its grant, through FSx, from this account only
  (FSx documents no encryption context to pin; the account's principals also need an IAM grant on the key).
Principals are matched with `aws:PrincipalArn` against fixed role names: KMS rejects a key policy naming a role
that does not exist yet, and the roles live in the pipeline stack, deployed after this key.
"""

from __future__ import annotations

from aws_cdk import aws_iam as iam

from stacks import names
from stacks.settings.environment import EnvironmentConfig

ADMIN_ACTIONS = [
    "kms:CreateAlias", "kms:UpdateAlias", "kms:DeleteAlias", "kms:DescribeKey", "kms:GetKeyPolicy", "kms:PutKeyPolicy",
    "kms:ListKeyPolicies", "kms:GetKeyRotationStatus", "kms:EnableKeyRotation", "kms:DisableKeyRotation",
    "kms:ListKeyRotations", "kms:RotateKeyOnDemand", "kms:ListResourceTags", "kms:TagResource", "kms:UntagResource",
    "kms:ListGrants", "kms:RevokeGrant", "kms:UpdateKeyDescription", "kms:EnableKey", "kms:DisableKey",
    "kms:ScheduleKeyDeletion", "kms:CancelKeyDeletion",
]
DATA_ACTIONS = ["kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey", "kms:DescribeKey"]
LOGS_ACTIONS = ["kms:Encrypt", "kms:Decrypt", "kms:ReEncryptFrom", "kms:ReEncryptTo", "kms:GenerateDataKey",
                "kms:GenerateDataKeyWithoutPlaintext", "kms:DescribeKey"]
SNS_HANDLERS = ("finish", "notify_failure", "check_job")  # check_job: durability warnings
GRANT_HANDLERS = ("start_training", "start_processing")


def _via(config: EnvironmentConfig, *services: str) -> list[str]:
    return [f"{s}.{config.region}.amazonaws.com" for s in services]


def _principal_arns(config: EnvironmentConfig, handlers: tuple[str, ...], *, sagemaker: bool = False) -> list[str]:
    arns = [names.role_arn(config, names.function_role_name(config, h)) for h in handlers]
    if sagemaker:
        arns.append(names.role_arn(config, names.sagemaker_role_name(config)))
    return arns


def key_policy(config: EnvironmentConfig, bucket_arns: list[str]) -> iam.PolicyDocument:
    account = iam.AccountRootPrincipal()
    region, acct = config.region, config.account
    # Lambda encrypts a function's environment with its ARN as encryption context (`aws:lambda:FunctionArn`): the
    # project's functions are `<prefix>-<handler>`, CDK's code-deployment provider `<prefix>-pipeline-...`.
    project_functions = f"arn:aws:lambda:{region}:{acct}:function:{config.prefix}-*"
    statements = [
        iam.PolicyStatement(sid="KeyAdministration", principals=[account], actions=ADMIN_ACTIONS, resources=["*"]),
        iam.PolicyStatement(
            sid="UseThroughProjectBuckets", principals=[account], actions=DATA_ACTIONS, resources=["*"],
            conditions={"StringEquals": {"kms:ViaService": _via(config, "s3"), "kms:CallerAccount": acct},
                        "StringLike": {"kms:EncryptionContext:aws:s3:arn": [
                            v for arn in bucket_arns for v in (arn, f"{arn}/*")]}}),
        iam.PolicyStatement(
            sid="SageMakerGrants", principals=[account], actions=["kms:CreateGrant"], resources=["*"],
            conditions={"ArnEquals": {"aws:PrincipalArn": _principal_arns(config, GRANT_HANDLERS, sagemaker=True)},
                        "StringEquals": {"kms:ViaService": _via(config, "sagemaker", "ec2")},
                        "Bool": {"kms:GrantIsForAWSResource": "true"}}),
        iam.PolicyStatement(
            sid="SageMakerDescribeKey", principals=[account], actions=["kms:DescribeKey"], resources=["*"],
            conditions={"ArnEquals": {"aws:PrincipalArn": _principal_arns(config, GRANT_HANDLERS, sagemaker=True)},
                        "StringEquals": {"kms:ViaService": _via(config, "sagemaker", "ec2")}}),
        iam.PolicyStatement(
            sid="NotificationsThroughSns", principals=[account], actions=["kms:GenerateDataKey", "kms:Decrypt"],
            resources=["*"],
            conditions={"ArnEquals": {"aws:PrincipalArn": _principal_arns(config, SNS_HANDLERS)},
                        "StringEquals": {"kms:ViaService": _via(config, "sns")}}),
        iam.PolicyStatement(
            sid="LambdaEnvironment", principals=[account], actions=["kms:Encrypt", "kms:Decrypt"], resources=["*"],
            conditions={"StringEquals": {"kms:ViaService": _via(config, "lambda"), "kms:CallerAccount": acct},
                        "ArnLike": {"kms:EncryptionContext:aws:lambda:FunctionArn": project_functions}}),
        iam.PolicyStatement(
            sid="LambdaDescribeKey", principals=[account], actions=["kms:DescribeKey"], resources=["*"],
            conditions={"StringEquals": {"kms:ViaService": _via(config, "lambda"), "kms:CallerAccount": acct}}),
        iam.PolicyStatement(
            sid="LambdaEnvironmentGrant", principals=[account], actions=["kms:CreateGrant"], resources=["*"],
            conditions={"StringEquals": {"kms:ViaService": _via(config, "lambda")},
                        "Bool": {"kms:GrantIsForAWSResource": "true"}}),
        iam.PolicyStatement(
            sid="CloudWatchLogs", principals=[iam.ServicePrincipal(f"logs.{region}.amazonaws.com")],
            actions=LOGS_ACTIONS, resources=["*"],
            conditions={"ArnLike": {"kms:EncryptionContext:aws:logs:arn": [
                names.log_group_arn(config, g) for g in names.project_log_groups(config)]}}),
        iam.PolicyStatement(
            sid="AlarmsToTheTopic", principals=[iam.ServicePrincipal("cloudwatch.amazonaws.com"),
                                                iam.ServicePrincipal("budgets.amazonaws.com")],
            actions=["kms:GenerateDataKey", "kms:Decrypt"], resources=["*"],
            conditions={"StringEquals": {"aws:SourceAccount": acct}}),
    ]
    if config.fsx.enabled and config.fsx.deployment_type.startswith("PERSISTENT"):
        statements.append(iam.PolicyStatement(
            sid="FsxVolumes", principals=[account], actions=["kms:CreateGrant"], resources=["*"],
            conditions={"StringEquals": {"kms:ViaService": _via(config, "fsx")},
                        "Bool": {"kms:GrantIsForAWSResource": "true"}}))
        statements.append(iam.PolicyStatement(
            sid="FsxDescribeKey", principals=[account], actions=["kms:DescribeKey", "kms:Encrypt", "kms:Decrypt",
                                                                "kms:GenerateDataKey"],
            resources=["*"], conditions={"StringEquals": {"kms:ViaService": _via(config, "fsx"),
                                                          "kms:CallerAccount": acct}}))
    return iam.PolicyDocument(statements=statements)
