"""cdk-nag (AwsSolutions) acknowledgements: each names the one finding it covers and why it is accepted.

cdk-nag 3 acknowledges one finding at a time (`Rule[Resource::...]`), so every wildcard a policy holds is listed
here with its reason; a new wildcard fails synth until it is reviewed and added. `ACKNOWLEDGEMENTS` collects
what was applied (for the README and the tests).
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Stack, Validations
from constructs import IConstruct

from stacks.config import EnvironmentConfig

XRAY = ("X-Ray tracing (Lambda tracing ACTIVE / state machine tracing): xray:PutTraceSegments and "
        "xray:PutTelemetryRecords support no resource-level permissions, so AWS requires Resource '*'.")
JOB_NAMES = ("Job names are generated per run and attempt (<project>-<env>-<run>-<stage><n>); the ARN is scoped "
             "to this environment's name prefix, the narrowest pattern that admits new jobs.")

ACKNOWLEDGEMENTS: list[tuple[str, str, str]] = []  # (construct path, finding, reason)


def _ack(construct: IConstruct, finding: str, reason: str) -> None:
    Validations.of(construct).acknowledge(Acknowledgment(id=finding, reason=reason))
    ACKNOWLEDGEMENTS.append((construct.node.path, finding, reason))


def _iam5(construct: IConstruct, resource: str, reason: str) -> None:
    _ack(construct, f"AwsSolutions-IAM5[Resource::{resource}]", reason)


def _logical_id(stack: Stack, construct: IConstruct) -> str:
    return stack.resolve(stack.get_logical_id(construct.node.default_child))


def _policy(construct: IConstruct) -> IConstruct:
    return construct.node.find_child("DefaultPolicy").node.find_child("Resource")


def acknowledge_findings(stack: Stack, config: EnvironmentConfig) -> None:
    # Imported lazily: the pipeline stack module imports nothing from here.
    from stacks.pipeline_stack import PipelineStack

    if isinstance(stack, PipelineStack):
        _pipeline(stack, config)


def _pipeline(stack: Stack, config: EnvironmentConfig) -> None:
    region, account, prefix = config.region, config.account, config.prefix
    data, artifacts = stack.data_arn, stack.artifacts_arn
    sm = f"arn:aws:sagemaker:{region}:{account}"

    role = _policy(stack.sagemaker_role)
    _iam5(role, f"{data}/*", "Jobs read any dataset the user stages in the project's data bucket; the bucket holds "
                             "only this environment's data (no other bucket is readable).")
    for p, what in (("code", "read the content-addressed training code"),
                    ("checkpoints", "read and write spot checkpoints of their run"),
                    ("models", "write model artifacts"), ("outputs", "write processing outputs and metrics")):
        _iam5(role, f"{artifacts}/{p}/*", f"Jobs {what} under the artifacts bucket's {p}/ prefix only.")
    _iam5(role, "*", "ecr:GetAuthorizationToken, cloudwatch:PutMetricData (pinned to the /aws/sagemaker/* "
                     "namespace by condition) and the ec2:Describe* calls SageMaker makes for VPC jobs support no "
                     "resource-level permissions.")
    for kind in ("TrainingJobs", "ProcessingJobs"):
        _iam5(role, f"arn:aws:logs:{region}:{account}:log-group:/aws/sagemaker/{kind}:*",
              f"SageMaker writes one log stream per job instance into /aws/sagemaker/{kind}; streams are "
              "created at run time.")
    _iam5(role, f"arn:aws:ec2:{region}:{account}:network-interface/*",
          "SageMaker creates job ENIs at run time; the statement is pinned to this VPC by an ec2:Vpc condition.")

    for name, fn in stack.lambda_constructs.items():
        extra = (" ec2:DescribeSubnets (Prepare's free-IP check for EFA instances, lambda/efa.py) supports no "
                 "resource-level permissions either.") if name == "prepare" else ""
        _iam5(_policy(fn.role), "*", XRAY + extra)
    fns = stack.lambda_constructs
    _iam5(_policy(fns["prepare"].role), f"{data}/runs/*", "Prepare reads the uploaded run specs under runs/.")
    for name in ("prepare", "start_training", "check_job", "finish"):
        _iam5(_policy(fns[name].role), f"{sm}:training-job/{prefix}-*", JOB_NAMES)
    for name in ("start_processing", "check_job", "finish"):
        _iam5(_policy(fns[name].role), f"{sm}:processing-job/{prefix}-*", JOB_NAMES)
    finish = _policy(fns["finish"].role)
    _iam5(finish, f"{sm}:model-package/{prefix}-models/*",
          "Model package ARNs get a version number at registration; scoped to the project's package group.")
    _iam5(finish, f"{artifacts}/models/*", "Finish reads the model artifact metadata of its run under models/.")
    _iam5(finish, f"{artifacts}/outputs/*", "Finish writes the run summary and metrics under outputs/.")
    _iam5(_policy(fns["notify_failure"].role), f"{artifacts}/outputs/*",
          "A failed run's summary.json is written under outputs/<run_id>/.")
    for name in ("check_job", "finish"):
        _iam5(_policy(fns[name].role), f"{artifacts}/checkpoints/*",
              "Reads the checkpoint completion markers and _history.json under checkpoints/<run_id>/ (read only): "
              "the durability watchdog and the run summary's interruptions.")

    machines = stack.state_machines
    for machine, handlers in ((machines.tokenizer, ("prepare", "start_processing", "check_job", "notify_failure")),
                              (machines.fine_tune, ("prepare", "start_processing", "start_training", "check_job",
                                                    "plan_fallback", "finish", "notify_failure"))):
        policy = _policy(machine.role)
        _iam5(policy, "*", "State machine logging to CloudWatch Logs (logs:CreateLogDelivery and related vended-"
                           "log calls) and X-Ray tracing support no resource-level permissions.")
        for handler in handlers:
            _iam5(policy, f"<{_logical_id(stack, fns[handler].function)}.Arn>:*",
                  "lambda:InvokeFunction on the function's qualified ARNs (versions/aliases) of this project's "
                  "own function, as CDK's LambdaInvoke grants.")
    deployment = next(c for c in stack.node.children if c.node.id.startswith("Custom::CDKBucketDeployment"))
    why = ("CDK's BucketDeployment provider copies the content-addressed training-code bundle into code/<sha>/ at "
           "deploy time; its role and runtime are managed by aws-cdk-lib.")
    _ack(deployment.node.find_child("ServiceRole").node.find_child("Resource"),
         "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
         why + " The managed policy only lets it write its own logs.")
    dpolicy = _policy(deployment.node.find_child("ServiceRole"))
    for action in ("s3:GetBucket*", "s3:GetObject*", "s3:List*", "s3:Abort*", "s3:DeleteObject*",
                   "kms:GenerateDataKey*", "kms:ReEncrypt*"):
        _ack(dpolicy, f"AwsSolutions-IAM5[Action::{action}]", why + " These are CDK's grant action groups, on the "
             "asset bucket and the artifacts bucket's code/ prefix only.")
    _iam5(dpolicy, f"arn:aws:s3:::cdk-hnb659fds-assets-{account}-{region}/*",
          why + " It reads the bundle from the CDK bootstrap asset bucket.")
    _iam5(dpolicy, f"{artifacts}/*", why + " Writes go to the artifacts bucket (keys under code/<sha>/).")
    _ack(deployment.node.find_child("Resource"), "AwsSolutions-L1",
         why + " Its Lambda runtime is pinned by aws-cdk-lib and updated with it.")
