"""Security guardrails of the synthesized templates: bucket policies (evaluated), network egress and endpoint
policies, the failed-event path, the orphaned-job rule, the budget, log groups and the code deployment role."""

from __future__ import annotations

import fnmatch
import json
from typing import Any

import pytest
from policy_walk import as_list, normalize
from synth_helpers import Synthesized, resources

from hfsm_lambda import HANDLER_MODULE
from stacks import names


# --- a small evaluator for the buckets' Deny statements (the operators they use) ----------------------------
def _condition_holds(op: str, key: str, want: Any, context: dict[str, Any]) -> bool:
    wants = [normalize(w) for w in as_list(want)]
    have = context.get(key)
    if op == "Null":
        return (have is None) == (str(want).lower() == "true")
    if op in ("StringNotEquals", "ArnNotEquals"):
        return have is None or have not in wants  # negated operators hold when the key is absent
    if op in ("StringEquals", "ArnEquals"):
        return have in wants
    if op == "Bool":
        return str(have).lower() == str(want).lower()
    raise AssertionError(f"operator {op} not modelled")


def denied(statements: list[dict[str, Any]], action: str, resource: str, context: dict[str, Any]) -> list[str]:
    """Sids of the Deny statements that apply to this request."""
    out = []
    for st in statements:
        if st["Effect"] != "Deny":
            continue
        if not any(fnmatch.fnmatchcase(action, a) for a in as_list(st["Action"])):
            continue
        if not any(fnmatch.fnmatchcase(resource, normalize(r)) for r in as_list(st["Resource"])):
            continue
        if all(_condition_holds(op, k, v, context) for op, kv in st.get("Condition", {}).items()
               for k, v in kv.items()):
            out.append(st.get("Sid", "?"))
    return out


def bucket_statements(s: Synthesized, purpose: str) -> list[dict[str, Any]]:
    t = s.template_json("storage")
    bucket_lid = next(lid for lid, r in resources(t, "AWS::S3::Bucket").items()
                      if r["Properties"]["BucketName"].startswith(f"{s.config.prefix}-{purpose}-"))
    (policy,) = [r for r in resources(t, "AWS::S3::BucketPolicy").values()
                 if r["Properties"]["Bucket"] == {"Ref": bucket_lid}]
    return policy["Properties"]["PolicyDocument"]["Statement"]


def bucket_arn(s: Synthesized, purpose: str) -> str:
    return f"arn:aws:s3:::{s.config.prefix}-{purpose}-{s.config.account}-{s.config.region}"


def bucket_ref(purpose: str) -> str:
    """How the storage stack's own policies name the bucket (policy_walk.normalize of its GetAtt Arn)."""
    return {"data": "ref:Data", "artifacts": "ref:Artifacts"}[purpose]


def ctx(s: Synthesized, role: str, **extra: Any) -> dict[str, Any]:
    return {"aws:PrincipalArn": names.role_arn(s.config, role), "aws:SecureTransport": "true", **extra}


def test_only_run_submitters_can_write_run_specs(any_env: Synthesized) -> None:
    c = any_env.config
    data = bucket_statements(any_env, "data")
    spec = f"{bucket_ref('data')}/runs/imdb.json"
    assert denied(data, "s3:PutObject", spec, ctx(any_env, names.dataset_uploader_role_name(c))) == [
        "RunSpecsOnlyFromRunSubmitters"]
    assert denied(data, "s3:PutObject", spec, ctx(any_env, names.sagemaker_role_name(c)))
    assert denied(data, "s3:PutObject", spec, ctx(any_env, names.run_submitter_role_name(c))) == []
    dataset = f"{bucket_ref('data')}/datasets/imdb/train.jsonl"
    assert denied(data, "s3:PutObject", dataset, ctx(any_env, names.dataset_uploader_role_name(c))) == []


def test_uploads_must_use_the_project_key(any_env: Synthesized) -> None:
    c = any_env.config
    key = "ref:Key"  # the key's ARN, as the storage stack's bucket policies name it
    for purpose in ("data", "artifacts"):
        statements = bucket_statements(any_env, purpose)
        obj = f"{bucket_ref(purpose)}/datasets/x" if purpose == "data" else \
            f"{bucket_ref(purpose)}/outputs/r/x"
        who = ctx(any_env, names.function_role_name(c, "finish"))
        assert denied(statements, "s3:PutObject", obj, {**who, "s3:x-amz-server-side-encryption": "AES256"}) == [
            "DenyOtherEncryption"]
        other = {**who, "s3:x-amz-server-side-encryption": "aws:kms",
                 "s3:x-amz-server-side-encryption-aws-kms-key-id": "arn:aws:kms:us-east-1:999999999999:key/other"}
        assert denied(statements, "s3:PutObject", obj, other) == ["DenyOtherKeys"]
        ours = {**who, "s3:x-amz-server-side-encryption": "aws:kms",
                "s3:x-amz-server-side-encryption-aws-kms-key-id": key}
        assert denied(statements, "s3:PutObject", obj, ours) == []
        # No header at all: the bucket's default encryption (the project key) applies.
        assert denied(statements, "s3:PutObject", obj, who) == []
        # SSE-C (issue 23): a key the uploader keeps, with or without an SSE header next to it
        sse_c = {**who, "s3:x-amz-server-side-encryption-customer-algorithm": "AES256"}
        assert denied(statements, "s3:PutObject", obj, sse_c) == ["DenyCustomerProvidedKeys"]
        assert "DenyCustomerProvidedKeys" in denied(statements, "s3:PutObject", obj, {**ours, **sse_c})
        assert denied(statements, "s3:PutObject", obj, {**who, "aws:SecureTransport": "false"})


def test_registered_models_and_code_have_one_writer_each(any_env: Synthesized) -> None:
    c = any_env.config
    arts = bucket_statements(any_env, "artifacts")
    registered = f"{bucket_ref('artifacts')}/registry/run-1/job/model.tar.gz"
    for role in (names.sagemaker_role_name(c), names.run_submitter_role_name(c),
                 names.function_role_name(c, "notify_failure")):
        assert denied(arts, "s3:PutObject", registered, ctx(any_env, role)), role
        assert denied(arts, "s3:DeleteObject", registered, ctx(any_env, role)), role
    finish = ctx(any_env, names.function_role_name(c, "finish"))
    assert denied(arts, "s3:PutObject", registered, finish) == []
    assert denied(arts, "s3:DeleteObjectVersion", registered, finish), "no one deletes a registered version"
    claim = f"{bucket_ref('artifacts')}/claims/run-20250101000000-0123456789abcdef.json"  # issue 23
    for role in (names.sagemaker_role_name(c), names.run_submitter_role_name(c),
                 names.function_role_name(c, "finish")):
        assert denied(arts, "s3:PutObject", claim, ctx(any_env, role)), role
    prepare = ctx(any_env, names.function_role_name(c, "prepare"))
    assert denied(arts, "s3:PutObject", claim, prepare) == []
    assert denied(arts, "s3:DeleteObject", claim, prepare) and denied(arts, "s3:DeleteObjectVersion", claim, prepare)
    code = f"{bucket_ref('artifacts')}/code/0123/sourcedir.tar.gz"
    assert denied(arts, "s3:PutObject", code, ctx(any_env, names.sagemaker_role_name(c)))
    assert denied(arts, "s3:PutObject", code, ctx(any_env, names.code_deployment_role_name(c))) == []


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
    assert len(endpoints) == 8
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


def _pipe(s: Synthesized) -> dict[str, Any]:
    return s.template_json("pipeline")


def test_failed_events_go_to_a_queue_with_an_alarm(any_env: Synthesized) -> None:
    t = _pipe(any_env)
    (queue_lid,) = resources(t, "AWS::SQS::Queue")
    queue = t["Resources"][queue_lid]["Properties"]
    assert queue["SqsManagedSseEnabled"] is True and queue["MessageRetentionPeriod"] == 14 * 86400
    rules = resources(t, "AWS::Events::Rule")
    assert len(rules) == 2
    for rule in rules.values():
        (target,) = rule["Properties"]["Targets"]
        assert target["DeadLetterConfig"]["Arn"] == {"Fn::GetAtt": [queue_lid, "Arn"]}
        assert target["RetryPolicy"]["MaximumRetryAttempts"] >= 4
    configs = resources(t, "AWS::Lambda::EventInvokeConfig")
    assert len(configs) == 2, "trigger and stop_run_jobs: Lambda's own retries end in the queue"
    for cfg in configs.values():
        assert cfg["Properties"]["DestinationConfig"]["OnFailure"]["Destination"] == {"Fn::GetAtt": [queue_lid, "Arn"]}
    # CDK's code-deployment function: CloudFormation invokes it asynchronously (issue 23: CKV_AWS_116's reason)
    (provider,) = [r for lid, r in resources(t, "AWS::Lambda::Function").items()
                   if lid.startswith("CustomCDKBucketDeployment")]
    assert provider["Properties"]["DeadLetterConfig"]["TargetArn"] == {"Fn::GetAtt": [queue_lid, "Arn"]}
    (alarm,) = resources(t, "AWS::CloudWatch::Alarm").values()
    assert alarm["Properties"]["Threshold"] == 1 and alarm["Properties"]["AlarmActions"]


def test_orphaned_job_rule_covers_both_machines_and_the_ending_statuses(any_env: Synthesized) -> None:
    rule = next(r for r in resources(_pipe(any_env), "AWS::Events::Rule").values()
                if r["Properties"]["EventPattern"]["source"] == ["aws.states"])
    pattern = rule["Properties"]["EventPattern"]
    assert pattern["detail-type"] == ["Step Functions Execution Status Change"]
    assert sorted(pattern["detail"]["status"]) == ["ABORTED", "FAILED", "TIMED_OUT"]
    c = any_env.config
    assert sorted(pattern["detail"]["stateMachineArn"]) == sorted(
        names.state_machine_arn(c, n) for n in names.state_machine_names(c))
    (target,) = rule["Properties"]["Targets"]
    assert "StopRunJobs" in json.dumps(target["Arn"])


def test_monthly_budget_alarms_to_the_topic(any_env: Synthesized) -> None:
    t = _pipe(any_env)
    (budget,) = resources(t, "AWS::Budgets::Budget").values()
    data = budget["Properties"]["Budget"]
    assert data["BudgetLimit"] == {"Amount": any_env.config.monthly_budget_usd, "Unit": "USD"}
    assert data["TimeUnit"] == "MONTHLY" and data["CostFilters"] == {
        "TagKeyValue": [f"user:project${any_env.config.project}"]}
    kinds = sorted(n["Notification"]["NotificationType"] for n in budget["Properties"]["NotificationsWithSubscribers"])
    assert kinds == ["ACTUAL", "FORECASTED"]
    for n in budget["Properties"]["NotificationsWithSubscribers"]:
        (sub,) = n["Subscribers"]
        assert sub["SubscriptionType"] == "SNS" and "Notifications" in json.dumps(sub["Address"])
    policy = next(iter(resources(t, "AWS::SNS::TopicPolicy").values()))
    principals = json.dumps([st.get("Principal") for st in policy["Properties"]["PolicyDocument"]["Statement"]])
    assert "budgets.amazonaws.com" in principals and "cloudwatch.amazonaws.com" in principals
    key = next(iter(resources(any_env.template_json("storage"), "AWS::KMS::Key").values()))
    assert "budgets.amazonaws.com" in json.dumps(key["Properties"]["KeyPolicy"]), "the topic's key lets Budgets in"


def test_every_log_group_uses_the_project_key_and_expires(any_env: Synthesized) -> None:
    found = set()
    for name in ("network", "pipeline"):
        for lid, group in resources(any_env.template_json(name), "AWS::Logs::LogGroup").items():
            props = group["Properties"]
            assert "KmsKeyId" in props and "RetentionInDays" in props, (name, lid)
            found.add(props["LogGroupName"])
    assert set(names.SAGEMAKER_LOG_GROUPS) <= found
    assert found <= set(names.project_log_groups(any_env.config)), "the key policy names every project log group"


def test_code_deployment_role_is_dedicated_and_writes_only_code(any_env: Synthesized) -> None:
    t = _pipe(any_env)
    role_lid = next(lid for lid, r in resources(t, "AWS::IAM::Role").items()
                    if r["Properties"].get("RoleName") == names.code_deployment_role_name(any_env.config))
    role = t["Resources"][role_lid]["Properties"]
    assert "ManagedPolicyArns" not in role
    for fn in resources(t, "AWS::Lambda::Function").values():
        if "CDKBucketDeployment" in json.dumps(fn["Properties"].get("Role")) or not fn["Properties"][
                "Handler"].startswith(f"{HANDLER_MODULE}."):
            assert fn["Properties"]["Role"] == {"Fn::GetAtt": [role_lid, "Arn"]}
    writes = [st for r in resources(t, "AWS::IAM::Policy").values()
              if {"Ref": role_lid} in r["Properties"]["Roles"] for st in r["Properties"]["PolicyDocument"]["Statement"]
              if any(a.startswith(("s3:Put", "s3:Delete")) for a in as_list(st["Action"]))]
    assert [as_list(st["Resource"]) for st in writes] == [[f"{bucket_arn(any_env, 'artifacts')}/code/*"]]
    (deployment,) = resources(t, "Custom::CDKBucketDeployment").values()
    assert "Arn" in json.dumps(deployment["Properties"]["SystemMetadata"]["sse-kms-key-id"]), \
        "the key ARN: the bucket policy's DenyOtherKeys compares ARNs"


@pytest.mark.parametrize("handler", ["trigger", "stop_run_jobs"])
def test_async_functions_have_a_failure_destination(any_env: Synthesized, handler: str) -> None:
    t = _pipe(any_env)
    fn_lid = next(lid for lid, r in resources(t, "AWS::Lambda::Function").items()
                  if r["Properties"]["Handler"] == f"{HANDLER_MODULE}.{handler}")
    assert any(c["Properties"]["FunctionName"] == {"Ref": fn_lid}
               for c in resources(t, "AWS::Lambda::EventInvokeConfig").values())


def test_service_roles_trust_only_this_account_s_resources(any_env: Synthesized) -> None:
    """Issue 23: the flow-logs role trusted the service with no condition, the state machine roles any state machine
    of the account (`stateMachine:*`). Every role a service other than Lambda assumes names the source account, and
    these two their source."""
    c = any_env.config
    want_source = {"vpc-flow-logs.amazonaws.com": f"arn:aws:ec2:{c.region}:{c.account}:vpc-flow-log/*"}
    machines = {f"arn:aws:states:{c.region}:{c.account}:stateMachine:{n}" for n in names.state_machine_names(c)}
    seen = set()
    for stack in ("storage", "network", "pipeline"):
        for lid, role in resources(any_env.template_json(stack), "AWS::IAM::Role").items():
            for st in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
                service = (st.get("Principal") or {}).get("Service")
                if service in (None, "lambda.amazonaws.com"):
                    continue
                seen.add(service)
                condition = st.get("Condition", {})
                assert condition.get("StringEquals", {}).get("aws:SourceAccount") == c.account, (lid, st)
                source = condition.get("ArnLike", {}).get("aws:SourceArn")
                if service == "states.amazonaws.com":
                    assert source in machines, (lid, source)
                    machines.discard(source)
                elif service in want_source:
                    assert source == want_source[service], (lid, source)
    assert machines == set(), "each state machine's role trusts that machine only"
    assert {"vpc-flow-logs.amazonaws.com", "states.amazonaws.com", "sagemaker.amazonaws.com"} <= seen


def test_the_key_s_lambda_and_fsx_statements_are_pinned(dev: Synthesized, prod: Synthesized) -> None:
    """Issue 23: LambdaEnvironment named no encryption context (any function of the account through Lambda), and the
    FSx statement no caller account."""
    for s in (dev, prod):
        (key,) = resources(s.template_json("storage"), "AWS::KMS::Key").values()
        statements = {st["Sid"]: st for st in key["Properties"]["KeyPolicy"]["Statement"]}
        env = statements["LambdaEnvironment"]
        assert set(as_list(env["Action"])) == {"kms:Encrypt", "kms:Decrypt"}
        assert env["Condition"]["ArnLike"] == {"kms:EncryptionContext:aws:lambda:FunctionArn":
                                               f"arn:aws:lambda:{s.config.region}:{s.config.account}:function:"
                                               f"{s.config.prefix}-*"}
        assert env["Condition"]["StringEquals"]["kms:CallerAccount"] == s.config.account
        if "FsxDescribeKey" in statements:
            assert statements["FsxDescribeKey"]["Condition"]["StringEquals"]["kms:CallerAccount"] == s.config.account
    assert "FsxDescribeKey" in {st["Sid"] for st in next(iter(resources(prod.template_json("storage"),
                                                                       "AWS::KMS::Key").values()))[
        "Properties"]["KeyPolicy"]["Statement"]}, "prod has a PERSISTENT FSx file system"
    for fn in resources(dev.template_json("pipeline"), "AWS::Lambda::Function").values():
        name = fn["Properties"].get("FunctionName", f"{dev.config.prefix}-pipeline-<generated>")
        assert name.startswith(f"{dev.config.prefix}-"), name  # covered by the encryption-context pattern
