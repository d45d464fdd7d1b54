"""cdk-nag (AwsSolutions) acknowledgements: each names the one finding it covers and why it is accepted.

cdk-nag 3 acknowledges one finding at a time (`Rule[Resource::...]`), so every wildcard a policy holds is listed
here with its reason; a new wildcard fails synth until it is reviewed and added. `ACKNOWLEDGEMENTS` collects
what was applied; tests/infra/test_nag_and_lint.py synthesizes the app without them and fails on an
acknowledgement that matches no finding, and checks each reason's claim against the policy it covers.
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Stack, Validations
from constructs import IConstruct

from contract import run_history
from contract import summary as run_summary
from hfsm_lambda.s3_layout import CHECKPOINTS_PREFIX, REFUSED_PREFIX
from stacks.settings.environment import EnvironmentConfig

XRAY = ("X-Ray tracing (Lambda tracing ACTIVE / state machine tracing): xray:PutTraceSegments and "
        "xray:PutTelemetryRecords support no resource-level permissions, so AWS requires Resource '*'.")
JOB_NAMES = ("Job names are generated per run and attempt (<project>-<env>-<run>-<stage><n>); the ARN is scoped "
             "to this environment's name prefix, the narrowest pattern that admits new jobs.")
EXECUTIONS = ("Execution names are chosen at start (one per run); the ARN is scoped to this environment's two "
              "state machines.")

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
    training_jobs, processing_jobs = f"{sm}:training-job/{prefix}-*", f"{sm}:processing-job/{prefix}-*"
    executions = [f"arn:aws:states:{region}:{account}:execution:{prefix}-{m}:*" for m in ("fine-tune", "tokenizer")]

    role = _policy(stack.sagemaker_role)
    _iam5(role, f"{data}/*", "Jobs read (s3:GetObject/GetObjectVersion only) any object of the project's data "
                             "bucket: the datasets and base models users stage, and the run specs under runs/ (no "
                             "secrets: Prepare refuses tokens as hyperparameters); no other bucket is readable and "
                             "jobs write nothing there.")
    for p, what in (("code", "read the content-addressed training code (read only)"),
                    ("checkpoints", "read and write spot checkpoints (every run's: one shared role; see README "
                                    "Security, residual risks)"),
                    ("models", "read base models and upload model artifacts (get and put, no delete)"),
                    ("outputs", "read the tokenizer stage's outputs and upload them from the processing jobs "
                                "(get and put, no delete)")):
        _iam5(role, f"{artifacts}/{p}/*", f"Jobs {what} under the artifacts bucket's {p}/ prefix only.")
    _iam5(role, f"{artifacts}/tensorboard/*", "Jobs upload (put only, no delete) TensorBoard event files under the "
                                              "artifacts bucket's tensorboard/ prefix (the job's "
                                              "TensorBoardOutputConfig, one prefix per run).")
    if stack.tracking_server is not None:
        server_role = _policy(stack.tracking_server.role)
        _iam5(server_role, f"{artifacts}/mlflow/*", "The MLflow tracking server reads and writes its artifact store, "
                                                    "the artifacts bucket's mlflow/ prefix, and nothing else.")
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
        extra = (" ec2:DescribeSubnets (Prepare's free-IP check for EFA instances, lambda/plan/efa.py) supports no "
                 "resource-level permissions either.") if name == "prepare" else ""
        _iam5(_policy(fn.role), "*", XRAY + extra)
    fns = stack.lambda_constructs
    _iam5(_policy(fns["prepare"].role), f"{data}/runs/*", "Prepare reads the uploaded run specs under runs/.")
    _iam5(_policy(fns["prepare"].role), f"{artifacts}/claims/*",
          "Prepare claims each run id once: claims/<run_id>.json created with If-None-Match, read back only to "
          "recognise its own execution's claim (put and get; the bucket policy lets no one else write or delete).")
    _iam5(_policy(fns["prepare"].role), f"{data}/*", "Prepare's data check reads a bounded sample (ranged GETs of "
                                                     "the first objects) of every channel in the data bucket.")
    _iam5(_policy(fns["prepare"].role), f"{artifacts}/outputs/*", "Prepare's data check reads a bounded sample of "
                                                                  "channels under the artifacts bucket's outputs/.")
    for name in ("prepare", "start_training", "check_job", "finish", "stop_run_jobs"):
        _iam5(_policy(fns[name].role), training_jobs, JOB_NAMES)
    for name in ("start_processing", "check_job", "finish", "stop_run_jobs"):
        _iam5(_policy(fns[name].role), processing_jobs, JOB_NAMES)
    for arn in executions:
        _iam5(_policy(fns["stop_run_jobs"].role), arn,
              "stop_run_jobs reads the failed execution's history (Prepare's planned job names). " + EXECUTIONS)
    finish = _policy(fns["finish"].role)
    _iam5(finish, f"{sm}:model-package/{prefix}-models/*",
          "Model package ARNs get a version number at registration; scoped to the project's package group.")
    _iam5(finish, f"{artifacts}/models/*", "Finish reads (get only) the model artifact its job wrote under "
                                           "models/, to copy it pinned to its version id.")
    _iam5(finish, f"{artifacts}/registry/*", "Finish writes the frozen copy of a registered model under "
                                             "registry/<run_id>/ (put only; the bucket policy lets no one else).")
    _iam5(finish, f"{artifacts}/outputs/*", "Finish writes the run summary and metrics under outputs/<run_id>/.")
    logs = f"arn:aws:logs:{region}:{account}:log-group:/aws/sagemaker/TrainingJobs"
    _iam5(finish, f"{logs}:*", "Finish lists the log stream names of the run's training jobs (the goodput ledger); "
                               "SageMaker creates one stream per instance start, named at run time.")
    _iam5(finish, f"{logs}:log-stream:{prefix}-*", "Finish reads the log streams of this project's training jobs "
                                                   "(the goodput ledger: each attempt's GOODPUT and PROGRESS lines).")
    _iam5(_policy(fns["notify_failure"].role), f"{artifacts}/outputs/*",
          f"A failed run's {run_summary.FILE_NAME} is written under outputs/<run_id>/, the key derived from the run id Prepare "
          "planned and notify_failure validates (the failure branch never receives the caller's input).")
    start = _policy(fns["start_training"].role)
    _iam5(start, f"{artifacts}/{CHECKPOINTS_PREFIX}*",
          "StartTraining moves what the training code refused (checkpoint-<step>.unverified-<k>/, _tokenized/"
          "<name>.refused-<k>/) out of checkpoints/<run_id>/ before the next attempt downloads it: get, then delete "
          "after its copy succeeded (lambda/runs/set_aside.py); run ids are made at run time.")
    _iam5(start, f"{artifacts}/{REFUSED_PREFIX}*",
          "StartTraining writes the copies of the refused directories under refused/<run_id>/ (put only).")
    for name in ("check_job", "finish"):
        _iam5(_policy(fns[name].role), f"{artifacts}/{CHECKPOINTS_PREFIX}*",
              f"Reads the checkpoint completion markers and {run_history.HISTORY_FILE} under checkpoints/<run_id>/ "
              "(read only): "
              "the durability watchdog and the run summary's interruptions.")

    for machine, handlers in stack.state_machines.invocations:
        policy = _policy(machine.role)
        _iam5(policy, "*", "State machine logging to CloudWatch Logs (logs:CreateLogDelivery and related vended-"
                           "log calls) and X-Ray tracing support no resource-level permissions.")
        for handler in handlers:
            _iam5(policy, f"<{_logical_id(stack, fns[handler].function)}.Arn>:*",
                  "lambda:InvokeFunction on the function's qualified ARNs (versions/aliases) of this project's "
                  "own function, as CDK's LambdaInvoke grants.")

    submitter = _policy(stack.run_submitter)
    _iam5(submitter, f"{data}/runs/*", "Run submitters upload and read run specs under runs/ only; the data "
                                       "bucket's policy denies runs/ writes to everyone else.")
    _iam5(submitter, training_jobs, "runctl status/stop describe and stop this environment's training jobs (stop: "
          "the ones Prepare planned for the run). "
          + JOB_NAMES)
    _iam5(submitter, processing_jobs, "runctl status/stop describe and stop this environment's processing jobs. "
          + JOB_NAMES)
    for arn in executions:
        _iam5(submitter, arn, "runctl status/stop read and stop a run's execution. " + EXECUTIONS)
    _iam5(submitter, stack.stack_arn_pattern, "runctl finds the state machine in this pipeline stack's outputs; "
                                              "a stack ARN ends in a UUID chosen at creation.")
    uploader = _policy(stack.dataset_uploader)
    for p in ("datasets", "base-models"):
        _iam5(uploader, f"{data}/{p}/*", f"Dataset uploaders write their data under {p}/ of the data bucket only "
                                         "(never runs/: they cannot start runs).")

    deployment_role = _policy(stack.node.find_child("CodeDeploymentRole"))
    _iam5(deployment_role, f"{artifacts}/code/*",
          "CDK's BucketDeployment copies the content-addressed training-code bundle to code/<sha>/ (put only) with "
          "this dedicated role; CDK's own broader grants are dropped (without_policy_updates).")
    deployment = next(c for c in stack.node.children if c.node.id.startswith("Custom::CDKBucketDeployment"))
    _ack(deployment.node.find_child("Resource"), "AwsSolutions-L1",
         "CDK's BucketDeployment provider function: its Lambda runtime is pinned by aws-cdk-lib and updated with it.")
    _ack(stack.failed_events.node.default_child, "AwsSolutions-SQS3",
         "This queue is itself the dead-letter queue (trigger and stop_run_jobs on-failure destination, their "
         "EventBridge targets' DLQ, CDK's code-deployment function's DLQ); an alarm publishes to the topic on its "
         "first message.")
