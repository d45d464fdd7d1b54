"""The SageMaker execution role, built alone in a bare stack (a bare key, the VPC, subnets and security group
imported by id, bucket ARNs from config as the pipeline stack names them): trust, S3 prefixes, ECR, logs,
metrics, ENIs, KMS and FSx. Who may pass it (iam:PassRole) is wiring: tests/stacks/test_iam.py."""

from __future__ import annotations

import json
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_ec2 as ec2
from aws_cdk.assertions import Template
from testkit.constructs import Built, bare_app, bare_key, env_config, env_fixtures
from testkit.synth import as_list, sagemaker_role

from stacks import names
from stacks.assets.image_uris import ImageUris, resolve_images
from stacks.sagemaker_role import SageMakerExecutionRole
from stacks.storage_stack import bucket_name


@dataclass
class RoleBuilt(Built):
    images: ImageUris


def _build(name: str) -> RoleBuilt:
    config = env_config(name)
    app, env = bare_app(config)
    stack = cdk.Stack(app, "Role", env=env)
    images = resolve_images(config)
    vpc = ec2.Vpc.from_vpc_attributes(stack, "Vpc", vpc_id="vpc-0123456789abcdef0",
                                      availability_zones=list(config.availability_zones))
    subnets = [ec2.Subnet.from_subnet_id(stack, f"Subnet{i}", f"subnet-0{i}") for i in range(2)]
    group = ec2.SecurityGroup.from_security_group_id(stack, "Group", "sg-0123456789abcdef0")
    fsx_arn = (f"arn:aws:fsx:{config.region}:{config.account}:file-system/fs-0123456789abcdef0"
               if config.fsx.enabled else None)
    role = SageMakerExecutionRole(
        stack, "SageMakerExecution", role_name=names.sagemaker_role_name(config),
        data_bucket_arn=f"arn:aws:s3:::{bucket_name(config, 'data')}",
        artifacts_bucket_arn=f"arn:aws:s3:::{bucket_name(config, 'artifacts')}", key=bare_key(app, env),
        images=images, vpc=vpc, subnets=subnets, security_groups=[group], file_system_arn=fsx_arn,
        create_log_groups=not config.manage_sagemaker_log_groups)
    return RoleBuilt(config, role, Template.from_stack(stack), images)


dev, prod, any_env = env_fixtures(_build)


def _sagemaker_role(s: Built) -> tuple[str, list[dict]]:
    return sagemaker_role(s.json)


def test_sagemaker_role_trusts_only_sagemaker_and_has_no_managed_policies(any_env: Built) -> None:
    lid, _ = _sagemaker_role(any_env)
    role = any_env.json["Resources"][lid]["Properties"]
    assert role["RoleName"] == f"{any_env.config.prefix}-sagemaker-execution"
    assert "ManagedPolicyArns" not in role
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    # Confused deputy: SageMaker assumes the role only for this account's jobs.
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": any_env.config.account}}


def test_sagemaker_role_s3_scope(any_env: Built) -> None:
    _, statements = _sagemaker_role(any_env)
    by_sid = {st["Sid"]: st for st in statements}
    arts = f"arn:aws:s3:::{any_env.config.prefix}-artifacts-{any_env.config.account}-{any_env.config.region}"
    data = f"arn:aws:s3:::{any_env.config.prefix}-data-{any_env.config.account}-{any_env.config.region}"
    assert as_list(by_sid["ReadData"]["Resource"]) == [f"{data}/*"]
    assert as_list(by_sid["WriteCheckpoints"]["Resource"]) == [f"{arts}/checkpoints/*"]
    assert set(as_list(by_sid["WriteCheckpoints"]["Action"])) == {"s3:PutObject", "s3:DeleteObject",
                                                                    "s3:AbortMultipartUpload"}
    # Models, outputs and TensorBoard event files are uploaded, never deleted: a job cannot delete another run's model.
    assert set(as_list(by_sid["WriteModelsAndOutputs"]["Resource"])) == {f"{arts}/models/*", f"{arts}/outputs/*",
                                                                         f"{arts}/tensorboard/*"}
    assert set(as_list(by_sid["WriteModelsAndOutputs"]["Action"])) == {"s3:PutObject", "s3:AbortMultipartUpload"}
    deletes = [st for st in statements if any("Delete" in a for a in as_list(st["Action"]))]
    assert all(as_list(st["Resource"]) == [f"{arts}/checkpoints/*"] for st in deletes if st["Sid"] != "ManageJobEnis")
    assert not any("registry" in json.dumps(st["Resource"]) or f"{arts}/*" in as_list(st["Resource"])
                   for st in statements), "jobs never write registered models"
    writes = [st for st in statements if any(a.startswith("s3:Put") for a in as_list(st["Action"]))]
    assert all(data not in json.dumps(st["Resource"]) for st in writes), "jobs never write the user's data"


def test_sagemaker_role_pulls_only_the_resolved_dlc_repositories(any_env: RoleBuilt) -> None:
    _, statements = _sagemaker_role(any_env)
    pull = next(st for st in statements if st.get("Sid") == "PullDlcImages")
    repos = {r.split("repository/")[1] for r in as_list(pull["Resource"])}
    # Jobs run the training and processing images; the inference image is for hosting, not for this role.
    assert repos == {"huggingface-pytorch-training", "pytorch-training"}
    for uri in (any_env.images.training, any_env.images.processing):
        account = uri.split(".")[0]
        assert any(f":{account}:repository/" in r for r in as_list(pull["Resource"]))


def test_sagemaker_role_logs_metrics_enis_kms_and_fsx(dev: Built, prod: Built) -> None:
    for s in (dev, prod):
        _, statements = _sagemaker_role(s)
        sids = {st["Sid"] for st in statements}
        assert {"WriteJobLogs", "PutJobMetrics", "DescribeNetwork", "ManageJobEnis", "UseProjectKey"} <= sids
        metrics = next(st for st in statements if st["Sid"] == "PutJobMetrics")
        assert metrics["Condition"] == {"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}}
    assert "ReadFsx" in {st["Sid"] for st in _sagemaker_role(prod)[1]}
    assert "ReadFsx" not in {st["Sid"] for st in _sagemaker_role(dev)[1]}
