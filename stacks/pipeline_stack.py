"""Pipeline: SageMaker execution role, code bundle, Lambdas, state machines, S3 trigger, topic, model registry."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnOutput, Duration, RemovalPolicy, Stack, Token
from aws_cdk import aws_budgets as budgets
from aws_cdk import aws_cloudwatch as cloudwatch
from aws_cdk import aws_cloudwatch_actions as cw_actions
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from aws_cdk import aws_sqs as sqs
from constructs import Construct

from hfsm_lambda import s3_layout as layout
from hfsm_lambda.errors import SettingsError
from hfsm_lambda.settings import FsxSettings, Settings
from stacks import names
from stacks.assets import job_wheels
from stacks.assets.code_asset import build_code_bundle
from stacks.assets.image_uris import ImageUris
from stacks.assets.lambda_asset import lambda_code
from stacks.common import removal_policy, retention
from stacks.pipeline_functions import PipelineFunction
from stacks.sagemaker_role import SageMakerExecutionRole
from stacks.settings.environment import EnvironmentConfig
from stacks.state_machines import PipelineStateMachines
from stacks.storage_stack import bucket_name
from stacks.tracking_server import FINISH_ACTIONS, PREPARE_ACTIONS, TrackingServer, logging_statement

REPO = Path(__file__).resolve().parents[1]
# Where dataset uploaders may write in the data bucket (runs/ is for run submitters only).
DATA_UPLOAD_PREFIXES = ("datasets/", "base-models/")


def job_statements(sid: str, verbs: list[str], training_jobs: str, processing_jobs: str) -> list[iam.PolicyStatement]:
    """Training-job actions on training-job ARNs, processing-job actions on processing-job ARNs (no cross pairs)."""
    return [iam.PolicyStatement(sid=f"{sid}{kind}", resources=[arn],
                                actions=[f"sagemaker:{verb}{kind}Job" for verb in verbs])
            for kind, arn in (("Training", training_jobs), ("Processing", processing_jobs))]


def settings_json(stack: Stack, settings: Settings) -> str:
    """The Lambdas' PIPELINE_SETTINGS (lambda/settings.py's `Settings`, the one declaration), serialized. Its
    literal values are checked against the declaration now, so a bad one fails synth rather than every invocation;
    values known only at deploy time (tokens) are type-checked only."""
    raw = settings.to_dict()
    try:
        Settings.from_dict(raw, placeholder=Token.is_unresolved)
    except SettingsError as err:
        raise ValueError(f"PIPELINE_SETTINGS: {'; '.join(err.problems)}") from None
    return stack.to_json_string(raw)


class PipelineStack(Stack):
    def __init__(self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, images: ImageUris,
                 key: kms.IKey, data_bucket: s3.IBucket, artifacts_bucket: s3.IBucket, vpc: ec2.IVpc,
                 training_subnets: list[ec2.ISubnet], training_security_group: ec2.ISecurityGroup,
                 fsx_file_system_id: str | None = None, fsx_mount_name: str | None = None,
                 fsx_subnet: ec2.ISubnet | None = None, **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        self.config = config
        prefix = config.prefix
        part = self.partition
        # Literal ARNs (fixed names): the Lambdas' settings can name the machines that invoke them.
        self.state_machine_arns = [names.state_machine_arn(config, n) for n in names.state_machine_names(config)]
        self.stack_arn_pattern = f"arn:aws:cloudformation:{config.region}:{config.account}:stack/{self.stack_name}/*"

        fsx_arn = (f"arn:{part}:fsx:{self.region}:{self.account}:file-system/{fsx_file_system_id}"
                   if fsx_file_system_id else None)
        # Bucket names are fixed by config: ARNs are literal, so policies name exactly these buckets.
        self.data_bucket_name = bucket_name(config, "data")
        self.artifacts_bucket_name = bucket_name(config, "artifacts")
        self.data_arn = f"arn:{part}:s3:::{self.data_bucket_name}"
        self.artifacts_arn = f"arn:{part}:s3:::{self.artifacts_bucket_name}"
        self.sagemaker_role = SageMakerExecutionRole(
            self, "SageMakerExecution", role_name=names.sagemaker_role_name(config), data_bucket_arn=self.data_arn,
            artifacts_bucket_arn=self.artifacts_arn, key=key, images=images, vpc=vpc, subnets=training_subnets,
            security_groups=[training_security_group], file_system_arn=fsx_arn,
            create_log_groups=not config.manage_sagemaker_log_groups).role
        if config.manage_sagemaker_log_groups:
            self._sagemaker_log_groups(config, key)
        # MLflow (cdk.json `tracking`): the jobs log what they measure, Finish the ledger, verdict and package.
        self.tracking_server = (TrackingServer(self, "Tracking", config=config, artifacts_bucket_arn=self.artifacts_arn,
                                               artifacts_bucket_name=self.artifacts_bucket_name, key=key)
                                if config.tracking.enabled else None)
        if self.tracking_server is not None:
            self.sagemaker_role.add_to_policy(logging_statement(self.tracking_server.arn))

        code_prefix = self._training_code(config, key)

        self.topic = sns.Topic(self, "Notifications", topic_name=names.topic_name(config), master_key=key,
                               enforce_ssl=True, display_name=f"{prefix} training runs")
        for email in config.notification_emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))
        self._alarm_publishers(config)
        self._budget(config)
        # Events a failed trigger or job stopper could not handle: kept 14 days, an alarm on the first one.
        self.failed_events = sqs.Queue(
            self, "FailedEvents", queue_name=f"{prefix}-failed-events", encryption=sqs.QueueEncryption.SQS_MANAGED,
            enforce_ssl=True, retention_period=Duration.days(14))
        alarm = cloudwatch.Alarm(
            self, "FailedEventsAlarm", alarm_name=f"{prefix}-failed-events",
            alarm_description="A run-spec upload, a failed run's job stop or a training-code deployment could not be "
                              "handled: see the queue",
            metric=self.failed_events.metric_approximate_number_of_messages_visible(period=Duration.minutes(5)),
            threshold=1, evaluation_periods=1,
            comparison_operator=cloudwatch.ComparisonOperator.GREATER_THAN_OR_EQUAL_TO_THRESHOLD,
            treat_missing_data=cloudwatch.TreatMissingData.NOT_BREACHING)
        alarm.add_alarm_action(cw_actions.SnsAction(self.topic))
        self._code_deployment_dead_letters()

        group_name = f"{prefix}-models"
        model_group = sagemaker.CfnModelPackageGroup(
            self, "ModelPackageGroup", model_package_group_name=group_name,
            model_package_group_description=f"Models fine-tuned by the {prefix} pipeline")
        model_group.apply_removal_policy(removal_policy(config))

        settings = Settings.build(
            project=config.project, environment=config.name, region=self.region, account=self.account,
            data_bucket=self.data_bucket_name, artifacts_bucket=self.artifacts_bucket_name,
            kms_key_arn=key.key_arn, sagemaker_role_arn=self.sagemaker_role.role_arn,
            training_image_uri=images.training, processing_image_uri=images.processing,
            inference_image_uri=images.inference,
            code_s3_prefix=f"s3://{self.artifacts_bucket_name}/{code_prefix}",
            subnet_ids=tuple(s.subnet_id for s in training_subnets),
            security_group_ids=(training_security_group.security_group_id,),
            fsx=(FsxSettings(file_system_id=fsx_file_system_id, mount_name=fsx_mount_name,
                             subnet_id=fsx_subnet.subnet_id) if fsx_file_system_id and fsx_subnet else None),
            allowed_instance_types=tuple(config.training_instance_types),
            tokenizer_instance_types=tuple(config.processing_instance_types),
            max_instance_count=config.max_instance_count, spot_default=config.spot_default,
            inter_container_encryption=config.inter_container_encryption,
            internet_access=config.nat_gateway,
            default_max_runtime_seconds=config.default_max_runtime_seconds,
            default_max_wait_seconds=min(2 * config.default_max_runtime_seconds, 28 * 86_400),
            poll_seconds=config.poll_seconds, model_package_group=group_name,
            instance_prices=dict(config.instance_prices),
            topic_arn=self.topic.topic_arn,
            # Security and spend (lambda/spec/hyperparameters.py policy, spend.py, request_guard.py).
            remote_code_hub_orgs=tuple(config.remote_code_hub_orgs),
            allowed_report_to=tuple(config.allowed_report_to),
            tracking_uri=self.tracking_server.arn if self.tracking_server else "",
            max_run_cost_usd=config.max_run_cost_usd, max_concurrent_runs=config.max_concurrent_runs,
            state_machine_arns=tuple(self.state_machine_arns),
        )
        environment = {"PIPELINE_SETTINGS": settings_json(self, settings), "LOG_LEVEL": "INFO"}
        functions = self._functions(config, key, group_name, environment)
        self.lambda_constructs = functions
        self.functions = {name: f.function for name, f in functions.items()}

        self.state_machines = PipelineStateMachines(self, "StateMachines", config=config, key=key,
                                                    functions=self.functions)
        self._trigger(config, key, environment)
        self._job_stopper(config)
        self._run_starters(config, key)

        CfnOutput(self, "FineTuneStateMachineArn", value=self.state_machines.fine_tune.state_machine_arn)
        CfnOutput(self, "TokenizerStateMachineArn", value=self.state_machines.tokenizer.state_machine_arn)
        CfnOutput(self, "SageMakerRoleArn", value=self.sagemaker_role.role_arn)
        CfnOutput(self, "NotificationTopicArn", value=self.topic.topic_arn)
        CfnOutput(self, "CodeS3Prefix", value=settings.code_s3_prefix)
        CfnOutput(self, "ModelPackageGroupName", value=group_name)
        CfnOutput(self, "DataBucketName", value=self.data_bucket_name)
        CfnOutput(self, "ArtifactsBucketName", value=self.artifacts_bucket_name)

    # --- Lambdas: each role holds only the calls its handler makes (docs/run_spec.md, "Handlers") ---
    def _functions(self, config: EnvironmentConfig, key: kms.IKey, group_name: str,
                   environment: dict[str, str]) -> dict[str, PipelineFunction]:
        part, region, account, prefix = self.partition, self.region, self.account, config.prefix
        sm = f"arn:{part}:sagemaker:{region}:{account}"
        training_jobs = f"{sm}:training-job/{prefix}-*"
        processing_jobs = f"{sm}:processing-job/{prefix}-*"
        training_logs = f"arn:{part}:logs:{region}:{account}:log-group:/aws/sagemaker/TrainingJobs"
        pass_role = iam.PolicyStatement(
            sid="PassSageMakerRole", actions=["iam:PassRole"], resources=[self.sagemaker_role.role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}})
        # SageMaker creates grants on the project key (for AWS resources only) for the jobs' encrypted volumes.
        job_key = [iam.PolicyStatement(sid="GrantKeyToJobVolumes", resources=[key.key_arn],
                                       actions=["kms:CreateGrant"],
                                       conditions={"Bool": {"kms:GrantIsForAWSResource": "true"}}),
                   iam.PolicyStatement(sid="DescribeProjectKey", resources=[key.key_arn],
                                       actions=["kms:DescribeKey"])]
        use_key = iam.PolicyStatement(sid="UseProjectKey", resources=[key.key_arn],
                                      actions=["kms:Decrypt", "kms:GenerateDataKey"])
        executions = [f"arn:{part}:states:{region}:{account}:execution:{n}:*" for n in names.state_machine_names(config)]
        publish = iam.PolicyStatement(sid="Notify", actions=["sns:Publish"], resources=[self.topic.topic_arn])
        # Finish logs the ledger, verdict and model package ARN to the tracking server (lambda/tracking)
        tracking = [logging_statement(self.tracking_server.arn, FINISH_ACTIONS)] if self.tracking_server else []
        # Prepare opens the run's MLflow run (its id travels in the state to the jobs and Finish)
        open_run = [logging_statement(self.tracking_server.arn, PREPARE_ACTIONS)] if self.tracking_server else []
        list_buckets = iam.PolicyStatement(sid="ListInputs", actions=["s3:ListBucket"],
                                           resources=[self.data_arn, self.artifacts_arn])
        # The durability watchdog (check_job) and the run summary (finish) read the checkpoint markers.
        read_checkpoints = [
            iam.PolicyStatement(sid="ListCheckpoints", actions=["s3:ListBucket"], resources=[self.artifacts_arn],
                                conditions={"StringLike": {"s3:prefix": [f"{layout.CHECKPOINTS_PREFIX}*"]}}),
            iam.PolicyStatement(sid="ReadCheckpointMarkers", actions=["s3:GetObject"],
                                resources=[f"{self.artifacts_arn}/{layout.CHECKPOINTS_PREFIX}*"])]
        specs = {
            "prepare": ("Validate a run spec, apply defaults, pre-flight checks, plan names and URIs", [
                iam.PolicyStatement(sid="ReadSpecs", actions=["s3:GetObject", "s3:GetObjectVersion"],
                                    resources=[f"{self.data_arn}/{layout.RUNS_PREFIX}*"]),
                # the data check reads a bounded sample of each channel (lambda/data/preflight.py): ranged GETs
                iam.PolicyStatement(sid="SampleChannelData", actions=["s3:GetObject"],
                                    resources=[f"{self.data_arn}/*", f"{self.artifacts_arn}/{layout.OUTPUTS_PREFIX}*"]),
                list_buckets,
                iam.PolicyStatement(sid="ReadEncryptedSpecs", resources=[key.key_arn], actions=["kms:Decrypt"]),
                # one execution per run id: claims/<run_id>.json, created with If-None-Match (lambda/runs/claims.py)
                iam.PolicyStatement(sid="ClaimRunIds", actions=["s3:PutObject", "s3:GetObject"],
                                    resources=[f"{self.artifacts_arn}/{layout.CLAIMS_PREFIX}*"]),
                iam.PolicyStatement(sid="EncryptRunIdClaims", resources=[key.key_arn],
                                    actions=["kms:GenerateDataKey"]),
                iam.PolicyStatement(sid="CheckJobNamesAreNew", actions=["sagemaker:DescribeTrainingJob"],
                                    resources=[training_jobs]),
                iam.PolicyStatement(sid="CountRunningRuns", actions=["states:ListExecutions"],
                                    resources=self.state_machine_arns),
                # free IPs per EFA instance (lambda/plan/efa.py); DescribeSubnets takes no resource ARN
                iam.PolicyStatement(sid="CheckEfaSubnetAddresses", actions=["ec2:DescribeSubnets"],
                                    resources=["*"]),
                *open_run]),
            "start_processing": ("Start a tokenizer processing job (map or reduce)", [
                iam.PolicyStatement(sid="StartProcessingJobs", resources=[processing_jobs], actions=[
                    "sagemaker:CreateProcessingJob", "sagemaker:DescribeProcessingJob", "sagemaker:AddTags"]),
                pass_role, *job_key]),
            "start_training": ("Start a training job attempt", [
                iam.PolicyStatement(sid="StartTrainingJobs", resources=[training_jobs], actions=[
                    "sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob", "sagemaker:AddTags"]),
                pass_role, *job_key,
                # what the training code refused moves out of checkpoints/<run_id>/ before the next attempt
                # downloads it (lambda/runs/set_aside.py): listed, copied, then deleted; the copy under refused/
                read_checkpoints[0],
                iam.PolicyStatement(sid="MoveRefusedOutOfCheckpoints", actions=["s3:GetObject", "s3:DeleteObject"],
                                    resources=[f"{self.artifacts_arn}/{layout.CHECKPOINTS_PREFIX}*"]),
                iam.PolicyStatement(sid="WriteRefused", actions=["s3:PutObject"],
                                    resources=[f"{self.artifacts_arn}/{layout.REFUSED_PREFIX}*"]),
                use_key]),
            "check_job": ("Describe a job, classify its state, watch checkpoint durability", [
                *job_statements("DescribeJobs", ["Describe"], training_jobs, processing_jobs),
                iam.PolicyStatement(sid="StopStaleTrainingJobs", actions=["sagemaker:StopTrainingJob"],
                                    resources=[training_jobs]),
                *read_checkpoints, use_key, publish]),
            "plan_fallback": ("Pick the next fallback attempt after a spot timeout or capacity error", []),
            "finish": ("Collect metrics and cost, register the model, notify", [
                *job_statements("DescribeRunJobs", ["Describe"], training_jobs, processing_jobs),
                # CreateModelPackage into a group is authorized on the group and the new version's ARN.
                iam.PolicyStatement(sid="RegisterModel", actions=["sagemaker:CreateModelPackage"],
                                    resources=[f"{sm}:model-package/{group_name}/*",
                                               f"{sm}:model-package-group/{group_name}"]),
                iam.PolicyStatement(sid="TagModel", actions=["sagemaker:AddTags"],
                                    resources=[f"{sm}:model-package/{group_name}/*"]),
                iam.PolicyStatement(sid="WriteRunSummary", actions=["s3:PutObject"],
                                    resources=[f"{self.artifacts_arn}/{layout.OUTPUTS_PREFIX}*"]),
                # The model artifact is copied (pinned to its version) under registry/ before registration.
                # ...the version the job wrote, found among the key's versions by the job's upload window
                iam.PolicyStatement(sid="ListModelVersions", actions=["s3:ListBucketVersions"],
                                    resources=[self.artifacts_arn],
                                    conditions={"StringLike": {"s3:prefix": [f"{layout.MODELS_PREFIX}*"]}}),
                iam.PolicyStatement(sid="ReadModelArtifacts", actions=["s3:GetObject", "s3:GetObjectVersion"],
                                    resources=[f"{self.artifacts_arn}/{layout.MODELS_PREFIX}*"]),
                iam.PolicyStatement(sid="FreezeRegisteredModels", actions=["s3:PutObject"],
                                    resources=[f"{self.artifacts_arn}/{layout.REGISTRY_PREFIX}*"]),
                # The goodput ledger reads each attempt's leader log (lambda/goodput/sources.py): the streams of
                # this project's jobs only (GetLogEvents is granted per stream; DescribeLogStreams lists names).
                iam.PolicyStatement(sid="ListTrainingLogStreams", actions=["logs:DescribeLogStreams"],
                                    resources=[f"{training_logs}:*"]),
                iam.PolicyStatement(sid="ReadTrainingLogs", actions=["logs:GetLogEvents"],
                                    resources=[f"{training_logs}:log-stream:{prefix}-*"]),
                *read_checkpoints, use_key, publish, *tracking]),
            "notify_failure": ("Publish a failed run's error and summary", [
                use_key, publish,
                iam.PolicyStatement(sid="WriteRunSummary", actions=["s3:PutObject"],
                                    resources=[f"{self.artifacts_arn}/{layout.OUTPUTS_PREFIX}*"])]),
        }
        specs["stop_run_jobs"] = ("Stop the SageMaker jobs of a failed, timed-out or aborted run", [
            iam.PolicyStatement(sid="ReadPlannedJobs", actions=["states:GetExecutionHistory"], resources=executions),
            *job_statements("StopRunJobs", ["Describe", "Stop"], training_jobs, processing_jobs)])
        code = lambda_code()
        return {
            name: PipelineFunction(self, "".join(w.title() for w in name.split("_")), config=config,
                                   handler=name, code=code, key=key, environment=environment,
                                   statements=statements, description=description,
                                   on_failure=self.failed_events if name == "stop_run_jobs" else None)
            for name, (description, statements) in specs.items()
        }

    def _trigger(self, config: EnvironmentConfig, key: kms.IKey, environment: dict[str, str]) -> None:
        """runs/*.json uploaded to the data bucket -> trigger Lambda -> StartExecution, named after the object
        version so that a repeated event starts no second run."""
        fine_tune = self.state_machines.fine_tune
        trigger = PipelineFunction(
            self, "Trigger", config=config, handler="trigger", code=lambda_code(), key=key,
            environment={**environment, "STATE_MACHINE_ARN": fine_tune.state_machine_arn},
            statements=[iam.PolicyStatement(sid="StartRuns", actions=["states:StartExecution"],
                                            resources=[fine_tune.state_machine_arn])],
            timeout_s=30, description="Start the fine-tune pipeline for an uploaded run spec",
            on_failure=self.failed_events)
        self.trigger_function = trigger.function
        self.lambda_constructs["trigger"] = trigger
        self.trigger_rule = events.Rule(
            self, "RunSpecUploaded", rule_name=f"{config.prefix}-run-spec-uploaded",
            description="A run spec uploaded under runs/ starts a fine-tuning run",
            event_pattern=events.EventPattern(
                source=["aws.s3"], detail_type=["Object Created"],
                detail={"bucket": {"name": [self.data_bucket_name]},
                        "object": {"key": [{"wildcard": f"{layout.RUNS_PREFIX}*.json"}]}}),
            # Events EventBridge cannot deliver go to the queue too: a run is never silently lost.
            targets=[targets.LambdaFunction(trigger.function, retry_attempts=4, max_event_age=Duration.hours(2),
                                            dead_letter_queue=self.failed_events)])

    def _job_stopper(self, config: EnvironmentConfig) -> None:
        """A failed, timed-out or aborted execution -> stop_run_jobs stops the run's jobs still running."""
        self.job_stopper_rule = events.Rule(
            self, "RunEndedEarly", rule_name=f"{config.prefix}-run-ended-early",
            description="A run's execution failed, timed out or was aborted: stop its SageMaker jobs",
            event_pattern=events.EventPattern(
                source=["aws.states"], detail_type=["Step Functions Execution Status Change"],
                detail={"status": ["FAILED", "TIMED_OUT", "ABORTED"], "stateMachineArn": self.state_machine_arns}),
            targets=[targets.LambdaFunction(self.functions["stop_run_jobs"], retry_attempts=8,
                                            max_event_age=Duration.hours(6), dead_letter_queue=self.failed_events)])

    def _sagemaker_log_groups(self, config: EnvironmentConfig, key: kms.IKey) -> None:
        """SageMaker's job log groups with the project key and the environment's retention (kept on delete:
        every SageMaker job of the account and region logs there)."""
        for lid, group in zip(("TrainingJobLogs", "ProcessingJobLogs"), names.SAGEMAKER_LOG_GROUPS, strict=True):
            logs.LogGroup(self, lid, log_group_name=group, encryption_key=key,
                          retention=retention(config.log_retention_days), removal_policy=RemovalPolicy.RETAIN)

    def _training_code(self, config: EnvironmentConfig, key: kms.IKey) -> str:
        """training_code/ as a content-addressed sourcedir.tar.gz (+ runproc.sh) under code/<sha>/, copied by CDK's
        BucketDeployment with a role of its own that can write code/ only (and nothing else writes code/: the
        artifacts bucket policy denies every other principal)."""
        bundle_dir, code_sha = build_code_bundle(REPO / "training_code", REPO / "build" / "code",
                                                 wheels=job_wheels.wheel_files(job_wheels.wheel_dir()))
        code_prefix = f"{layout.CODE_PREFIX}{code_sha}/"
        asset = s3_assets.Asset(self, "TrainingCodeAsset", path=str(bundle_dir))
        log_group = logs.LogGroup(self, "CodeDeploymentLogs", log_group_name=names.code_deployment_log_group(config),
                                  encryption_key=key, retention=retention(config.log_retention_days),
                                  removal_policy=removal_policy(config))
        role = self.code_deployment_role = iam.Role(
            self, "CodeDeploymentRole", role_name=names.code_deployment_role_name(config),
                        assumed_by=iam.ServicePrincipal("lambda.amazonaws.com"),
                        description="CDK BucketDeployment of the training code: reads its asset, writes code/ only")
        for statement in (
            iam.PolicyStatement(sid="ReadCodeAsset", actions=["s3:GetObject"],
                                resources=[asset.bucket.arn_for_objects(asset.s3_object_key)]),
            iam.PolicyStatement(sid="ListCode", actions=["s3:ListBucket"], resources=[self.artifacts_arn],
                                conditions={"StringLike": {"s3:prefix": [f"{layout.CODE_PREFIX}*"]}}),
            iam.PolicyStatement(sid="WriteCode", actions=["s3:PutObject"],
                                resources=[f"{self.artifacts_arn}/{layout.CODE_PREFIX}*"]),
            iam.PolicyStatement(sid="EncryptCodeWithProjectKey", actions=["kms:GenerateDataKey", "kms:Decrypt"],
                                resources=[key.key_arn]),
            iam.PolicyStatement(sid="WriteOwnLogs", actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                                resources=[log_group.log_group_arn]),
        ):
            role.add_to_policy(statement)
        # CDK's own grants (s3:GetObject*, s3:List*, s3:DeleteObject* on whole buckets) are dropped.
        s3deploy.BucketDeployment(
            self, "TrainingCode", sources=[s3deploy.Source.bucket(asset.bucket, asset.s3_object_key)],
            destination_bucket=s3.Bucket.from_bucket_name(self, "ArtifactsByName", self.artifacts_bucket_name),
            destination_key_prefix=code_prefix, prune=False, retain_on_delete=True,
            server_side_encryption=s3deploy.ServerSideEncryption.AWS_KMS,
            server_side_encryption_aws_kms_key_id=key.key_arn, memory_limit=512,
            role=role.without_policy_updates(add_grants_to_resources=False), log_group=log_group)
        # CDK's provider function sets AWS_CA_BUNDLE: its environment is encrypted with the project key too.
        provider = next(c for c in self.node.children if c.node.id.startswith("Custom::CDKBucketDeployment"))
        provider.node.default_child.add_property_override("KmsKeyArn", key.key_arn)
        return code_prefix

    def _code_deployment_dead_letters(self) -> None:
        """CloudFormation invokes a custom resource's function asynchronously (Lambda developer guide, "Using Lambda
        with CloudFormation"): an event it cannot process goes to the failed-events queue (and its alarm), like the
        trigger's and the job stopper's. Lambda checks the role may send there when the function is created."""
        role = self.code_deployment_role
        role.add_to_policy(iam.PolicyStatement(sid="DeadLetters", actions=["sqs:SendMessage"],
                                               resources=[self.failed_events.queue_arn]))
        provider = next(c for c in self.node.children if c.node.id.startswith("Custom::CDKBucketDeployment"))
        provider.node.default_child.add_property_override("DeadLetterConfig.TargetArn", self.failed_events.queue_arn)
        provider.node.add_dependency(role)

    def _alarm_publishers(self, config: EnvironmentConfig) -> None:
        """The topic takes alarms from this account's CloudWatch alarms and budgets."""
        for service, source in (("cloudwatch.amazonaws.com", f"arn:aws:cloudwatch:{config.region}:{config.account}:alarm:*"),
                                ("budgets.amazonaws.com", f"arn:aws:budgets::{config.account}:*")):
            self.topic.add_to_resource_policy(iam.PolicyStatement(
                sid=f"Publish{service.split('.')[0].title()}Alarms", principals=[iam.ServicePrincipal(service)],
                actions=["sns:Publish"], resources=[self.topic.topic_arn],
                conditions={"StringEquals": {"aws:SourceAccount": config.account},
                            "ArnLike": {"aws:SourceArn": source}}))

    def _budget(self, config: EnvironmentConfig) -> None:
        """A monthly cost budget of the environment's resources (cost allocation tag `project`), alarming to the
        topic at 80% actual and 100% forecasted spend."""
        def note(kind: str, percent: int) -> budgets.CfnBudget.NotificationWithSubscribersProperty:
            return budgets.CfnBudget.NotificationWithSubscribersProperty(
                notification=budgets.CfnBudget.NotificationProperty(
                    notification_type=kind, comparison_operator="GREATER_THAN", threshold=percent,
                    threshold_type="PERCENTAGE"),
                subscribers=[budgets.CfnBudget.SubscriberProperty(subscription_type="SNS",
                                                                  address=self.topic.topic_arn)])
        self.budget = budgets.CfnBudget(
            self, "MonthlyBudget",
            budget=budgets.CfnBudget.BudgetDataProperty(
                budget_name=f"{config.prefix}-monthly", budget_type="COST", time_unit="MONTHLY",
                budget_limit=budgets.CfnBudget.SpendProperty(amount=config.monthly_budget_usd, unit="USD"),
                cost_filters={"TagKeyValue": [f"user:project${config.project}"]}),
            notifications_with_subscribers=[note("ACTUAL", 80), note("FORECASTED", 100)])

    def _run_starters(self, config: EnvironmentConfig, key: kms.IKey) -> None:
        """Two roles a team grants separately (README "Security"): dataset uploaders write data, run submitters
        start runs (upload runs/*.json, StartExecution, runctl). The data bucket's policy lets only run submitters
        write runs/; the account's principals need sts:AssumeRole on a role to use it."""
        sm = f"arn:aws:sagemaker:{config.region}:{config.account}"
        executions = [f"arn:aws:states:{config.region}:{config.account}:execution:{n}:*"
                      for n in names.state_machine_names(config)]
        use_key = iam.PolicyStatement(sid="UseProjectKeyThroughS3", actions=["kms:GenerateDataKey", "kms:Decrypt"],
                                      resources=[key.key_arn])
        self.run_submitter = iam.Role(
            self, "RunSubmitter", role_name=names.run_submitter_role_name(config),
            assumed_by=iam.AccountRootPrincipal(), max_session_duration=Duration.hours(4),
            description=f"{config.prefix}: start, watch and stop training runs (runs/*.json, StartExecution, runctl)")
        for statement in (
            iam.PolicyStatement(sid="UploadRunSpecs", actions=["s3:PutObject", "s3:GetObject"],
                                resources=[f"{self.data_arn}/{layout.RUNS_PREFIX}*"]),
            iam.PolicyStatement(sid="ListRunSpecs", actions=["s3:ListBucket"], resources=[self.data_arn],
                                conditions={"StringLike": {"s3:prefix": [f"{layout.RUNS_PREFIX}*"]}}),
            iam.PolicyStatement(sid="StartRuns", actions=["states:StartExecution", "states:ListExecutions"],
                                resources=self.state_machine_arns),
            iam.PolicyStatement(sid="WatchAndStopRuns", resources=executions, actions=[
                "states:DescribeExecution", "states:GetExecutionHistory", "states:StopExecution"]),
            *job_statements("WatchAndStopJobs", ["Describe", "Stop"], f"{sm}:training-job/{config.prefix}-*",
                            f"{sm}:processing-job/{config.prefix}-*"),
            # The stack id ends in a UUID CloudFormation picks: its ARN is known up to that part only.
            iam.PolicyStatement(sid="FindStateMachines", actions=["cloudformation:DescribeStacks"],
                                resources=[self.stack_arn_pattern]),
            use_key,
        ):
            self.run_submitter.add_to_policy(statement)
        self.dataset_uploader = iam.Role(
            self, "DatasetUploader", role_name=names.dataset_uploader_role_name(config),
            assumed_by=iam.AccountRootPrincipal(), max_session_duration=Duration.hours(12),
            description=f"{config.prefix}: upload datasets and base models (cannot start runs)")
        data_prefixes = [f"{self.data_arn}/{p}*" for p in DATA_UPLOAD_PREFIXES]
        for statement in (
            iam.PolicyStatement(sid="UploadData", actions=["s3:PutObject", "s3:GetObject", "s3:DeleteObject",
                                                           "s3:AbortMultipartUpload"], resources=data_prefixes),
            iam.PolicyStatement(sid="ListData", actions=["s3:ListBucket"], resources=[self.data_arn],
                                conditions={"StringLike": {"s3:prefix": [f"{p}*" for p in DATA_UPLOAD_PREFIXES]}}),
            use_key,
        ):
            self.dataset_uploader.add_to_policy(statement)
