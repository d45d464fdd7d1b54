"""Every policy statement of the synthesized templates, normalized for comparison with tests/testkit/principal_calls.py.

Identity policies are keyed by the principal's role name (fixed names) or, for the few roles CDK names itself
(state machines, VPC flow logs), by the logical-id stem. Resources that are CloudFormation intrinsics become
`ref:<logical id>` (or `import:<export>`), so a table can name them without knowing synthesized ids.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

_HASH = re.compile(r"[0-9A-F]{8}$")


def _stem(logical_id: str) -> str:
    """CDK logical ids end in an 8-hex hash: `StateMachinesFineTuneRole1A2B3C4D` -> `StateMachinesFineTuneRole`."""
    return _HASH.sub("", logical_id)


def normalize(value: Any) -> str:
    """A resource (string or intrinsic) as one comparable string."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        if "Fn::GetAtt" in value:
            return f"ref:{_stem(value['Fn::GetAtt'][0])}"
        if "Ref" in value:
            return f"ref:{_stem(value['Ref'])}"
        if "Fn::ImportValue" in value:
            name = value["Fn::ImportValue"]
            return f"import:{name.split(':', 1)[-1] if isinstance(name, str) else json.dumps(name)}"
        if "Fn::Join" in value:
            sep, parts = value["Fn::Join"]
            return sep.join(normalize(p) for p in parts)
        if "Fn::Sub" in value:
            return re.sub(r"\$\{AWS::[A-Za-z]+\}", "<pseudo>", value["Fn::Sub"])
    return json.dumps(value, sort_keys=True)


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


@dataclass(frozen=True)
class Grant:
    template: str  # storage | network | pipeline
    policy: str  # logical id of the policy (or resource holding it)
    principal: str  # role name / logical-id stem, or the resource policy's owner "resource:<stem>"
    sid: str
    effect: str
    action: str
    resource: str
    statement: dict[str, Any]


def _role_names(template: dict[str, Any]) -> dict[str, str]:
    out = {}
    for lid, res in template["Resources"].items():
        if res["Type"] == "AWS::IAM::Role":
            name = res["Properties"].get("RoleName")
            out[lid] = name if isinstance(name, str) else _stem(lid)
    return out


def identity_grants(name: str, template: dict[str, Any]) -> list[Grant]:
    roles = _role_names(template)
    out = []
    for lid, res in template["Resources"].items():
        if res["Type"] == "AWS::IAM::Policy":
            owners = [roles.get(r.get("Ref", ""), normalize(r)) for r in res["Properties"].get("Roles", [])]
            docs = [res["Properties"]["PolicyDocument"]]
        elif res["Type"] == "AWS::IAM::Role":
            owners = [roles[lid]]
            docs = [p["PolicyDocument"] for p in res["Properties"].get("Policies", [])]
        else:
            continue
        for doc in docs:
            for st in doc["Statement"]:
                for owner in owners:
                    for action in as_list(st["Action"]):
                        for resource in as_list(st.get("Resource", "*")):
                            out.append(Grant(name, lid, owner, st.get("Sid", ""), st.get("Effect", "Allow"), action,
                                             normalize(resource), st))
    return out


RESOURCE_POLICIES = {"AWS::S3::BucketPolicy": "PolicyDocument", "AWS::KMS::Key": "KeyPolicy",
                     "AWS::SNS::TopicPolicy": "PolicyDocument", "AWS::SQS::QueuePolicy": "PolicyDocument",
                     "AWS::EC2::VPCEndpoint": "PolicyDocument"}


def resource_statements(name: str, template: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    """(resource type, logical id stem, statement) of every resource policy."""
    out = []
    for lid, res in template["Resources"].items():
        key = RESOURCE_POLICIES.get(res["Type"])
        doc = res.get("Properties", {}).get(key) if key else None
        if doc:
            out.extend((res["Type"], _stem(lid), st) for st in doc["Statement"])
    return out
