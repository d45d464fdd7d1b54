"""Security guardrails of the synthesized templates: the training security group's egress and the VPC endpoints'
policies."""

from __future__ import annotations

import json
from typing import Any

from testkit.policy_walk import as_list
from testkit.synth import Synthesized, bucket_arn, resources


def _security_group_egress(s: Synthesized) -> list[dict[str, Any]]:
    t = s.template_json("network")
    (sg_lid,) = [lid for lid in resources(t, "AWS::EC2::SecurityGroup") if lid.startswith("TrainingSecurityGroup")]
    inline = t["Resources"][sg_lid]["Properties"].get("SecurityGroupEgress", [])
    separate = [r["Properties"] for r in resources(t, "AWS::EC2::SecurityGroupEgress").values()
                if r["Properties"]["GroupId"] == {"Fn::GetAtt": [sg_lid, "GroupId"]}]
    return inline + separate


def test_training_egress_reaches_only_endpoints_s3_and_in_prod_the_nat(dev: Synthesized, prod: Synthesized) -> None:
    for s in (dev, prod):
        rules = _security_group_egress(s)
        s3 = [r for r in rules if r.get("DestinationPrefixListId") == s.config.s3_prefix_list_id]
        assert len(s3) == 1 and s3[0]["FromPort"] == 443 == s3[0]["ToPort"]
        internet = [r for r in rules if r.get("CidrIp") == "0.0.0.0/0" or r.get("CidrIpv6")]
        if s.config.nat_gateway:
            (nat,) = internet
            assert nat["FromPort"] == 443 == nat["ToPort"] and "huggingface.co" in nat["Description"]
        else:
            assert internet == [], "without NAT nothing leaves the VPC but through its endpoints"


def test_every_vpc_endpoint_has_a_policy_limited_to_the_account_and_project(any_env: Synthesized) -> None:
    endpoints = resources(any_env.template_json("network"), "AWS::EC2::VPCEndpoint")
    assert len(endpoints) == 8 + any_env.config.tracking.enabled  # + SageMaker Experiments (MLflow) with tracking
    account = any_env.config.account
    for lid, ep in endpoints.items():
        doc = ep["Properties"].get("PolicyDocument")
        assert doc, f"{lid} has no endpoint policy"
        for st in doc["Statement"]:
            text = json.dumps(st)
            assert st["Effect"] == "Allow"
            assert account in json.dumps(st.get("Condition", {})) or "starport-layer-bucket" in text, (lid, st)
            if lid.startswith("VpcS3"):
                for r in as_list(st["Resource"]):
                    assert any(b in json.dumps(r) for b in (bucket_arn(any_env, "data"), bucket_arn(any_env, "artifacts"),
                                                            "starport-layer-bucket")), r
            if lid.startswith("VpcEcr") and "ecr:BatchGetImage" in as_list(st["Action"]):
                assert all(":repository/" in r for r in as_list(st["Resource"]))
