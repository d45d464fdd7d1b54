"""Pipeline: SageMaker execution role, code bundle, Lambdas, state machines, S3 trigger, topic, model registry."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import CfnOutput, Duration, Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_events as events
from aws_cdk import aws_events_targets as targets
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3deploy
from aws_cdk import aws_sagemaker as sagemaker
from aws_cdk import aws_sns as sns
from aws_cdk import aws_sns_subscriptions as subscriptions
from constructs import Construct

from stacks import job_wheels
from stacks.code_asset import build_code_bundle
from stacks.common import removal_policy
from stacks.config import EnvironmentConfig
from stacks.image_uris import ImageUris
from stacks.pipeline_functions import PipelineFunction, lambda_code
from stacks.sagemaker_role import SageMakerExecutionRole
from stacks.state_machines import PipelineStateMachines
from stacks.storage_stack import (
    CHECKPOINTS_PREFIX,
    CODE_PREFIX,
    MODELS_PREFIX,
    OUTPUTS_PREFIX,
    RUNS_PREFIX,
    bucket_name,
)

REPO = Path(__file__).resolve().parents[1]


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

        fsx_arn = (f"arn:{part}:fsx:{self.region}:{self.account}:file-system/{fsx_file_system_id}"
                   if fsx_file_system_id else None)
        # Bucket names are fixed by config: ARNs are literal, so policies name exactly these buckets.
        self.data_bucket_name = bucket_name(config, "data")
        self.artifacts_bucket_name = bucket_name(config, "artifacts")
        self.data_arn = f"arn:{part}:s3:::{self.data_bucket_name}"
        self.artifacts_arn = f"arn:{part}:s3:::{self.artifacts_bucket_name}"
        self.sagemaker_role = SageMakerExecutionRole(
            self, "SageMakerExecution", role_name=f"{prefix}-sagemaker-execution", data_bucket_arn=self.data_arn,
            artifacts_bucket_arn=self.artifacts_arn, key=key, images=images, vpc=vpc, subnets=training_subnets,
            security_groups=[training_security_group], file_system_arn=fsx_arn).role

        # training_code/ as a content-addressed sourcedir.tar.gz (+ runproc.sh) under code/<sha>/.
        bundle_dir, code_sha = build_code_bundle(REPO / "training_code", REPO / "build" / "code",
                                                 wheels=job_wheels.wheel_files(job_wheels.wheel_dir()))
        code_prefix = f"{CODE_PREFIX}{code_sha}/"
        code_deployment = s3deploy.BucketDeployment(
            self, "TrainingCode", sources=[s3deploy.Source.asset(str(bundle_dir))],
            destination_bucket=s3.Bucket.from_bucket_name(self, "ArtifactsByName", self.artifacts_bucket_name),
            destination_key_prefix=code_prefix, prune=False, retain_on_delete=True,
            server_side_encryption=s3deploy.ServerSideEncryption.AWS_KMS,
            server_side_encryption_aws_kms_key_id=key.key_id, memory_limit=512)
        code_deployment.handler_role.add_to_principal_policy(iam.PolicyStatement(
            sid="EncryptCodeWithProjectKey", actions=["kms:GenerateDataKey", "kms:Decrypt"],
            resources=[key.key_arn]))

        self.topic = sns.Topic(self, "Notifications", topic_name=f"{prefix}-runs", master_key=key,
                               enforce_ssl=True, display_name=f"{prefix} training runs")
        for email in config.notification_emails:
            self.topic.add_subscription(subscriptions.EmailSubscription(email))

        group_name = f"{prefix}-models"
        model_group = sagemaker.CfnModelPackageGroup(
            self, "ModelPackageGroup", model_package_group_name=group_name,
            model_package_group_description=f"Models fine-tuned by the {prefix} pipeline")
        model_group.apply_removal_policy(removal_policy(config))

        settings = {
            "project": config.project, "environment": config.name, "region": self.region, "account": self.account,
            "data_bucket": self.data_bucket_name, "artifacts_bucket": self.artifacts_bucket_name,
            "kms_key_arn": key.key_arn, "sagemaker_role_arn": self.sagemaker_role.role_arn,
            "training_image_uri": images.training, "processing_image_uri": images.processing,
            "inference_image_uri": images.inference,
            "code_s3_prefix": f"s3://{self.artifacts_bucket_name}/{code_prefix}",
            "subnet_ids": [s.subnet_id for s in training_subnets],
            "security_group_ids": [training_security_group.security_group_id],
            "fsx": ({"file_system_id": fsx_file_system_id, "mount_name": fsx_mount_name,
                     "subnet_id": fsx_subnet.subnet_id} if fsx_file_system_id and fsx_subnet else None),
            "allowed_instance_types": list(config.training_instance_types),
            "tokenizer_instance_types": list(config.processing_instance_types),
            "max_instance_count": config.max_instance_count, "spot_default": config.spot_default,
            "inter_container_encryption": config.inter_container_encryption,
            "internet_access": config.nat_gateway,
            "default_max_runtime_seconds": config.default_max_runtime_seconds,
            "default_max_wait_seconds": min(2 * config.default_max_runtime_seconds, 28 * 86_400),
            "poll_seconds": config.poll_seconds, "model_package_group": group_name,
            "instance_prices": dict(config.instance_prices),
            "topic_arn": self.topic.topic_arn,
        }
        environment = {"PIPELINE_SETTINGS": self.to_json_string(settings), "LOG_LEVEL": "INFO"}
        functions = self._functions(config, key, group_name, environment)
        self.lambda_constructs = functions
        self.functions = {name: f.function for name, f in functions.items()}

        self.state_machines = PipelineStateMachines(self, "StateMachines", config=config, key=key,
                                                    functions=self.functions)
        self._trigger(config, key, environment)

        CfnOutput(self, "FineTuneStateMachineArn", value=self.state_machines.fine_tune.state_machine_arn)
        CfnOutput(self, "TokenizerStateMachineArn", value=self.state_machines.tokenizer.state_machine_arn)
        CfnOutput(self, "SageMakerRoleArn", value=self.sagemaker_role.role_arn)
        CfnOutput(self, "NotificationTopicArn", value=self.topic.topic_arn)
        CfnOutput(self, "CodeS3Prefix", value=settings["code_s3_prefix"])
        CfnOutput(self, "ModelPackageGroupName", value=group_name)

    # --- Lambdas: each role holds only the calls its handler makes (docs/run_spec.md, "Handlers") ---
    def _functions(self, config: EnvironmentConfig, key: kms.IKey, group_name: str,
                   environment: dict[str, str]) -> dict[str, PipelineFunction]:
        part, region, account, prefix = self.partition, self.region, self.account, config.prefix
        sm = f"arn:{part}:sagemaker:{region}:{account}"
        training_jobs = f"{sm}:training-job/{prefix}-*"
        processing_jobs = f"{sm}:processing-job/{prefix}-*"
        pass_role = iam.PolicyStatement(
            sid="PassSageMakerRole", actions=["iam:PassRole"], resources=[self.sagemaker_role.role_arn],
            conditions={"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}})
        # SageMaker creates grants on the project key for the jobs' encrypted volumes and outputs.
        job_key = iam.PolicyStatement(sid="EncryptJobVolumesAndOutputs", resources=[key.key_arn],
                                      actions=["kms:CreateGrant", "kms:DescribeKey", "kms:GenerateDataKey",
                                               "kms:Decrypt"])
        use_key = iam.PolicyStatement(sid="UseProjectKey", resources=[key.key_arn],
                                      actions=["kms:Decrypt", "kms:GenerateDataKey"])
        publish = iam.PolicyStatement(sid="Notify", actions=["sns:Publish"], resources=[self.topic.topic_arn])
        list_buckets = iam.PolicyStatement(sid="ListInputs", actions=["s3:ListBucket"],
                                           resources=[self.data_arn, self.artifacts_arn])
        # The durability watchdog (check_job) and the run summary (finish) read the checkpoint markers.
        read_checkpoints = [
            iam.PolicyStatement(sid="ListCheckpoints", actions=["s3:ListBucket"], resources=[self.artifacts_arn],
                                conditions={"StringLike": {"s3:prefix": [f"{CHECKPOINTS_PREFIX}*"]}}),
            iam.PolicyStatement(sid="ReadCheckpointMarkers", actions=["s3:GetObject"],
                                resources=[f"{self.artifacts_arn}/{CHECKPOINTS_PREFIX}*"])]
        specs = {
            "prepare": ("Validate a run spec, apply defaults, pre-flight checks, plan names and URIs", [
                iam.PolicyStatement(sid="ReadSpecs", actions=["s3:GetObject", "s3:GetObjectVersion"],
                                    resources=[f"{self.data_arn}/{RUNS_PREFIX}*"]),
                list_buckets, use_key,
                iam.PolicyStatement(sid="CheckJobNamesAreNew", actions=["sagemaker:DescribeTrainingJob"],
                                    resources=[training_jobs]),
                # free IPs per EFA instance (lambda/efa.py); DescribeSubnets takes no resource ARN
                iam.PolicyStatement(sid="CheckEfaSubnetAddresses", actions=["ec2:DescribeSubnets"],
                                    resources=["*"])]),
            "start_processing": ("Start a tokenizer processing job (map or reduce)", [
                iam.PolicyStatement(sid="StartProcessingJobs", resources=[processing_jobs], actions=[
                    "sagemaker:CreateProcessingJob", "sagemaker:DescribeProcessingJob", "sagemaker:AddTags"]),
                pass_role, job_key]),
            "start_training": ("Start a training job attempt", [
                iam.PolicyStatement(sid="StartTrainingJobs", resources=[training_jobs], actions=[
                    "sagemaker:CreateTrainingJob", "sagemaker:DescribeTrainingJob", "sagemaker:AddTags"]),
                pass_role, job_key]),
            "check_job": ("Describe a job, classify its state, watch checkpoint durability", [
                iam.PolicyStatement(sid="DescribeJobs", resources=[training_jobs, processing_jobs], actions=[
                    "sagemaker:DescribeTrainingJob", "sagemaker:DescribeProcessingJob"]),
                iam.PolicyStatement(sid="StopStaleTrainingJobs", actions=["sagemaker:StopTrainingJob"],
                                    resources=[training_jobs]),
                *read_checkpoints, use_key, publish]),
            "plan_fallback": ("Pick the next fallback attempt after a spot timeout or capacity error", []),
            "finish": ("Collect metrics and cost, register the model, notify", [
                iam.PolicyStatement(sid="DescribeRunJobs", resources=[training_jobs, processing_jobs], actions=[
                    "sagemaker:DescribeTrainingJob", "sagemaker:DescribeProcessingJob"]),
                iam.PolicyStatement(sid="RegisterModel", actions=["sagemaker:CreateModelPackage",
                                                                  "sagemaker:AddTags"],
                                    resources=[f"{sm}:model-package/{group_name}/*",
                                               f"{sm}:model-package-group/{group_name}"]),
                iam.PolicyStatement(sid="WriteRunSummary", actions=["s3:PutObject"],
                                    resources=[f"{self.artifacts_arn}/{OUTPUTS_PREFIX}*"]),
                iam.PolicyStatement(sid="ReadModelArtifacts", actions=["s3:GetObject"],
                                    resources=[f"{self.artifacts_arn}/{MODELS_PREFIX}*"]),
                *read_checkpoints, use_key, publish]),
            "notify_failure": ("Publish a failed run's error and summary", [
                use_key, publish,
                iam.PolicyStatement(sid="WriteRunSummary", actions=["s3:PutObject"],
                                    resources=[f"{self.artifacts_arn}/{OUTPUTS_PREFIX}*"])]),
        }
        code = lambda_code()
        return {
            name: PipelineFunction(self, "".join(w.title() for w in name.split("_")), config=config,
                                   handler=name, code=code, key=key, environment=environment,
                                   statements=statements, description=description)
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
            timeout_s=30, description="Start the fine-tune pipeline for an uploaded run spec")
        self.trigger_function = trigger.function
        self.lambda_constructs["trigger"] = trigger
        self.trigger_rule = events.Rule(
            self, "RunSpecUploaded", rule_name=f"{config.prefix}-run-spec-uploaded",
            description="A run spec uploaded under runs/ starts a fine-tuning run",
            event_pattern=events.EventPattern(
                source=["aws.s3"], detail_type=["Object Created"],
                detail={"bucket": {"name": [self.data_bucket_name]},
                        "object": {"key": [{"wildcard": f"{RUNS_PREFIX}*.json"}]}}),
            targets=[targets.LambdaFunction(trigger.function, retry_attempts=4,
                                            max_event_age=Duration.hours(2))])
