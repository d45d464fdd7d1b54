"""The calls each principal of the environment makes, with the evidence for each: the reference a grant is
checked against (tests/stacks/test_policy_walk.py).

Evidence kinds:
  `code:<module>.<method>`  the Lambda asset calls boto3 `<method>` in lambda/<module path>.py (checked: the call is
                            in the source), or `runctl:<method>` in runctl/ or pipeline_runs/ (what runctl reads
                            a run with) for the run-submitter role;
  `sdk:<text>`             a call made for the principal by an AWS service or library (SageMaker for its jobs,
                            S3 SSE-KMS, Lambda's runtime, CDK's providers), with the public source that says so.
Resources are fnmatch patterns over testkit/policy_walk.normalize output, with {data}, {arts} (bucket ARNs),
{sm} (arn:aws:sagemaker:<region>:<account>), {states}, {logs}, {prefix}, {region}, {account} substituted.
"""

from __future__ import annotations

from typing import Any

KEY = "import:*Key*Arn*"
XRAY = [("xray:PutTraceSegments", "*", "sdk:Lambda tracing ACTIVE sends segments (Lambda developer guide, X-Ray)"),
        ("xray:PutTelemetryRecords", "*", "sdk:Lambda tracing ACTIVE sends telemetry (Lambda developer guide)")]


def own_logs(stem: str) -> list[tuple[str, str, str]]:
    why = "sdk:the Lambda runtime writes the function's log streams (Lambda developer guide, execution role)"
    return [("logs:CreateLogStream", f"ref:{stem}", why), ("logs:PutLogEvents", f"ref:{stem}", why)]


def lambda_role(handler: str, stem: str, calls: list[tuple[str, str, str]]) -> list[tuple[str, str, str]]:
    return [*own_logs(f"{stem}Logs"), *XRAY, *calls]


S3_KMS = "sdk:SSE-KMS objects: S3 calls kms:{} for the caller (S3 user guide, UsingKMSEncryption)"
SNS_KMS = "sdk:SNS with a KMS key: the publisher needs kms:GenerateDataKey and kms:Decrypt (SNS developer guide, SSE)"
STATE_MACHINE_LOGS = "sdk:CDK's state machine logging grant (vended log delivery; Step Functions developer guide, CW Logs)"
STATE_MACHINE_XRAY = "sdk:CDK's state machine tracing grant (Step Functions developer guide, X-Ray)"


def state_machine_role(functions: list[str]) -> list[tuple[str, str, str]]:
    calls: list[tuple[str, str, str]] = []
    for fn in functions:
        why = "sdk:the LambdaInvoke task invokes the function (CDK's grant covers its versions: `:*`)"
        calls += [("lambda:InvokeFunction", f"ref:{fn}Function", why),
                  ("lambda:InvokeFunction", f"ref:{fn}Function:*", why)]
    calls += [(a, "*", STATE_MACHINE_LOGS) for a in (
        "logs:CreateLogDelivery", "logs:DeleteLogDelivery", "logs:DescribeLogGroups", "logs:DescribeResourcePolicies",
        "logs:GetLogDelivery", "logs:ListLogDeliveries", "logs:PutResourcePolicy", "logs:UpdateLogDelivery")]
    calls += [(a, "*", STATE_MACHINE_XRAY) for a in ("xray:GetSamplingRules", "xray:GetSamplingTargets",
                                                      "xray:PutTelemetryRecords", "xray:PutTraceSegments")]
    return calls


SM_JOB = "sdk:SageMaker, for the job it runs as this role (SageMaker developer guide, CreateTrainingJob execution role)"


MLFLOW_SERVER = "{sm}:mlflow-tracking-server/{prefix}-mlflow"
MLFLOW_STORE = "sdk:the MLflow tracking server's artifact store (CreateMlflowTrackingServer RoleArn, ArtifactStoreUri)"


def principal_calls(fsx: bool, create_sagemaker_log_groups: bool,
                    tracking: bool = False) -> dict[str, list[tuple[str, str, str]]]:
    tj, pj = "{sm}:training-job/{prefix}-*", "{sm}:processing-job/{prefix}-*"
    sagemaker = [
        ("s3:GetObject", "{data}/*", SM_JOB + ": input channels and base models"),
        ("s3:GetObjectVersion", "{data}/*", SM_JOB + ": versioned input objects"),
        ("s3:ListBucket", "{data}", SM_JOB + ": S3Prefix channels are listed"),
        ("s3:ListBucket", "{arts}", SM_JOB + ": code, tokenizer and checkpoint prefixes are listed"),
        *[(a, "{arts}/" + p + "/*", SM_JOB + f": {p}/ is read") for p in ("code", "checkpoints", "models", "outputs")
          for a in ("s3:GetObject", "s3:GetObjectVersion")],
        ("s3:PutObject", "{arts}/checkpoints/*", SM_JOB + ": checkpoint sync uploads"),
        ("s3:DeleteObject", "{arts}/checkpoints/*", SM_JOB + ": checkpoint sync mirrors local deletions"),
        ("s3:AbortMultipartUpload", "{arts}/checkpoints/*", SM_JOB + ": large checkpoint uploads"),
        ("s3:PutObject", "{arts}/models/*", SM_JOB + ": model.tar.gz / output.tar.gz upload"),
        ("s3:AbortMultipartUpload", "{arts}/models/*", SM_JOB + ": large model uploads"),
        ("s3:PutObject", "{arts}/outputs/*", SM_JOB + ": processing outputs upload"),
        ("s3:AbortMultipartUpload", "{arts}/outputs/*", SM_JOB + ": large processing outputs"),
        ("s3:PutObject", "{arts}/tensorboard/*", SM_JOB + ": TensorBoardOutputConfig uploads the event files"),
        ("s3:AbortMultipartUpload", "{arts}/tensorboard/*", SM_JOB + ": large TensorBoard event files"),
        ("kms:Decrypt", KEY, SM_JOB + ": SSE-KMS inputs"),
        ("kms:Encrypt", KEY, "sdk:OutputDataConfig.KmsKeyId: 'the SageMaker execution role must include permissions "
                             "to call kms:Encrypt' (API_OutputDataConfig)"),
        ("kms:GenerateDataKey", KEY, SM_JOB + ": SSE-KMS uploads"),
        ("kms:DescribeKey", KEY, SM_JOB + ": key validation"),
        ("kms:CreateGrant", KEY, SM_JOB + ": encrypted ML storage volumes (VolumeKmsKeyId)"),
        ("ecr:BatchGetImage", "arn:aws:ecr:{region}:*:repository/*", SM_JOB + ": pull the DLC image"),
        ("ecr:GetDownloadUrlForLayer", "arn:aws:ecr:{region}:*:repository/*", SM_JOB + ": pull the DLC image"),
        ("ecr:BatchCheckLayerAvailability", "arn:aws:ecr:{region}:*:repository/*", SM_JOB + ": pull the DLC image"),
        ("ecr:GetAuthorizationToken", "*", SM_JOB + ": registry login"),
        *[(a, "{logs}:log-group:/aws/sagemaker/" + g + ":*", SM_JOB + ": job logs")
          for g in ("TrainingJobs", "ProcessingJobs")
          for a in ("logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams")],
        ("cloudwatch:PutMetricData", "*", SM_JOB + ": MetricDefinitions / EnableSageMakerMetricsTimeSeries"),
        *[(a, "*", SM_JOB + ": VPC jobs (SageMaker developer guide, VPC)") for a in (
            "ec2:DescribeNetworkInterfaces", "ec2:DescribeVpcs", "ec2:DescribeDhcpOptions", "ec2:DescribeSubnets",
            "ec2:DescribeSecurityGroups")],
        *[(a, "arn:aws:ec2:{region}:{account}:network-interface/*", SM_JOB + ": job ENIs") for a in (
            "ec2:CreateNetworkInterface", "ec2:CreateNetworkInterfacePermission", "ec2:DeleteNetworkInterface",
            "ec2:DeleteNetworkInterfacePermission")],
        ("ec2:CreateNetworkInterface", "arn:aws:ec2:{region}:{account}:subnet/*", SM_JOB + ": ENIs in the subnets"),
        ("ec2:CreateNetworkInterface", "arn:aws:ec2:{region}:{account}:security-group/*",
         SM_JOB + ": ENIs in the training security group"),
    ]
    if tracking:  # hftrain/tracking: MlflowClient through the sagemaker-mlflow plugin (SigV4)
        sagemaker += [(f"sagemaker-mlflow:{a}", MLFLOW_SERVER, "sdk:the training code's MLflow client "
                       f"(hftrain/tracking/worker.py) calls {a} on the tracking server")
                      for a in ("GetExperimentByName", "CreateExperiment", "SearchRuns", "CreateRun", "GetRun",
                                "GetMetricHistory", "LogBatch")]
    if fsx:
        sagemaker.append(("fsx:DescribeFileSystems", "arn:aws:fsx:{region}:{account}:file-system/*",
                          SM_JOB + ": FSx for Lustre channels"))
    if create_sagemaker_log_groups:
        sagemaker += [("logs:CreateLogGroup", "{logs}:log-group:/aws/sagemaker/" + g + ":*", SM_JOB + ": job logs")
                      for g in ("TrainingJobs", "ProcessingJobs")]
    # The durability watchdog (check_job) and the run summary (finish) read checkpoint markers and _history.json.
    read_checkpoints = [("s3:ListBucket", "{arts}", "code:watch.durability.get_paginator"),
                        ("s3:GetObject", "{arts}/checkpoints/*", "code:bounded_reads.get_object")]  # watch/durability.py reads through it
    pass_role = ("iam:PassRole", "ref:SageMakerExecutionRole", "sdk:CreateTrainingJob/CreateProcessingJob pass RoleArn")
    grant = ("kms:CreateGrant", KEY, "sdk:SageMaker creates the volume grant with the caller's credentials "
                                     "(VolumeKmsKeyId)")
    describe_key = ("kms:DescribeKey", KEY, "sdk:SageMaker validates the KMS keys of the request as the caller")
    mlflow_server = [
        *[(a, "{arts}/mlflow/*", MLFLOW_STORE) for a in ("s3:GetObject", "s3:PutObject", "s3:DeleteObject",
                                                          "s3:AbortMultipartUpload")],
        ("s3:ListBucket", "{arts}", MLFLOW_STORE + ": artifacts are listed under mlflow/"),
        ("s3:GetBucketLocation", "{arts}", MLFLOW_STORE + ": the bucket's region"),
        ("kms:Decrypt", KEY, MLFLOW_STORE + ": SSE-KMS objects"),
        ("kms:GenerateDataKey", KEY, MLFLOW_STORE + ": SSE-KMS uploads"),
    ]
    return {
        **({"{prefix}-mlflow-server": mlflow_server} if tracking else {}),
        "{prefix}-sagemaker-execution": sagemaker,
        "{prefix}-fn-trigger": lambda_role("trigger", "Trigger", [
            ("states:StartExecution", "ref:StateMachinesFineTune", "code:handlers.start_execution"),
            ("sqs:SendMessage", "ref:FailedEvents", "sdk:Lambda on-failure destination (async invocation)")]),
        "{prefix}-fn-prepare": lambda_role("prepare", "Prepare", [
            ("s3:GetObject", "{data}/runs/*", "code:handlers.get_object"),
            ("s3:GetObjectVersion", "{data}/runs/*", "code:handlers.get_object"),
            ("s3:GetObject", "{data}/*", "code:data.preflight.get_object"),
            ("s3:GetObject", "{data}/*", "code:plan.preflight.head_object"),
            ("s3:GetObject", "{arts}/outputs/*", "code:data.preflight.get_object"),
            ("s3:ListBucket", "{data}", "code:plan.preflight.get_paginator"),
            ("s3:ListBucket", "{arts}", "code:plan.preflight.get_paginator"),
            ("kms:Decrypt", KEY, S3_KMS.format("Decrypt") + ": the spec object"),
            ("s3:PutObject", "{arts}/claims/*", "code:runs.claims.put_object"),
            ("s3:GetObject", "{arts}/claims/*", "code:bounded_reads.get_object"),  # runs/claims.py reads through it
            ("kms:GenerateDataKey", KEY, S3_KMS.format("GenerateDataKey") + ": the run id claim"),
            ("sagemaker:DescribeTrainingJob", tj, "code:plan.preflight.describe_training_job"),
            ("states:ListExecutions", "{states}:stateMachine:{prefix}-fine-tune", "code:plan.spend.get_paginator"),
            ("states:ListExecutions", "{states}:stateMachine:{prefix}-tokenizer", "code:plan.spend.get_paginator"),
            ("ec2:DescribeSubnets", "*", "code:plan.preflight.describe_subnets"),
            # handlers._open_tracking: the run's MLflow run, found or created (tracking/record.find_or_create_run)
            *([(f"sagemaker-mlflow:{a}", MLFLOW_SERVER, "code:tracking.record.call") for a in (
                "GetExperimentByName", "CreateExperiment", "SearchRuns", "CreateRun")] if tracking else [])]),
        "{prefix}-fn-start-processing": lambda_role("start_processing", "StartProcessing", [
            ("sagemaker:CreateProcessingJob", pj, "code:handlers.create_processing_job"),
            ("sagemaker:DescribeProcessingJob", pj, "code:handlers.describe_processing_job"),
            ("sagemaker:AddTags", pj, "sdk:CreateProcessingJob with Tags needs sagemaker:AddTags"),
            pass_role, grant, describe_key]),
        "{prefix}-fn-start-training": lambda_role("start_training", "StartTraining", [
            ("sagemaker:CreateTrainingJob", tj, "code:handlers.create_training_job"),
            ("sagemaker:DescribeTrainingJob", tj, "code:handlers.describe_training_job"),
            ("sagemaker:AddTags", tj, "sdk:CreateTrainingJob with Tags needs sagemaker:AddTags"),
            pass_role, grant, describe_key,
            # what the training code refused, moved out of the checkpoint prefix (runs/set_aside.py)
            ("s3:ListBucket", "{arts}", "code:runs.set_aside.get_paginator"),
            ("s3:GetObject", "{arts}/checkpoints/*", "code:runs.set_aside.copy"),
            ("s3:DeleteObject", "{arts}/checkpoints/*", "code:runs.set_aside.delete_object"),
            ("s3:PutObject", "{arts}/refused/*", "code:runs.set_aside.copy"),
            ("kms:Decrypt", KEY, S3_KMS.format("Decrypt") + " (copy source)"),
            ("kms:GenerateDataKey", KEY, S3_KMS.format("GenerateDataKey") + " (the copy)")]),
        "{prefix}-fn-check-job": lambda_role("check_job", "CheckJob", [
            ("sagemaker:DescribeTrainingJob", tj, "code:handlers.describe_training_job"),
            ("sagemaker:DescribeProcessingJob", pj, "code:handlers.describe_processing_job"),
            ("sagemaker:StopTrainingJob", tj, "code:handlers.stop_training_job"),
            *read_checkpoints,
            ("kms:Decrypt", KEY, S3_KMS.format("Decrypt") + " (checkpoint markers); " + SNS_KMS),
            ("kms:GenerateDataKey", KEY, SNS_KMS + " (durability warnings)"),
            ("sns:Publish", "ref:Notifications", "code:handlers.publish")]),
        "{prefix}-fn-plan-fallback": lambda_role("plan_fallback", "PlanFallback", []),
        "{prefix}-fn-finish": lambda_role("finish", "Finish", [
            ("sagemaker:DescribeTrainingJob", tj, "code:handlers.describe_training_job"),
            ("sagemaker:DescribeProcessingJob", pj, "code:handlers.describe_processing_job"),
            ("sagemaker:CreateModelPackage", "{sm}:model-package/{prefix}-models/*", "code:handlers.create_model_package"),
            ("sagemaker:CreateModelPackage", "{sm}:model-package-group/{prefix}-models",
             "code:handlers.create_model_package"),
            ("sagemaker:AddTags", "{sm}:model-package/{prefix}-models/*", "sdk:CreateModelPackage with Tags"),
            ("s3:PutObject", "{arts}/outputs/*", "code:handlers.put_object"),
            ("s3:ListBucketVersions", "{arts}", "code:runs.registry.get_paginator"),
            ("s3:GetObject", "{arts}/models/*", "code:runs.registry.head_object"),
            ("s3:GetObjectVersion", "{arts}/models/*", "code:runs.registry.copy"),
            ("s3:PutObject", "{arts}/registry/*", "code:runs.registry.copy"),
            ("kms:Decrypt", KEY, S3_KMS.format("Decrypt") + " (copy source); " + SNS_KMS),
            ("kms:GenerateDataKey", KEY, S3_KMS.format("GenerateDataKey") + "; " + SNS_KMS),
            ("sns:Publish", "ref:Notifications", "code:handlers.publish"),
            ("logs:DescribeLogStreams", "{logs}:log-group:/aws/sagemaker/TrainingJobs:*",
             "code:goodput.sources.get_paginator"),
            ("logs:GetLogEvents", "{logs}:log-group:/aws/sagemaker/TrainingJobs:log-stream:{prefix}-*",
             "code:bounded_reads.get_log_events"),  # goodput/sources.py reads through it
            *read_checkpoints,
            *([(f"sagemaker-mlflow:{a}", MLFLOW_SERVER, "code:tracking.record.call") for a in (
                "GetExperimentByName", "CreateExperiment", "SearchRuns", "CreateRun", "GetRun", "LogBatch",
                "UpdateRun")] if tracking else [])]),
        "{prefix}-fn-notify-failure": lambda_role("notify_failure", "NotifyFailure", [
            ("s3:PutObject", "{arts}/outputs/*", "code:handlers.put_object"),
            ("kms:Decrypt", KEY, SNS_KMS),
            ("kms:GenerateDataKey", KEY, S3_KMS.format("GenerateDataKey") + "; " + SNS_KMS),
            ("sns:Publish", "ref:Notifications", "code:handlers.publish")]),
        "{prefix}-fn-stop-run-jobs": lambda_role("stop_run_jobs", "StopRunJobs", [
            ("states:GetExecutionHistory", "{states}:execution:{prefix}-fine-tune:*", "code:watch.orphans.get_execution_history"),
            ("states:GetExecutionHistory", "{states}:execution:{prefix}-tokenizer:*", "code:watch.orphans.get_execution_history"),
            ("sagemaker:DescribeTrainingJob", tj, "code:watch.orphans.describe_training_job"),
            ("sagemaker:StopTrainingJob", tj, "code:watch.orphans.stop_training_job"),
            ("sagemaker:DescribeProcessingJob", pj, "code:watch.orphans.describe_processing_job"),
            ("sagemaker:StopProcessingJob", pj, "code:watch.orphans.stop_processing_job"),
            ("sqs:SendMessage", "ref:FailedEvents", "sdk:Lambda on-failure destination (async invocation)")]),
        "{prefix}-run-submitter": [
            ("s3:PutObject", "{data}/runs/*", "sdk:aws s3 cp spec.json s3://<data>/runs/ (README, starting a run)"),
            ("s3:GetObject", "{data}/runs/*", "sdk:aws s3 cp / ls of the uploaded specs"),
            ("s3:ListBucket", "{data}", "sdk:aws s3 ls s3://<data>/runs/"),
            ("kms:GenerateDataKey", KEY, S3_KMS.format("GenerateDataKey") + ": uploading a spec"),
            ("kms:Decrypt", KEY, S3_KMS.format("Decrypt") + ": reading a spec"),
            *[("states:StartExecution", "{states}:stateMachine:{prefix}-" + m + "", "runctl:start_execution")
              for m in ("fine-tune", "tokenizer")],
            *[("states:ListExecutions", "{states}:stateMachine:{prefix}-" + m + "", "sdk:console / aws stepfunctions "
               "list-executions") for m in ("fine-tune", "tokenizer")],
            *[(a, "{states}:execution:{prefix}-" + m + ":*", "runctl:" + method) for m in ("fine-tune", "tokenizer")
              for a, method in (("states:DescribeExecution", "describe_execution"),
                                ("states:GetExecutionHistory", "get_execution_history"),
                                ("states:StopExecution", "stop_execution"))],
            ("sagemaker:DescribeTrainingJob", tj, "runctl:describe_training_job"),
            # runctl stop stops the jobs Prepare planned, through the job stopper's own code (lambda/watch/orphans.py)
            ("sagemaker:StopTrainingJob", tj, "code:watch.orphans.stop_training_job"),
            ("sagemaker:DescribeProcessingJob", pj, "runctl:describe_processing_job"),
            ("sagemaker:StopProcessingJob", pj, "code:watch.orphans.stop_processing_job"),
            ("cloudformation:DescribeStacks", "arn:aws:cloudformation:{region}:{account}:stack/{prefix}-pipeline/*",
             "runctl:describe_stacks")],
        "{prefix}-dataset-uploader": [
            *[(a, "{data}/" + p + "/*", "sdk:aws s3 cp/sync/rm of datasets and base models (README, uploading data)")
              for p in ("datasets", "base-models")
              for a in ("s3:PutObject", "s3:GetObject", "s3:DeleteObject", "s3:AbortMultipartUpload")],
            ("s3:ListBucket", "{data}", "sdk:aws s3 ls/sync of the data prefixes"),
            ("kms:GenerateDataKey", KEY, S3_KMS.format("GenerateDataKey") + ": uploads"),
            ("kms:Decrypt", KEY, S3_KMS.format("Decrypt") + ": downloads and multipart uploads")],
        "{prefix}-code-deployment": [
            ("s3:GetObject", "arn:aws:s3:::cdk-*-assets-{account}-{region}/*.zip",
             "sdk:CDK BucketDeployment provider downloads the source asset (aws-cdk-lib s3-deployment handler)"),
            ("s3:ListBucket", "{arts}", "sdk:the provider runs `aws s3 sync` into code/<sha>/"),
            ("s3:PutObject", "{arts}/code/*", "sdk:the provider's `aws s3 sync` uploads"),
            ("kms:GenerateDataKey", KEY, S3_KMS.format("GenerateDataKey") + ": SSE-KMS uploads"),
            ("kms:Decrypt", KEY, S3_KMS.format("Decrypt") + ": multipart uploads"),
            ("sqs:SendMessage", "ref:FailedEvents", "sdk:Lambda dead-letter queue of the asynchronously invoked "
             "custom-resource function (Lambda developer guide, asynchronous invocation)"),
            *own_logs("CodeDeploymentLogs")],
        "StateMachinesFineTuneRole": state_machine_role(
            ["Prepare", "StartProcessing", "StartTraining", "CheckJob", "PlanFallback", "Finish", "NotifyFailure"]),
        "StateMachinesTokenizerRole": state_machine_role(["Prepare", "StartProcessing", "CheckJob", "NotifyFailure"]),
        "VpcFlowLogsIAMRole": [
            (a, "ref:FlowLogGroup", "sdk:VPC flow logs deliver to CloudWatch Logs as this role (VPC user guide)")
            for a in ("logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams")],
    }


def substitutions(config: Any) -> dict[str, str]:
    base = f"{config.prefix}-{{}}-{config.account}-{config.region}"
    return {"{data}": f"arn:aws:s3:::{base.format('data')}", "{arts}": f"arn:aws:s3:::{base.format('artifacts')}",
            "{sm}": f"arn:aws:sagemaker:{config.region}:{config.account}",
            "{states}": f"arn:aws:states:{config.region}:{config.account}",
            "{logs}": f"arn:aws:logs:{config.region}:{config.account}",
            "{prefix}": config.prefix, "{region}": config.region, "{account}": config.account}


def expand(text: str, subs: dict[str, str]) -> str:
    for key, value in subs.items():
        text = text.replace(key, value)
    return text
