"""Least privilege across the app: no wildcard actions, no AWS-managed FullAccess policies, iam:PassRole only to
SageMaker. The SageMaker role's own statements: constructs/test_sagemaker_role.py."""

from __future__ import annotations

import json

from testkit.synth import Synthesized, as_list, policy_statements, resources, sagemaker_role

STACKS = ("storage", "network", "pipeline")


def test_no_wildcard_action_anywhere_in_project_policies(any_env: Synthesized) -> None:
    for name in STACKS:
        for lid, st in policy_statements(any_env.template_json(name)):
            if lid.startswith("CustomCDKBucketDeployment"):
                continue  # aws-cdk-lib's deployment provider: acknowledged in cdk-nag (see README)
            for action in as_list(st["Action"]):
                assert "*" not in action, (name, lid, action)


def test_no_aws_managed_full_access_policies(any_env: Synthesized) -> None:
    for name in STACKS:
        for lid, role in resources(any_env.template_json(name), "AWS::IAM::Role").items():
            for arn in role["Properties"].get("ManagedPolicyArns", []):
                assert "FullAccess" not in json.dumps(arn), (lid, arn)
                assert lid.startswith("CustomCDKBucketDeployment"), f"{lid} has a managed policy {arn}"


def _sagemaker_role(s: Synthesized) -> tuple[str, list[dict]]:
    return sagemaker_role(s.template_json("pipeline"))


def test_pass_role_only_to_sagemaker(any_env: Synthesized) -> None:
    t = any_env.template_json("pipeline")
    passes = [st for _, st in policy_statements(t) if "iam:PassRole" in as_list(st["Action"])]
    assert passes
    lid, _ = _sagemaker_role(any_env)
    for st in passes:
        assert st["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
        assert st["Resource"] == {"Fn::GetAtt": [lid, "Arn"]}
