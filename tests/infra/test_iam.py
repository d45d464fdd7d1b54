"""Least privilege: no wildcard actions, no AWS-managed FullAccess policies, the SageMaker role scoped to prefixes."""

from __future__ import annotations

import json

from synth_helpers import Synthesized, as_list, policy_statements, resources

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
    t = s.template_json("pipeline")
    (lid,) = [k for k, r in resources(t, "AWS::IAM::Role").items()
              if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"].get("Service")
              == "sagemaker.amazonaws.com"]
    return lid, [st for plid, st in policy_statements(t) if lid in json.dumps(
        t["Resources"][plid]["Properties"].get("Roles", [])) or plid == lid]


def test_sagemaker_role_trusts_only_sagemaker_and_has_no_managed_policies(any_env: Synthesized) -> None:
    lid, _ = _sagemaker_role(any_env)
    role = any_env.template_json("pipeline")["Resources"][lid]["Properties"]
    assert role["RoleName"] == f"{any_env.config.prefix}-sagemaker-execution"
    assert "ManagedPolicyArns" not in role
    (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
    # Confused deputy: SageMaker assumes the role only for this account's jobs.
    assert trust["Condition"] == {"StringEquals": {"aws:SourceAccount": any_env.config.account}}


def test_sagemaker_role_s3_scope(any_env: Synthesized) -> None:
    _, statements = _sagemaker_role(any_env)
    by_sid = {st["Sid"]: st for st in statements}
    arts = f"arn:aws:s3:::{any_env.config.prefix}-artifacts-{any_env.config.account}-{any_env.config.region}"
    data = f"arn:aws:s3:::{any_env.config.prefix}-data-{any_env.config.account}-{any_env.config.region}"
    assert as_list(by_sid["ReadData"]["Resource"]) == [f"{data}/*"]
    assert as_list(by_sid["WriteCheckpoints"]["Resource"]) == [f"{arts}/checkpoints/*"]
    assert set(as_list(by_sid["WriteCheckpoints"]["Action"])) == {"s3:PutObject", "s3:DeleteObject",
                                                                    "s3:AbortMultipartUpload"}
    # Models and outputs are uploaded, never deleted: a job cannot delete another run's model.
    assert set(as_list(by_sid["WriteModelsAndOutputs"]["Resource"])) == {f"{arts}/models/*", f"{arts}/outputs/*"}
    assert set(as_list(by_sid["WriteModelsAndOutputs"]["Action"])) == {"s3:PutObject", "s3:AbortMultipartUpload"}
    deletes = [st for st in statements if any("Delete" in a for a in as_list(st["Action"]))]
    assert all(as_list(st["Resource"]) == [f"{arts}/checkpoints/*"] for st in deletes if st["Sid"] != "ManageJobEnis")
    assert not any("registry" in json.dumps(st["Resource"]) or f"{arts}/*" in as_list(st["Resource"])
                   for st in statements), "jobs never write registered models"
    writes = [st for st in statements if any(a.startswith("s3:Put") for a in as_list(st["Action"]))]
    assert all(data not in json.dumps(st["Resource"]) for st in writes), "jobs never write the user's data"


def test_sagemaker_role_pulls_only_the_resolved_dlc_repositories(any_env: Synthesized) -> None:
    _, statements = _sagemaker_role(any_env)
    pull = next(st for st in statements if st.get("Sid") == "PullDlcImages")
    repos = {r.split("repository/")[1] for r in as_list(pull["Resource"])}
    # Jobs run the training and processing images; the inference image is for hosting, not for this role.
    assert repos == {"huggingface-pytorch-training", "pytorch-training"}
    for uri in (any_env.project.images.training, any_env.project.images.processing):
        account = uri.split(".")[0]
        assert any(f":{account}:repository/" in r for r in as_list(pull["Resource"]))


def test_sagemaker_role_logs_metrics_enis_kms_and_fsx(dev: Synthesized, prod: Synthesized) -> None:
    for s in (dev, prod):
        _, statements = _sagemaker_role(s)
        sids = {st["Sid"] for st in statements}
        assert {"WriteJobLogs", "PutJobMetrics", "DescribeNetwork", "ManageJobEnis", "UseProjectKey"} <= sids
        metrics = next(st for st in statements if st["Sid"] == "PutJobMetrics")
        assert metrics["Condition"] == {"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}}
    assert "ReadFsx" in {st["Sid"] for st in _sagemaker_role(prod)[1]}
    assert "ReadFsx" not in {st["Sid"] for st in _sagemaker_role(dev)[1]}


def test_pass_role_only_to_sagemaker(any_env: Synthesized) -> None:
    t = any_env.template_json("pipeline")
    passes = [st for _, st in policy_statements(t) if "iam:PassRole" in as_list(st["Action"])]
    assert passes
    lid, _ = _sagemaker_role(any_env)
    for st in passes:
        assert st["Condition"] == {"StringEquals": {"iam:PassedToService": "sagemaker.amazonaws.com"}}
        assert st["Resource"] == {"Fn::GetAtt": [lid, "Arn"]}
