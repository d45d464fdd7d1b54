"""Creates what the synthesized app defines inside moto, and runs the Lambda code in-process.

`Emulator(assembly).deploy()` walks the templates in deployment order and creates, in the emulated account:
KMS key, S3 buckets (EventBridge notifications on), IAM roles, the SNS topic, the model package group, the
Lambda functions (their code is the synthesized asset, run in this process), the state machines (definitions
from the templates with every reference resolved), the S3-upload rule, and the training-code bundle the
BucketDeployment would copy. Resource types with no behaviour here (VPC, subnets, log groups, policies...)
get stable fake ids so that references to them resolve.

Two moto gaps are closed by small patches, installed by `LambdaRouter.install()`: invoking a function runs
its handler from the code asset (moto without Docker would return a canned answer), and an EventBridge rule
with a Lambda target invokes it (moto's events backend delivers only to logs, SQS and buses).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.machinery
import importlib.util
import io
import json
import os
import sys
import threading
import traceback
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import boto3

from cloud_assembly.intrinsics import Physical, Resolver, references
from cloud_assembly.reader import CloudAssembly, StackArtifact
from local_mode.aws import invocation_env
from local_mode.aws.invocation_env import invocation_environment

FAKE_ID_TYPES = {"AWS::EC2::VPC": "vpc", "AWS::EC2::Subnet": "subnet", "AWS::EC2::SecurityGroup": "sg",
                 "AWS::EC2::RouteTable": "rtb", "AWS::EC2::VPCEndpoint": "vpce", "AWS::EC2::NatGateway": "nat",
                 "AWS::EC2::InternetGateway": "igw", "AWS::FSx::FileSystem": "fs", "AWS::EC2::EIP": "eipalloc"}


@dataclass
class FunctionSpec:
    name: str
    code_dir: Path
    handler: str
    environment: dict[str, str]


class LambdaRouter:
    """Runs the emulated functions' handlers in this process, one invocation at a time."""

    def __init__(self) -> None:
        self.functions: dict[str, FunctionSpec] = {}
        self.invocations: list[tuple[str, Any]] = []
        self._lock = threading.RLock()
        self._patches: list[tuple[Any, str, Any]] = []

    def register(self, spec: FunctionSpec) -> None:
        self.functions[spec.name] = spec

    def invoke(self, name: str, event: Any) -> tuple[Any, bool]:
        """Returns (result, errored); an exception becomes Lambda's {errorType, errorMessage} payload.

        The handler runs with the function's own environment (invocation_env): nothing of it is written to
        the process environment, which the local jobs' threads read at the same time. Invocations are
        serialized (the handlers share one botocore session, which is not safe for concurrent client creation).
        """
        spec = self.functions[name]
        module_name, func_name = spec.handler.rsplit(".", 1)
        with self._lock, invocation_environment(spec.environment):
            self.invocations.append((name, event))
            try:
                handler: Callable[[Any, Any], Any] = getattr(import_from(spec.code_dir, module_name), func_name)
                return handler(event, _Context(name)), False
            except Exception as exc:  # noqa: BLE001 - every handler error becomes the function's error payload
                return {"errorType": type(exc).__name__, "errorMessage": str(exc),
                        "stackTrace": traceback.format_exception(exc)[-5:]}, True

    def install(self) -> None:
        from moto.awslambda.models import LambdaBackend
        from moto.awslambda_simple.models import LambdaSimpleBackend
        from moto.events.models import Rule

        router = self

        def patched(original: Any) -> Any:
            def invoke(backend: Any, function_name: str, qualifier: str | None, body: Any, headers: Any,
                       response_headers: Any) -> Any:
                name = backend.get_function(function_name, qualifier).function_name
                if name not in router.functions:
                    return original(backend, function_name, qualifier, body, headers, response_headers)
                result, errored = router.invoke(name, json.loads(body) if body else {})
                if errored:
                    response_headers["x-amz-function-error"] = "Unhandled"
                return json.dumps(result).encode()
            return invoke

        original_send = Rule.send_to_targets

        def send_to_targets(rule: Any, event: Any, transform_input: bool = True) -> None:
            lambda_targets = [t for t in rule.targets if ":lambda:" in t["Arn"]]
            others = [t for t in rule.targets if t not in lambda_targets]
            if others:
                saved, rule.targets = rule.targets, others
                try:
                    original_send(rule, event, transform_input)
                finally:
                    rule.targets = saved
            if lambda_targets and rule.event_pattern.matches_event(event):
                for target in lambda_targets:
                    router.invoke(target["Arn"].split(":function:", 1)[1].split(":")[0], event)

        self._patches = [(cls, "invoke", cls.__dict__["invoke"]) for cls in (LambdaBackend, LambdaSimpleBackend)]
        self._patches.append((Rule, "send_to_targets", original_send))
        for cls, _, original in self._patches[:2]:
            cls.invoke = patched(original)
        Rule.send_to_targets = send_to_targets
        invocation_env.install()

    def uninstall(self) -> None:
        if self._patches:
            invocation_env.uninstall()
        for owner, attr, original in self._patches:
            setattr(owner, attr, original)
        self._patches = []


class _Context:
    """The parts of LambdaContext the handlers may read."""

    def __init__(self, name: str) -> None:
        self.function_name = name
        self.aws_request_id = hashlib.sha1(os.urandom(8)).hexdigest()
        self.memory_limit_in_mb = 256

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 300_000


# The pipeline stack's outputs (CfnOutput ids) that name what local mode drives.
OUTPUTS = {"fine_tune_arn": "FineTuneStateMachineArn", "tokenizer_arn": "TokenizerStateMachineArn",
           "topic_arn": "NotificationTopicArn", "data_bucket": "DataBucketName",
           "artifacts_bucket": "ArtifactsBucketName"}


@dataclass
class Deployment:
    """What the emulated deployment holds, by purpose: resources named by the stacks' outputs."""

    account: str
    region: str
    outputs: dict[str, str] = field(default_factory=dict)
    buckets: list[str] = field(default_factory=list)
    functions: dict[str, str] = field(default_factory=dict)  # handler name -> function name
    state_machines: dict[str, str] = field(default_factory=dict)  # name -> ARN
    settings: dict[str, Any] = field(default_factory=dict)

    def output(self, purpose: str) -> str:
        name = OUTPUTS[purpose]
        if name not in self.outputs:
            raise KeyError(f"the synthesized app has no output {name} (outputs: {', '.join(sorted(self.outputs))}); "
                           "synthesize it again (make synth)")
        return self.outputs[name]

    @property
    def data_bucket(self) -> str:
        return self.output("data_bucket")

    @property
    def artifacts_bucket(self) -> str:
        return self.output("artifacts_bucket")

    @property
    def fine_tune_arn(self) -> str:
        return self.output("fine_tune_arn")

    @property
    def tokenizer_arn(self) -> str:
        return self.output("tokenizer_arn")

    @property
    def topic_arn(self) -> str:
        return self.output("topic_arn")


def _is_pipeline_handler(code_dir: Path, module: str) -> bool:
    """This project's functions run `<package>.handlers.<function>` from their asset (lambda/handlers.py); CDK's
    own providers (other modules) are created but never run here."""
    return module.rpartition(".")[2] == "handlers" and (code_dir / Path(*module.split("."))).with_suffix(".py").is_file()


def import_from(code_dir: Path, module_name: str) -> ModuleType:
    """`module_name` (e.g. hfsm_lambda.handlers) with its top-level package found in the function's code
    directory, as the Lambda runtime finds it in /var/task, without adding the directory to the import path. A
    package already imported in this process (the checkout's, in tests) is used as it is: one copy of each module."""
    top = module_name.partition(".")[0]
    if top not in sys.modules:
        spec = importlib.machinery.PathFinder.find_spec(top, [str(code_dir)])
        if spec is None or spec.loader is None:
            raise ModuleNotFoundError(f"no module {top!r} in the function's code {code_dir}", name=top)
        module = importlib.util.module_from_spec(spec)
        sys.modules[top] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[top]
            raise
    return importlib.import_module(module_name)


class Emulator:
    """Deploys a cloud assembly into moto (call inside `moto.mock_aws`)."""

    def __init__(self, assembly: CloudAssembly, *, settings_overrides: dict[str, Any] | None = None) -> None:
        self.assembly = assembly
        self.settings_overrides = settings_overrides or {}
        self.router = LambdaRouter()
        self.exports: dict[str, Any] = {}

    def deploy(self) -> Deployment:
        first = self.assembly.stacks[0]
        dep = Deployment(account=first.account, region=first.region)
        self.router.install()
        for stack in self.assembly.stacks:
            self._deploy_stack(stack, dep)
        return dep

    def close(self) -> None:
        self.router.uninstall()

    # --- one stack --------------------------------------------------------------------------------------
    def _deploy_stack(self, stack: StackArtifact, dep: Deployment) -> None:
        resolver = Resolver(account=stack.account, region=stack.region, stack_name=stack.name,
                            exports=self.exports)
        resources = stack.template.get("Resources", {})
        for lid in _creation_order(resources):
            res = resources[lid]
            resolver.resources[lid] = self._create(lid, res, resolver, stack, dep)
        for name, output in stack.template.get("Outputs", {}).items():
            value = resolver.resolve(output["Value"])
            dep.outputs[name] = value
            if "Export" in output:
                self.exports[resolver.resolve(output["Export"]["Name"])] = value

    def _client(self, service: str, stack: StackArtifact) -> Any:
        return boto3.client(service, region_name=stack.region)

    def _create(self, lid: str, res: dict[str, Any], r: Resolver, stack: StackArtifact,
                dep: Deployment) -> Physical:
        kind = res["Type"]
        props = r.resolve(res.get("Properties", {}))
        arn_base = f"arn:aws:{{}}:{stack.region}:{stack.account}"
        if kind == "AWS::KMS::Key":
            meta = self._client("kms", stack).create_key(Description=props.get("Description", lid))["KeyMetadata"]
            return Physical(meta["KeyId"], {"Arn": meta["Arn"]})
        if kind == "AWS::S3::Bucket":
            name = props.get("BucketName") or f"{stack.name}-{lid}".lower()[:63]
            s3 = self._client("s3", stack)
            s3.create_bucket(Bucket=name) if stack.region == "us-east-1" else s3.create_bucket(
                Bucket=name, CreateBucketConfiguration={"LocationConstraint": stack.region})
            if props.get("VersioningConfiguration", {}).get("Status") == "Enabled":
                s3.put_bucket_versioning(Bucket=name, VersioningConfiguration={"Status": "Enabled"})
            if props.get("NotificationConfiguration", {}).get("EventBridgeConfiguration", {}).get(
                    "EventBridgeEnabled"):
                s3.put_bucket_notification_configuration(
                    Bucket=name, NotificationConfiguration={"EventBridgeConfiguration": {}})
            dep.buckets.append(name)
            return Physical(name, {"Arn": f"arn:aws:s3:::{name}", "DomainName": f"{name}.s3.amazonaws.com"})
        if kind == "AWS::IAM::Role":
            name = props.get("RoleName") or f"{stack.name}-{lid}"[:64]
            doc = json.dumps(props.get("AssumeRolePolicyDocument", {}))
            arn = self._client("iam", stack).create_role(RoleName=name, AssumeRolePolicyDocument=doc)["Role"]["Arn"]
            return Physical(name, {"Arn": arn})
        if kind == "AWS::SNS::Topic":
            arn = self._client("sns", stack).create_topic(Name=props.get("TopicName", lid))["TopicArn"]
            return Physical(arn, {"TopicName": props.get("TopicName", lid)})
        if kind == "AWS::SQS::Queue":
            name = props.get("QueueName") or f"{stack.name}-{lid}"[:80]
            url = self._client("sqs", stack).create_queue(QueueName=name)["QueueUrl"]
            return Physical(url, {"Arn": arn_base.format("sqs") + f":{name}", "QueueName": name, "QueueUrl": url})
        if kind == "AWS::SageMaker::ModelPackageGroup":
            name = props["ModelPackageGroupName"]
            arn = self._client("sagemaker", stack).create_model_package_group(
                ModelPackageGroupName=name)["ModelPackageGroupArn"]
            return Physical(name, {"ModelPackageGroupArn": arn})
        if kind == "AWS::Lambda::Function":
            return self._function(lid, props, stack, dep)
        if kind == "AWS::StepFunctions::StateMachine":
            name = props["StateMachineName"]
            arn = self._client("stepfunctions", stack).create_state_machine(
                name=name, definition=props["DefinitionString"], roleArn=props["RoleArn"],
                type=props.get("StateMachineType", "STANDARD"))["stateMachineArn"]
            dep.state_machines[name] = arn
            return Physical(arn, {"Name": name, "Arn": arn})
        if kind == "AWS::Events::Rule":
            events = self._client("events", stack)
            name = props.get("Name", lid)
            arn = events.put_rule(Name=name, EventPattern=json.dumps(props["EventPattern"]),
                                  State=props.get("State", "ENABLED"))["RuleArn"]
            events.put_targets(Rule=name, Targets=[{"Id": t["Id"], "Arn": t["Arn"]} for t in props["Targets"]])
            return Physical(name, {"Arn": arn})
        if kind == "Custom::CDKBucketDeployment":
            self._bucket_deployment(props, stack)
            return Physical(f"{lid}-deployment")
        prefix = FAKE_ID_TYPES.get(kind)
        fake = f"{prefix}-{hashlib.sha1(f'{stack.name}/{lid}'.encode()).hexdigest()[:17]}" if prefix else lid
        attrs = {"Arn": arn_base.format(kind.split("::")[1].lower()) + f":{lid}", "GroupId": fake, "VpcId": fake,
                 "MountName": "localfsx", "LustreMountName": "localfsx", "DNSName": f"{fake}.local"}
        return Physical(fake, attrs)

    def _function(self, lid: str, props: dict[str, Any], stack: StackArtifact, dep: Deployment) -> Physical:
        name = props.get("FunctionName") or f"{stack.name}-{lid}"[:64]
        env = dict(props.get("Environment", {}).get("Variables", {}))
        if "PIPELINE_SETTINGS" in env:
            settings = {**json.loads(env["PIPELINE_SETTINGS"]), **self.settings_overrides}
            env["PIPELINE_SETTINGS"] = json.dumps(settings)
            dep.settings = settings
        code = props["Code"]
        code_dir = self.assembly.asset_path(code["S3Key"]) if "S3Key" in code else None
        if code_dir is None or not code_dir.is_dir():
            code_dir = None  # CDK's own providers (not this project's handlers): created but never run here
        zipped = io.BytesIO()
        with zipfile.ZipFile(zipped, "w") as zf:
            zf.writestr("placeholder.py", "# the emulator runs the synthesized asset in-process\n")
        arn = self._client("lambda", stack).create_function(
            FunctionName=name, Runtime="python3.12", Role=props["Role"], Handler=props["Handler"],
            Code={"ZipFile": zipped.getvalue()}, Environment={"Variables": env},
            Timeout=int(props.get("Timeout", 60)))["FunctionArn"]
        module, _, function = props["Handler"].rpartition(".")
        if code_dir is not None and _is_pipeline_handler(code_dir, module):
            # What the Lambda runtime adds to a function's own variables.
            runtime_env = {"AWS_REGION": stack.region, "AWS_DEFAULT_REGION": stack.region,
                           "AWS_LAMBDA_FUNCTION_NAME": name}
            self.router.register(FunctionSpec(name=name, code_dir=code_dir, handler=props["Handler"],
                                              environment={**env, **runtime_env}))
            dep.functions[function] = name
        return Physical(name, {"Arn": arn})

    def _bucket_deployment(self, props: dict[str, Any], stack: StackArtifact) -> None:
        """What CDK's deployment provider does at deploy time: copy the source asset under the prefix."""
        s3 = self._client("s3", stack)
        bucket, prefix = props["DestinationBucketName"], props.get("DestinationBucketKeyPrefix", "")
        for key in props["SourceObjectKeys"]:
            source = self.assembly.asset_path(key)
            if source.is_dir():
                copy_tree_to_s3(s3, source, bucket, prefix)


def _creation_order(resources: dict[str, Any]) -> list[str]:
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(lid: str) -> None:
        if state.get(lid) == 2:
            return
        if state.get(lid) == 1:
            return  # a cycle through DependsOn/Ref: CloudFormation would reject it; keep going
        state[lid] = 1
        res = resources[lid]
        deps = references(res.get("Properties", {})) | set(_as_list(res.get("DependsOn", [])))
        for d in sorted(deps):
            if d in resources:
                visit(d)
        state[lid] = 2
        order.append(lid)

    for lid in resources:
        visit(lid)
    return order


def _as_list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else [v]


def copy_tree_to_s3(s3: Any, folder: Path, bucket: str, prefix: str) -> list[str]:
    keys = []
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        key = f"{prefix}{path.relative_to(folder).as_posix()}"
        s3.put_object(Bucket=bucket, Key=key, Body=path.read_bytes())
        keys.append(key)
    return keys

