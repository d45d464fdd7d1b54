"""A pipeline Lambda (stacks/pipeline_functions.PipelineFunction), built alone in a bare stack with a bare key (in
a stack of its own, as the storage stack's is), inline code and a bare queue: runtime, handler, tracing, limits,
its own role and log group, the encrypted environment, and the failure path of an asynchronously invoked one.

Which functions the pipeline has, the settings handed to them and who invokes them are wiring:
tests/stacks/test_pipeline_stack.py, test_security_pipeline.py, test_policy_walk.py. The asset's contents:
tests/lambda/test_lambda_asset.py."""

from __future__ import annotations

import json
from dataclasses import dataclass

import aws_cdk as cdk
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_sqs as sqs
from aws_cdk.assertions import Template
from testkit.constructs import Built, bare_app, bare_key, env_config, env_fixtures
from testkit.synth import as_list, policy_statements, resources

from hfsm_lambda import HANDLER_MODULE
from stacks import names
from stacks.pipeline_functions import PipelineFunction

ENVIRONMENT = {"PIPELINE_SETTINGS": "{}", "LOG_LEVEL": "INFO"}


@dataclass
class FunctionsBuilt(Built):
    stack: cdk.Stack
    sync: PipelineFunction  # prepare: invoked by the state machines
    async_: PipelineFunction  # trigger: an EventBridge target, with a failure queue

    def function(self, handler: str) -> tuple[str, dict]:
        (lid,) = [k for k, f in resources(self.json, "AWS::Lambda::Function").items()
                  if f["Properties"]["Handler"] == f"{HANDLER_MODULE}.{handler}"]
        return lid, self.json["Resources"][lid]["Properties"]

    def logical_id(self, construct: object) -> str:
        return self.stack.resolve(self.stack.get_logical_id(construct.node.default_child))


def _build(name: str) -> FunctionsBuilt:
    config = env_config(name)
    app, env = bare_app(config)
    key = bare_key(app, env)
    stack = cdk.Stack(app, "Functions", env=env)
    code = lambda_.Code.from_inline("def prepare(event, context):\n    return event\n")
    queue = sqs.Queue(stack, "FailedEvents", enforce_ssl=True)
    sync = PipelineFunction(
        stack, "Prepare", config=config, handler="prepare", code=code, key=key, environment=ENVIRONMENT,
        statements=[iam.PolicyStatement(sid="ReadSpecs", actions=["s3:GetObject"],
                                        resources=["arn:aws:s3:::bucket/runs/*"])],
        description="Validate a run spec")
    async_ = PipelineFunction(
        stack, "Trigger", config=config, handler="trigger", code=code, key=key, environment=ENVIRONMENT,
        statements=[], timeout_s=30, memory_mb=128, on_failure=queue)
    return FunctionsBuilt(config, sync, Template.from_stack(stack), stack, sync, async_)


dev, prod, any_env = env_fixtures(_build)


def test_functions_run_the_handler_traced_on_arm_with_its_limits(any_env: FunctionsBuilt) -> None:
    for handler, timeout, memory in (("prepare", 60, 256), ("trigger", 30, 128)):
        _, p = any_env.function(handler)
        # from test_pipeline_stack.py's test_one_function_per_handler_with_tracing_and_own_role
        assert p["TracingConfig"] == {"Mode": "Active"}
        assert p["Runtime"] == "python3.14"
        assert p["FunctionName"] == names.function_name(any_env.config, handler)
        assert p["Architectures"] == ["arm64"]
        assert (p["Timeout"], p["MemorySize"]) == (timeout, memory)
        assert p["Environment"]["Variables"] == ENVIRONMENT


def test_environment_is_encrypted_with_the_given_key(any_env: FunctionsBuilt) -> None:
    for handler in ("prepare", "trigger"):
        _, p = any_env.function(handler)
        # The key comes from another stack (the storage stack's, here a bare one): an import, never a new key.
        assert "KmsKeyArn" in p and "Fn::ImportValue" in json.dumps(p["KmsKeyArn"])
    assert not resources(any_env.json, "AWS::KMS::Key")


def test_each_function_has_its_own_named_role_with_its_statements_and_its_logs(any_env: FunctionsBuilt) -> None:
    c = any_env.config
    roles = resources(any_env.json, "AWS::IAM::Role")
    assert len(roles) == 2
    for handler, construct, sids in (("prepare", any_env.sync, {"WriteOwnLogs", "ReadSpecs"}),
                                     ("trigger", any_env.async_, {"WriteOwnLogs", "SendFailedEvents"})):
        _, p = any_env.function(handler)
        role_lid = any_env.logical_id(construct.role)
        assert p["Role"] == {"Fn::GetAtt": [role_lid, "Arn"]}
        role = roles[role_lid]["Properties"]
        assert role["RoleName"] == names.function_role_name(c, handler)
        assert "ManagedPolicyArns" not in role
        (trust,) = role["AssumeRolePolicyDocument"]["Statement"]
        assert trust["Principal"] == {"Service": "lambda.amazonaws.com"}
        statements = [st for lid, st in policy_statements(any_env.json)
                      if {"Ref": role_lid} in any_env.json["Resources"][lid]["Properties"].get("Roles", [])]
        by_sid = {st.get("Sid"): st for st in statements}
        assert set(by_sid) == sids | {None}
        # Tracing: CDK's X-Ray statement, the one without a sid (X-Ray has no resource-level permissions).
        assert set(as_list(by_sid[None]["Action"])) == {"xray:PutTraceSegments", "xray:PutTelemetryRecords"}
        logs = by_sid["WriteOwnLogs"]
        assert set(as_list(logs["Action"])) == {"logs:CreateLogStream", "logs:PutLogEvents"}
        log_lid = any_env.logical_id(construct.log_group)
        assert logs["Resource"] == {"Fn::GetAtt": [log_lid, "Arn"]}
        assert p["LoggingConfig"]["LogGroup"] == {"Ref": log_lid}


def test_log_groups_are_named_encrypted_and_expire(dev: FunctionsBuilt, prod: FunctionsBuilt) -> None:
    for s in (dev, prod):
        groups = resources(s.json, "AWS::Logs::LogGroup")
        assert {g["Properties"]["LogGroupName"] for g in groups.values()} == {
            names.function_log_group(s.config, h) for h in ("prepare", "trigger")}
        for g in groups.values():
            assert "Fn::ImportValue" in json.dumps(g["Properties"]["KmsKeyId"])
            assert g["Properties"]["RetentionInDays"] == s.config.log_retention_days
            assert g["DeletionPolicy"] == ("Retain" if s.config.retain else "Delete")


def test_only_an_async_function_sends_its_failed_events_to_the_queue(any_env: FunctionsBuilt) -> None:
    queue_lid = next(iter(resources(any_env.json, "AWS::SQS::Queue")))
    sync_lid, _ = any_env.function("prepare")
    async_lid, _ = any_env.function("trigger")
    (config,) = resources(any_env.json, "AWS::Lambda::EventInvokeConfig").values()
    p = config["Properties"]
    assert p["FunctionName"] == {"Ref": async_lid} and p["Qualifier"] == "$LATEST"
    assert p["DestinationConfig"] == {"OnFailure": {"Destination": {"Fn::GetAtt": [queue_lid, "Arn"]}}}
    assert p["MaximumRetryAttempts"] == 2 and p["MaximumEventAgeInSeconds"] == 6 * 3600
    # Lambda checks at create time that the role may send to the queue: the config waits for the role's policy.
    role = any_env.async_.role
    policy_lid = any_env.logical_id(role.node.find_child("DefaultPolicy"))
    assert set(config["DependsOn"]) >= {any_env.logical_id(role), policy_lid}
    send = next(st for _, st in policy_statements(any_env.json) if st.get("Sid") == "SendFailedEvents")
    assert send["Action"] == "sqs:SendMessage" and send["Resource"] == {"Fn::GetAtt": [queue_lid, "Arn"]}
    assert sync_lid not in json.dumps(resources(any_env.json, "AWS::Lambda::EventInvokeConfig"))
