"""The pipeline's Lambda functions: one code asset (stacks/assets/lambda_asset.py), one least-privilege role and log group
each."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from hfsm_lambda import HANDLER_MODULE
from stacks import names
from stacks.common import removal_policy, retention
from stacks.settings.environment import EnvironmentConfig

RUNTIME = lambda_.Runtime.PYTHON_3_14


class PipelineFunction(Construct):
    """A Lambda running `handlers.<handler>` with its own role: only the statements it is given, plus its logs.

    Environment variables are encrypted with the project key. An asynchronously invoked function (EventBridge
    target) gets `on_failure`: after Lambda's own retries the failed event goes to that queue, never lost."""

    def __init__(self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, handler: str,
                 code: lambda_.Code, key: kms.IKey, environment: dict[str, str],
                 statements: list[iam.PolicyStatement], timeout_s: int = 60,
                 memory_mb: int = 256, description: str = "", on_failure: sqs.IQueue | None = None) -> None:
        super().__init__(scope, construct_id)
        name = names.function_name(config, handler)
        self.log_group = logs.LogGroup(self, "Logs", log_group_name=names.function_log_group(config, handler),
                                       encryption_key=key, retention=retention(config.log_retention_days),
                                       removal_policy=removal_policy(config))
        # A fixed name: the key policy and bucket policies (storage stack) name this role.
        self.role = iam.Role(self, "Role", assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                             role_name=names.function_role_name(config, handler),
                             description=f"{name}: only the calls {HANDLER_MODULE}.{handler} makes")
        self.role.add_to_policy(iam.PolicyStatement(
            sid="WriteOwnLogs", actions=["logs:CreateLogStream", "logs:PutLogEvents"],
            resources=[self.log_group.log_group_arn]))  # the log group's ARN covers its streams (`:*`)
        for statement in statements:
            self.role.add_to_policy(statement)
        self.function = lambda_.Function(
            self, "Function", function_name=name, runtime=RUNTIME, code=code, handler=f"{HANDLER_MODULE}.{handler}",
            role=self.role, timeout=Duration.seconds(timeout_s), memory_size=memory_mb, environment=environment,
            log_group=self.log_group, tracing=lambda_.Tracing.ACTIVE, description=description,
            architecture=lambda_.Architecture.ARM_64, environment_encryption=key,
        )
        if on_failure is not None:
            self.role.add_to_policy(iam.PolicyStatement(sid="SendFailedEvents", actions=["sqs:SendMessage"],
                                                        resources=[on_failure.queue_arn]))
            # L1: the L2 destination would also grant sqs:GetQueueAttributes/GetQueueUrl, which Lambda never calls.
            invoke_config = lambda_.CfnEventInvokeConfig(
                self, "AsyncInvoke", function_name=self.function.function_name, qualifier="$LATEST",
                maximum_retry_attempts=2, maximum_event_age_in_seconds=6 * 3600,
                destination_config=lambda_.CfnEventInvokeConfig.DestinationConfigProperty(
                    on_failure=lambda_.CfnEventInvokeConfig.OnFailureProperty(destination=on_failure.queue_arn)))
            invoke_config.node.add_dependency(self.role)  # Lambda checks the role may send to the queue

