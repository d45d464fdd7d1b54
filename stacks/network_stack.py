"""Network: an EFA-ready VPC for training jobs, VPC endpoints, flow logs and an FSx for Lustre file system."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_fsx as fsx
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_logs as logs
from constructs import Construct

from stacks import names
from stacks.common import removal_policy, retention
from stacks.settings.environment import FSX_DRA_TYPES, EnvironmentConfig
from stacks.storage_stack import bucket_name
from stacks.tracking_server import JOB_ACTIONS

# Interface endpoints a training job in a private subnet needs (SageMaker Developer Guide, "Give SageMaker
# training jobs access to resources in your Amazon VPC").
INTERFACE_ENDPOINTS = {
    "SageMakerApi": ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_API,
    "SageMakerRuntime": ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_RUNTIME,
    "Sts": ec2.InterfaceVpcEndpointAwsService.STS,
    "Logs": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_LOGS,
    "Monitoring": ec2.InterfaceVpcEndpointAwsService.CLOUDWATCH_MONITORING,
    "EcrApi": ec2.InterfaceVpcEndpointAwsService.ECR,
    "EcrDkr": ec2.InterfaceVpcEndpointAwsService.ECR_DOCKER,
}
LUSTRE_PORTS = (ec2.Port.tcp(988), ec2.Port.tcp_range(1018, 1023))
# Hosts a job reaches through the NAT gateway (prod): the Hugging Face Hub and its CDNs for Hub models, tokenizers
# and datasets. Security groups filter addresses, not names: see README "Security" for the residual risk.
NAT_HOSTS = "huggingface.co, cdn-lfs.huggingface.co, cdn-lfs-us-1.hf.co, cas-bridge.xethub.hf.co"
# S3 actions jobs and SageMaker make on the project's buckets through the gateway endpoint.
S3_ENDPOINT_ACTIONS = ["s3:GetObject", "s3:GetObjectVersion", "s3:PutObject", "s3:DeleteObject",
                       "s3:AbortMultipartUpload", "s3:ListMultipartUploadParts", "s3:ListBucket",
                       "s3:ListBucketMultipartUploads", "s3:GetBucketLocation"]


class NetworkStack(Stack):
    """Exposes `vpc`, `training_subnets`, `training_security_group` and, when FSx is on, `file_system`,
    `fsx_subnet` and `fsx_mount_name` for the pipeline stack."""

    def __init__(self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, key: kms.IKey,
                 ecr_repository_arns: list[str], **kwargs) -> None:
        super().__init__(scope, construct_id, **kwargs)
        private_type = (ec2.SubnetType.PRIVATE_WITH_EGRESS if config.nat_gateway
                        else ec2.SubnetType.PRIVATE_ISOLATED)
        subnets = [ec2.SubnetConfiguration(name="training", subnet_type=private_type, cidr_mask=20)]
        if config.nat_gateway:
            subnets.insert(0, ec2.SubnetConfiguration(name="public", subnet_type=ec2.SubnetType.PUBLIC,
                                                      cidr_mask=24))
        self.vpc = ec2.Vpc(
            self, "Vpc", ip_addresses=ec2.IpAddresses.cidr(config.vpc_cidr),
            availability_zones=list(config.availability_zones), subnet_configuration=subnets,
            nat_gateways=1 if config.nat_gateway else 0,
            # Nothing uses the default security group; restricting it would add a custom-resource Lambda.
            restrict_default_security_group=False,
        )
        flow_log = self.vpc.add_flow_log(
            "FlowLogs",
            destination=ec2.FlowLogDestination.to_cloud_watch_logs(logs.LogGroup(
                self, "FlowLogGroup", encryption_key=key, log_group_name=names.flow_log_group(config),
                retention=retention(config.log_retention_days), removal_policy=removal_policy(config))),
            traffic_type=ec2.FlowLogTrafficType.ALL,
        )
        # Only this account's flow logs may assume the delivery role (confused deputy; VPC user guide, "IAM role
        # for publishing flow logs to CloudWatch Logs"): CDK's role trusts the service with no condition.
        flow_log.iam_role.node.default_child.add_property_override(
            "AssumeRolePolicyDocument.Statement.0.Condition", {
                "StringEquals": {"aws:SourceAccount": config.account},
                "ArnLike": {"aws:SourceArn": f"arn:aws:ec2:{config.region}:{config.account}:vpc-flow-log/*"}})
        self.training_subnets = self.vpc.select_subnets(subnet_type=private_type).subnets

        # EFA needs all traffic between the instances of a job, both ways, inside one security group.
        self.training_security_group = ec2.SecurityGroup(
            self, "TrainingSecurityGroup", vpc=self.vpc, allow_all_outbound=False,
            description="SageMaker training and processing jobs: all traffic within the group (EFA), HTTPS to the "
                        "VPC endpoints and S3" + (" and, through NAT, the Hugging Face Hub" if config.nat_gateway else ""))
        sg = self.training_security_group
        sg.add_ingress_rule(sg, ec2.Port.all_traffic(), "EFA and NCCL between the instances of a job")
        sg.add_egress_rule(sg, ec2.Port.all_traffic(), "EFA and NCCL between the instances of a job")

        endpoint_sg = ec2.SecurityGroup(self, "EndpointSecurityGroup", vpc=self.vpc, allow_all_outbound=False,
                                        description="Interface endpoints: HTTPS from training jobs")
        endpoint_sg.add_ingress_rule(sg, ec2.Port.tcp(443), "HTTPS from training jobs")
        sg.add_egress_rule(endpoint_sg, ec2.Port.tcp(443), "HTTPS to the interface endpoints")
        # S3 through the gateway endpoint: the region's S3 prefix list, nothing else of the internet.
        sg.add_egress_rule(ec2.Peer.prefix_list(config.s3_prefix_list_id), ec2.Port.tcp(443),
                           "HTTPS to S3 (gateway endpoint, the region's S3 prefix list)")
        if config.nat_gateway:
            sg.add_egress_rule(ec2.Peer.any_ipv4(), ec2.Port.tcp(443), f"HTTPS through NAT to {NAT_HOSTS}")
        s3_endpoint = self.vpc.add_gateway_endpoint("S3", service=ec2.GatewayVpcEndpointAwsService.S3)
        self._s3_endpoint_policy(config, s3_endpoint)
        for name, service in INTERFACE_ENDPOINTS.items():
            endpoint = self.vpc.add_interface_endpoint(name, service=service, private_dns_enabled=True,
                                                       security_groups=[endpoint_sg], open=False)
            self._interface_endpoint_policy(config, name, endpoint, ecr_repository_arns)

        if config.tracking.enabled:  # the jobs reach the MLflow tracking server privately (no NAT): that one only
            endpoint = self.vpc.add_interface_endpoint(
                "SageMakerExperiments", service=ec2.InterfaceVpcEndpointAwsService.SAGEMAKER_EXPERIMENTS,
                private_dns_enabled=True, security_groups=[endpoint_sg], open=False)
            endpoint.add_to_policy(iam.PolicyStatement(
                sid="ThisTrackingServerOnly", principals=[iam.AnyPrincipal()], actions=list(JOB_ACTIONS),
                resources=[names.tracking_server_arn(config)],
                conditions={"StringEquals": {"aws:PrincipalAccount": config.account}}))

        self.file_system: fsx.LustreFileSystem | None = None
        self.fsx_subnet: ec2.ISubnet | None = None
        if config.fsx.enabled:
            self._add_fsx(config, key)

    @staticmethod
    def _s3_endpoint_policy(config: EnvironmentConfig, endpoint: ec2.GatewayVpcEndpoint) -> None:
        """Only the project's buckets, by this account's principals, and the ECR layer bucket of the region."""
        buckets = [f"arn:aws:s3:::{bucket_name(config, p)}" for p in ("data", "artifacts")]
        endpoint.add_to_policy(iam.PolicyStatement(
            sid="ProjectBuckets", principals=[iam.AnyPrincipal()], actions=S3_ENDPOINT_ACTIONS,
            resources=[*buckets, *(f"{b}/*" for b in buckets)],
            conditions={"StringEquals": {"aws:PrincipalAccount": config.account}}))
        # Image layers of ECR (the DLC images) are served from this AWS-owned bucket through presigned URLs.
        endpoint.add_to_policy(iam.PolicyStatement(
            sid="EcrImageLayers", principals=[iam.AnyPrincipal()], actions=["s3:GetObject"],
            resources=[f"arn:aws:s3:::prod-{config.region}-starport-layer-bucket/*"]))

    @staticmethod
    def _interface_endpoint_policy(config: EnvironmentConfig, name: str, endpoint: ec2.InterfaceVpcEndpoint,
                                   ecr_repository_arns: list[str]) -> None:
        """This account's principals only; ECR: only the DLC repositories (another account's registry)."""
        own = {"StringEquals": {"aws:PrincipalAccount": config.account}}
        if name == "EcrApi" or name == "EcrDkr":
            endpoint.add_to_policy(iam.PolicyStatement(
                sid="PullDlcImages", principals=[iam.AnyPrincipal()], resources=ecr_repository_arns,
                actions=["ecr:BatchGetImage", "ecr:GetDownloadUrlForLayer", "ecr:BatchCheckLayerAvailability"],
                conditions=own))
            endpoint.add_to_policy(iam.PolicyStatement(
                sid="EcrLogin", principals=[iam.AnyPrincipal()], actions=["ecr:GetAuthorizationToken"],
                resources=["*"], conditions=own))
            return
        # The service's API for this account's own resources only: no writing to another account's log groups,
        # metrics or roles through this VPC.
        endpoint.add_to_policy(iam.PolicyStatement(
            sid="ThisAccountOnly", principals=[iam.AnyPrincipal()], actions=["*"], resources=["*"],
            conditions={"StringEquals": {"aws:PrincipalAccount": config.account,
                                         "aws:ResourceAccount": config.account}}))

    def _add_fsx(self, config: EnvironmentConfig, key: kms.IKey) -> None:
        fc = config.fsx
        # Jobs that read FSx must run in the file system's subnet (single AZ).
        self.fsx_subnet = self.training_subnets[0]
        fsx_sg = ec2.SecurityGroup(self, "FsxSecurityGroup", vpc=self.vpc, allow_all_outbound=False,
                                   description="FSx for Lustre: Lustre traffic from training jobs")
        for port in LUSTRE_PORTS:
            fsx_sg.add_ingress_rule(self.training_security_group, port, "Lustre from training jobs")
            fsx_sg.add_ingress_rule(fsx_sg, port, "Lustre between the file servers")
            fsx_sg.add_egress_rule(fsx_sg, port, "Lustre between the file servers")
            self.training_security_group.add_egress_rule(fsx_sg, port, "Lustre to the file system")
        import_url = f"s3://{bucket_name(config, 'data')}/{fc.import_prefix}"
        dra = fc.deployment_type in FSX_DRA_TYPES
        lustre = fsx.LustreConfiguration(
            deployment_type=fsx.LustreDeploymentType(fc.deployment_type),
            per_unit_storage_throughput=fc.per_unit_storage_throughput,
            # Older types link to S3 through an import path; PERSISTENT_2 through a data repository association.
            import_path=None if dra else import_url,
            auto_import_policy=None if dra else fsx.LustreAutoImportPolicy.NEW_CHANGED_DELETED,
        )
        self.file_system = fsx.LustreFileSystem(
            self, "FileSystem", vpc=self.vpc, vpc_subnet=self.fsx_subnet, storage_capacity_gib=fc.storage_capacity_gib,
            lustre_configuration=lustre, security_group=fsx_sg, kms_key=key if fc.deployment_type.startswith(
                "PERSISTENT") else None,
            removal_policy=removal_policy(config),
        )
        if dra:
            fsx.CfnDataRepositoryAssociation(
                self, "DataRepositoryAssociation", file_system_id=self.file_system.file_system_id,
                file_system_path=fc.file_system_path, data_repository_path=import_url,
                batch_import_meta_data_on_create=True,
                s3=fsx.CfnDataRepositoryAssociation.S3Property(
                    auto_import_policy=fsx.CfnDataRepositoryAssociation.AutoImportPolicyProperty(
                        events=["NEW", "CHANGED", "DELETED"])),
            )

    @property
    def fsx_mount_name(self) -> str | None:
        return self.file_system.mount_name if self.file_system else None
