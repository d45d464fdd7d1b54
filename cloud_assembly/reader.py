"""Reads what `cdk synth` wrote (cdk.out): stacks in deployment order, templates, and asset files.

Local mode's and runctl's only interface to the infrastructure: neither imports `stacks/`.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any


class AssemblyError(RuntimeError):
    """cdk.out is missing or is not what `cdk synth` writes; the message says how to fix it."""


@dataclass(frozen=True)
class StackArtifact:
    name: str
    template: dict[str, Any]
    account: str
    region: str


class CloudAssembly:
    def __init__(self, outdir: Path) -> None:
        self.outdir = Path(outdir)
        manifest_path = self.outdir / "manifest.json"
        if not manifest_path.exists():
            raise AssemblyError(f"{manifest_path} not found: run `make synth ENV=dev` first")
        manifest = json.loads(manifest_path.read_text())
        artifacts = manifest["artifacts"]
        stacks = {name: a for name, a in artifacts.items() if a["type"] == "aws:cloudformation:stack"}
        if not stacks:
            raise AssemblyError(f"{manifest_path} holds no stacks")
        self.stacks = [self._stack(name, stacks[name]) for name in _deploy_order(stacks)]
        self.assets: dict[str, Path] = {}
        for a in artifacts.values():
            if a["type"] != "cdk:asset-manifest":
                continue
            files = json.loads((self.outdir / a["properties"]["file"]).read_text()).get("files", {})
            for entry in files.values():
                for dest in entry["destinations"].values():
                    self.assets[dest["objectKey"]] = self.outdir / entry["source"]["path"]

    def _stack(self, name: str, artifact: dict[str, Any]) -> StackArtifact:
        template = json.loads((self.outdir / artifact["properties"]["templateFile"]).read_text())
        env = artifact["environment"].removeprefix("aws://")
        account, region = env.split("/", 1)
        return StackArtifact(name=name, template=template, account=account, region=region)

    @property
    def environment_name(self) -> str:
        """The environment the stacks were synthesized for (`<project>-<env>-<part>` stack names)."""
        prefixes = {s.name.rsplit("-", 1)[0] for s in self.stacks}
        return prefixes.pop().rsplit("-", 1)[-1] if len(prefixes) == 1 else "?"

    def data_bucket_name(self) -> str:
        """The data bucket's name, as the Lambdas' PIPELINE_SETTINGS name it (a literal in the template)."""
        for stack in self.stacks:
            for resource in stack.template.get("Resources", {}).values():
                env = resource.get("Properties", {}).get("Environment", {}).get("Variables", {})
                value = env.get("PIPELINE_SETTINGS")
                text = json.dumps(value)  # a Fn::Join of literals and references: the literal parts suffice
                match = re.search(r'\\"data_bucket\\":\\"([a-z0-9.-]+)\\"', text)
                if match:
                    return match.group(1)
        raise AssemblyError(f"{self.outdir}: no Lambda with PIPELINE_SETTINGS naming the data bucket; synthesize "
                            "again (`make synth ENV=dev`)")

    def stack(self, suffix: str) -> StackArtifact:
        (match,) = [s for s in self.stacks if s.name.endswith(f"-{suffix}")]
        return match

    def asset_path(self, object_key: str) -> Path:
        try:
            return self.assets[object_key]
        except KeyError as exc:
            raise AssemblyError(f"asset {object_key} is not in {self.outdir}: synthesize again") from exc


def _deploy_order(stacks: dict[str, dict[str, Any]]) -> list[str]:
    order: list[str] = []

    def visit(name: str, seen: tuple[str, ...]) -> None:
        if name in order:
            return
        if name in seen:
            raise AssemblyError(f"stack dependency cycle through {name}")
        for dep in stacks[name].get("dependencies", []):
            if dep in stacks:
                visit(dep, (*seen, name))
        order.append(name)

    for name in sorted(stacks):
        visit(name, ())
    return order
