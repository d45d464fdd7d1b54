"""The environment's MLflow tracking server (cdk.json `tracking`): SageMaker's managed MLflow
(`AWS::SageMaker::MlflowTrackingServer`), its artifact store a prefix of the project's KMS-encrypted artifacts
bucket (`mlflow/`), its own role that may touch only that prefix and the key, and automatic model registration
off: the pipeline registers the models itself (Finish), and tags the MLflow run with the model package ARN.
"""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_sagemaker as sagemaker
from constructs import Construct

from hfsm_lambda.s3_layout import MLFLOW_PREFIX
from stacks import names
from stacks.common import removal_policy
from stacks.settings.environment import EnvironmentConfig


class TrackingServer(Construct):
    """Exposes `arn` (literal: the job role, Finish's role and the VPC endpoint policy name it) and `role`."""

    def __init__(self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, artifacts_bucket_arn: str,
                 artifacts_bucket_name: str, key: kms.IKey) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        self.arn = names.tracking_server_arn(config)
        self.role = iam.Role(
            self, "Role", role_name=f"{config.prefix}-mlflow-server",
            assumed_by=iam.ServicePrincipal("sagemaker.amazonaws.com", conditions={
                "StringEquals": {"aws:SourceAccount": stack.account}}),
            description="The MLflow tracking server: its artifact store (mlflow/ of the artifacts bucket) only")
        store = f"{artifacts_bucket_arn}/{MLFLOW_PREFIX}*"
        self.role.add_to_policy(iam.PolicyStatement(sid="ArtifactStore", resources=[store], actions=[
            "s3:GetObject", "s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"]))
        self.role.add_to_policy(iam.PolicyStatement(
            sid="ListArtifactStore", actions=["s3:ListBucket"], resources=[artifacts_bucket_arn],
            conditions={"StringLike": {"s3:prefix": [f"{MLFLOW_PREFIX}*"]}}))
        self.role.add_to_policy(iam.PolicyStatement(sid="BucketLocation", actions=["s3:GetBucketLocation"],
                                                    resources=[artifacts_bucket_arn]))
        self.role.add_to_policy(iam.PolicyStatement(sid="UseProjectKey", resources=[key.key_arn], actions=[
            "kms:Decrypt", "kms:GenerateDataKey"]))
        self.server = sagemaker.CfnMlflowTrackingServer(
            self, "Server", tracking_server_name=names.tracking_server_name(config),
            artifact_store_uri=f"s3://{artifacts_bucket_name}/{MLFLOW_PREFIX}", role_arn=self.role.role_arn,
            tracking_server_size=config.tracking.size, automatic_model_registration=False)
        self.server.apply_removal_policy(removal_policy(config))
        self.server.node.add_dependency(self.role)  # the role's policy exists before the server uses it


# The MLflow calls as IAM actions of the service `sagemaker-mlflow` (named as MLflow's REST operations: Service
# Authorization Reference, "Amazon SageMaker with MLflow"). The jobs (hftrain/tracking) find or create the experiment
# and the run, read its metric history (a resumed attempt) and log; Prepare opens the run (finds or creates it: its
# id travels in the run's state); Finish (lambda/tracking) reads it, logs and ends it (finding or creating it when
# Prepare could not). The names are the Service Authorization Reference's for `sagemaker-mlflow`
# (docs.aws.amazon.com/service-authorization/latest/reference/list_sagemaker-mlflow.html): GetExperimentByName,
# GetRun, GetMetricHistory and SearchRuns are its Read actions, CreateExperiment, CreateRun, LogBatch, UpdateRun
# Write.
JOB_ACTIONS = tuple(f"sagemaker-mlflow:{a}" for a in (
    "GetExperimentByName", "CreateExperiment", "SearchRuns", "CreateRun", "GetRun", "GetMetricHistory", "LogBatch"))
PREPARE_ACTIONS = tuple(f"sagemaker-mlflow:{a}" for a in (
    "GetExperimentByName", "CreateExperiment", "SearchRuns", "CreateRun"))
FINISH_ACTIONS = tuple(f"sagemaker-mlflow:{a}" for a in (
    "GetExperimentByName", "CreateExperiment", "SearchRuns", "CreateRun", "GetRun", "LogBatch", "UpdateRun"))


def logging_statement(arn: str, actions: tuple[str, ...] = JOB_ACTIONS) -> iam.PolicyStatement:
    """What a job (or Finish: FINISH_ACTIONS) calls to log runs, on this one server (SigV4, sagemaker-mlflow)."""
    return iam.PolicyStatement(sid="LogToTrackingServer", actions=list(actions), resources=[arn])
