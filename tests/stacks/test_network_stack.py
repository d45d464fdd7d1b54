"""Network stack, built alone (with a bare key): VPC over pinned AZs, endpoints, flow logs, the EFA security
group and FSx for Lustre."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template
from testkit.constructs import Built, bare_app, bare_key, env_config, env_fixtures
from testkit.synth import resources

from stacks.assets.image_uris import resolve_images
from stacks.network_stack import NetworkStack
from stacks.sagemaker_role import job_image_repository_arns

INTERFACE_SERVICES = {"sagemaker.api", "sagemaker.runtime", "sts", "logs", "monitoring", "ecr.api", "ecr.dkr"}
SCRATCH_FSX = {"fsx": {"enabled": True, "deployment_type": "SCRATCH_2", "storage_capacity_gib": 1200}}


def _build(name: str, overrides: dict[str, Any] | None = None) -> Built:
    config = env_config(name, overrides)
    app, env = bare_app(config)
    stack = NetworkStack(app, "Network", config=config, env=env, key=bare_key(app, env),
                         ecr_repository_arns=job_image_repository_arns(resolve_images(config)))
    return Built(config, stack, Template.from_stack(stack))


dev, prod, any_env = env_fixtures(_build)


@pytest.fixture(scope="module")
def dev_scratch_fsx() -> Built:
    """dev with an FSx SCRATCH_2 file system (import path + auto-import instead of a DRA)."""
    return _build("dev", SCRATCH_FSX)


def net(s: Built) -> dict:
    return s.json


def test_vpc_cidr_and_pinned_azs(any_env: Built) -> None:
    any_env.template.has_resource_properties("AWS::EC2::VPC", {"CidrBlock": any_env.config.vpc_cidr})
    azs = {r["Properties"]["AvailabilityZone"] for r in resources(net(any_env), "AWS::EC2::Subnet").values()}
    assert azs == set(any_env.config.availability_zones)


def test_private_subnets_isolated_without_nat(dev: Built, prod: Built) -> None:
    assert not resources(net(dev), "AWS::EC2::NatGateway")
    assert not resources(net(dev), "AWS::EC2::InternetGateway")
    assert all(not r["Properties"].get("MapPublicIpOnLaunch") for r in resources(net(dev), "AWS::EC2::Subnet").values())
    assert len(resources(net(prod), "AWS::EC2::NatGateway")) == 1


def _service(endpoint: dict) -> str:
    name = endpoint["Properties"]["ServiceName"]
    if isinstance(name, dict):  # {"Fn::Join": ["", ["com.amazonaws.", {"Ref": "AWS::Region"}, ".s3"]]}
        name = "".join(p if isinstance(p, str) else "" for p in name["Fn::Join"][1])
    return name.split(".", 3)[-1] if name.startswith("com.amazonaws.") else name


def test_endpoints(any_env: Built) -> None:
    endpoints = resources(net(any_env), "AWS::EC2::VPCEndpoint").values()
    gateway = [e for e in endpoints if e["Properties"].get("VpcEndpointType", "Gateway") == "Gateway"]
    interface = [e for e in endpoints if e["Properties"].get("VpcEndpointType") == "Interface"]
    assert [_service(e).rsplit(".", 1)[-1] for e in gateway] == ["s3"]
    services = {_service(e).split(f"{any_env.config.region}.", 1)[-1] for e in interface}
    # the MLflow tracking server's (cdk.json tracking: prod): tests/stacks/test_tracking_stack.py
    assert services == INTERFACE_SERVICES | ({"experiments"} if any_env.config.tracking.enabled else set())
    assert all(e["Properties"]["PrivateDnsEnabled"] for e in interface)


def test_flow_logs_to_encrypted_group(any_env: Built) -> None:
    any_env.template.has_resource_properties("AWS::EC2::FlowLog", {"TrafficType": "ALL"})
    groups = resources(net(any_env), "AWS::Logs::LogGroup").values()
    assert groups and all("KmsKeyId" in g["Properties"] for g in groups)


def _training_sg(s: Built) -> str:
    (lid,) = [k for k, v in resources(net(s), "AWS::EC2::SecurityGroup").items()
              if "EFA" in v["Properties"]["GroupDescription"]]
    return lid


def test_training_group_allows_all_traffic_within_itself_and_https_out(any_env: Built) -> None:
    sg = _training_sg(any_env)
    t = net(any_env)
    ingress = [r["Properties"] for r in resources(t, "AWS::EC2::SecurityGroupIngress").values()]
    egress = [r["Properties"] for r in resources(t, "AWS::EC2::SecurityGroupEgress").values()]
    self_ref = {"Fn::GetAtt": [sg, "GroupId"]}
    assert any(r["IpProtocol"] == "-1" and r["SourceSecurityGroupId"] == self_ref and r["GroupId"] == self_ref
               for r in ingress)
    assert any(r["IpProtocol"] == "-1" and r.get("DestinationSecurityGroupId") == self_ref and r["GroupId"] == self_ref
               for r in egress)
    inline = resources(t, "AWS::EC2::SecurityGroup")[sg]["Properties"].get("SecurityGroupEgress", [])
    https = [r for r in egress + inline if r.get("FromPort") == 443 and r.get("ToPort") == 443]
    assert https, "training jobs need HTTPS to the endpoints and S3"
    assert not any(r.get("CidrIp") == "0.0.0.0/0" and r.get("IpProtocol") == "-1" for r in egress + inline)


def test_prod_fsx_persistent2_with_data_repository_association(prod: Built) -> None:
    t = net(prod)
    (fs,) = resources(t, "AWS::FSx::FileSystem").values()
    lustre = fs["Properties"]["LustreConfiguration"]
    assert lustre["DeploymentType"] == "PERSISTENT_2"
    assert lustre["PerUnitStorageThroughput"] == 250
    assert fs["Properties"]["StorageCapacity"] == 2400
    (dra,) = resources(t, "AWS::FSx::DataRepositoryAssociation").values()
    assert dra["Properties"]["S3"]["AutoImportPolicy"]["Events"] == ["NEW", "CHANGED", "DELETED"]
    assert dra["Properties"]["DataRepositoryPath"] == \
        f"s3://hfsm-prod-data-{prod.config.account}-{prod.config.region}/datasets/"
    # Single AZ: the file system sits in the first training subnet, the one FSx jobs use.
    network = prod.construct
    assert network.fsx_subnet is network.training_subnets[0]
    assert fs["Properties"]["SubnetIds"] == [network.resolve(network.fsx_subnet.subnet_id)]


def test_scratch_fsx_uses_import_path_with_auto_import(dev_scratch_fsx: Built) -> None:
    t = net(dev_scratch_fsx)
    (fs,) = resources(t, "AWS::FSx::FileSystem").values()
    lustre = fs["Properties"]["LustreConfiguration"]
    assert lustre["DeploymentType"] == "SCRATCH_2"
    assert lustre["AutoImportPolicy"] == "NEW_CHANGED_DELETED"
    assert lustre["ImportPath"].endswith("/datasets/")
    assert not resources(t, "AWS::FSx::DataRepositoryAssociation")


def test_fsx_group_admits_lustre_ports_from_training_group(prod: Built) -> None:
    t = net(prod)
    sg = _training_sg(prod)
    ingress = [r["Properties"] for r in resources(t, "AWS::EC2::SecurityGroupIngress").values()
               if r["Properties"].get("SourceSecurityGroupId") == {"Fn::GetAtt": [sg, "GroupId"]}
               and r["Properties"]["GroupId"] != {"Fn::GetAtt": [sg, "GroupId"]}]
    ports = {(r["FromPort"], r["ToPort"]) for r in ingress if r["IpProtocol"] == "tcp"}
    assert {(988, 988), (1018, 1023)} <= ports


def test_no_fsx_in_dev(dev: Built) -> None:
    assert not resources(net(dev), "AWS::FSx::FileSystem")


def test_scratch_fsx_template_passes_cfn_lint(dev_scratch_fsx: Built, tmp_path: Path) -> None:
    """The whole-app cfn-lint covers dev and prod (PERSISTENT_2); the SCRATCH_2 variant differs in this stack."""
    path = tmp_path / "network-scratch.template.json"
    path.write_text(json.dumps(dev_scratch_fsx.json))
    proc = subprocess.run([sys.executable, "-m", "cfnlint", "--format", "json", str(path)],
                          capture_output=True, text=True, timeout=300)
    errors = [f for f in json.loads(proc.stdout or "[]") if f["Level"] == "Error"]
    assert errors == [], errors
    assert proc.returncode & 2 == 0, proc.stderr
