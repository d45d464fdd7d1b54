"""Resolves the CloudFormation intrinsic functions CDK writes (Ref, Fn::GetAtt, Fn::Join, Fn::Select,
Fn::Split, Fn::Sub, Fn::ImportValue) against the physical ids the emulator created."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any


class UnresolvedReference(KeyError):
    """A reference to a resource the emulator has not created (yet)."""


@dataclass
class Physical:
    ref: str
    attributes: dict[str, str] = field(default_factory=dict)


@dataclass
class Resolver:
    account: str
    region: str
    stack_name: str
    resources: dict[str, Physical] = field(default_factory=dict)
    exports: dict[str, Any] = field(default_factory=dict)

    def pseudo(self, name: str) -> str:
        return {"AWS::Region": self.region, "AWS::AccountId": self.account, "AWS::Partition": "aws",
                "AWS::URLSuffix": "amazonaws.com", "AWS::StackName": self.stack_name,
                "AWS::NoValue": ""}[name]

    def ref(self, name: str) -> str:
        if name.startswith("AWS::"):
            return self.pseudo(name)
        if name not in self.resources:
            raise UnresolvedReference(name)
        return self.resources[name].ref

    def get_att(self, lid: str, attr: str) -> str:
        if lid not in self.resources:
            raise UnresolvedReference(lid)
        phys = self.resources[lid]
        if attr not in phys.attributes:
            raise UnresolvedReference(f"{lid}.{attr}")
        return phys.attributes[attr]

    def resolve(self, value: Any) -> Any:
        if isinstance(value, list):
            return [self.resolve(v) for v in value]
        if not isinstance(value, dict):
            return value
        if len(value) == 1:
            (key, arg), = value.items()
            if key == "Ref":
                return self.ref(arg)
            if key == "Fn::GetAtt":
                lid, attr = arg if isinstance(arg, list) else arg.split(".", 1)
                return self.get_att(lid, attr)
            if key == "Fn::Join":
                sep, parts = arg
                return sep.join(str(p) for p in self.resolve(parts))
            if key == "Fn::Select":
                index, items = arg
                return self.resolve(items)[int(self.resolve(index))]
            if key == "Fn::Split":
                sep, text = arg
                return str(self.resolve(text)).split(sep)
            if key == "Fn::ImportValue":
                name = self.resolve(arg)
                if name not in self.exports:
                    raise UnresolvedReference(f"export {name}")
                return self.exports[name]
            if key == "Fn::Sub":
                return self._sub(arg)
        return {k: self.resolve(v) for k, v in value.items()}

    def _sub(self, arg: Any) -> str:
        text, variables = (arg, {}) if isinstance(arg, str) else (arg[0], self.resolve(arg[1]))

        def one(match: re.Match[str]) -> str:
            name = match.group(1)
            if name in variables:
                return str(variables[name])
            if "." in name:
                return self.get_att(*name.split(".", 1))
            return self.ref(name)

        return re.sub(r"\$\{([^!}][^}]*)\}", one, text)


def references(value: Any) -> set[str]:
    """Logical ids a template value refers to (to create resources in dependency order)."""
    out: set[str] = set()
    if isinstance(value, list):
        for v in value:
            out |= references(v)
    elif isinstance(value, dict):
        if len(value) == 1 and "Ref" in value and not str(value["Ref"]).startswith("AWS::"):
            out.add(value["Ref"])
        elif len(value) == 1 and "Fn::GetAtt" in value:
            arg = value["Fn::GetAtt"]
            out.add(arg[0] if isinstance(arg, list) else arg.split(".", 1)[0])
        elif len(value) == 1 and "Fn::Sub" in value:
            arg = value["Fn::Sub"]
            text = arg if isinstance(arg, str) else arg[0]
            out |= {m.split(".", 1)[0] for m in re.findall(r"\$\{([^!}][^}]*)\}", text) if not m.startswith("AWS::")}
            if not isinstance(arg, str):
                out |= references(arg[1])
        else:
            for v in value.values():
                out |= references(v)
    return out
