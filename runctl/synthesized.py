"""An environment's pipeline settings as `cdk synth` wrote them (cdk.out), resolved without any AWS call.

`runctl plan SPEC --env NAME` plans against these: the Prepare function's `PIPELINE_SETTINGS` in the pipeline
stack's template, a `Fn::Join` of literals and references. A reference is resolved the way CloudFormation will
(a role's ARN from its name, a topic's ARN from its name, a bucket's name, another stack's export); the ids AWS
assigns only at deploy time (the KMS key id, subnet and security group ids) become `<...>` placeholders that say
what they stand for. cdk.out is read with the reader local mode uses too (cloud_assembly/reader.py, standard library),
which needs no AWS either.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from cloud_assembly.intrinsics import Resolver, UnresolvedReference
from cloud_assembly.reader import AssemblyError, CloudAssembly, StackArtifact
from hfsm_lambda import HANDLER_MODULE
from runctl.core import RunctlError

PLACEHOLDER = "<{what} of {stack}/{lid}, assigned at deploy>"
PREPARE_HANDLER = f"{HANDLER_MODULE}.prepare"


class _Synthesized(Resolver):
    """Resolves references from the templates alone (names given in properties) or to a placeholder."""

    def __init__(self, assembly: CloudAssembly, stack: StackArtifact) -> None:
        super().__init__(account=stack.account, region=stack.region, stack_name=stack.name)
        self.assembly, self.stack = assembly, stack
        self.exports = _LazyExports(assembly)

    def _resource(self, lid: str) -> tuple[str, dict[str, Any]]:
        resource = self.stack.template.get("Resources", {}).get(lid)
        if resource is None:
            raise UnresolvedReference(lid)
        return resource["Type"], {k: self.resolve(v) for k, v in (resource.get("Properties") or {}).items()}

    def _placeholder(self, what: str, lid: str) -> str:
        return PLACEHOLDER.format(what=what, lid=lid, stack=self.stack.name)

    def ref(self, name: str) -> str:
        if name.startswith("AWS::"):
            return self.pseudo(name)
        kind, props = self._resource(name)
        arn = self._arn(kind, props)
        if kind in ("AWS::SNS::Topic", "AWS::StepFunctions::StateMachine") and arn:
            return arn  # Ref of these is their ARN
        named = next((v for k, v in props.items() if k.endswith("Name") and isinstance(v, str)), None)
        return named or self._placeholder(kind.rsplit("::", 1)[-1].lower() + " id", name)

    def get_att(self, lid: str, attr: str) -> str:
        kind, props = self._resource(lid)
        if attr == "Arn" and (arn := self._arn(kind, props)):
            return arn
        if kind == "AWS::KMS::Key" and attr == "Arn":
            return f"arn:aws:kms:{self.region}:{self.account}:key/{self._placeholder('KMS key id', lid)}"
        return self._placeholder(f"{kind.rsplit('::', 1)[-1]} {attr}", lid)

    def _arn(self, kind: str, props: dict[str, Any]) -> str | None:
        region, account = self.region, self.account
        if kind == "AWS::IAM::Role" and props.get("RoleName"):
            return f"arn:aws:iam::{account}:role/{props['RoleName']}"
        if kind == "AWS::SNS::Topic" and props.get("TopicName"):
            return f"arn:aws:sns:{region}:{account}:{props['TopicName']}"
        if kind == "AWS::StepFunctions::StateMachine" and props.get("StateMachineName"):
            return f"arn:aws:states:{region}:{account}:stateMachine:{props['StateMachineName']}"
        if kind == "AWS::S3::Bucket" and props.get("BucketName"):
            return f"arn:aws:s3:::{props['BucketName']}"
        return None


class _LazyExports(dict):
    """Another stack's export, resolved when asked for (Fn::ImportValue)."""

    def __init__(self, assembly: CloudAssembly) -> None:
        super().__init__()
        self._where = {}
        for stack in assembly.stacks:
            for output in (stack.template.get("Outputs") or {}).values():
                name = (output.get("Export") or {}).get("Name")
                if isinstance(name, str):
                    self._where[name] = (stack, output["Value"])
        self._assembly = assembly

    def __contains__(self, name: object) -> bool:
        return name in self._where

    def __getitem__(self, name: str) -> Any:
        stack, value = self._where[name]
        return _Synthesized(self._assembly, stack).resolve(value)


def settings_text(cdk_out: Path, environment: str) -> str:
    """The PIPELINE_SETTINGS JSON of `environment` from cdk.out, every reference resolved (or a placeholder)."""
    try:
        assembly = CloudAssembly(cdk_out)
    except AssemblyError as err:
        raise RunctlError(f"{err}: {cdk_out} is missing or incomplete; run `make synth ENV={environment}` (no AWS "
                          "account needed), or pass --deployed to read the deployed stack's settings") from err
    found = assembly.environment_name
    if found != environment:
        raise RunctlError(f"{cdk_out} holds environment {found!r}, not {environment!r}: run `make synth "
                          f"ENV={environment}` (it replaces cdk.out), or plan with --env {found}")
    for stack in assembly.stacks:
        for resource in (stack.template.get("Resources") or {}).values():
            props = resource.get("Properties") or {}
            variables = (props.get("Environment") or {}).get("Variables") or {}
            if resource.get("Type") == "AWS::Lambda::Function" and str(props.get("Handler", "")).endswith(
                    PREPARE_HANDLER) and "PIPELINE_SETTINGS" in variables:
                value = _Synthesized(assembly, stack).resolve(variables["PIPELINE_SETTINGS"])
                return value if isinstance(value, str) else json.dumps(value)
    raise RunctlError(f"{cdk_out} has no Prepare function with PIPELINE_SETTINGS; run `make synth "
                      f"ENV={environment}` again")
