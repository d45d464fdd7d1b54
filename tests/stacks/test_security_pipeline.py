"""Security guardrails of the synthesized templates: the failed-event path, the orphaned-job rule, the budget, log
groups, the code deployment role and the asynchronous functions' failure destinations."""

from __future__ import annotations

import json
from typing import Any

import pytest
from testkit.policy_walk import as_list
from testkit.synth import Synthesized, bucket_arn, resources

from hfsm_lambda import HANDLER_MODULE
from stacks import names


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
