"""Helpers for the infrastructure tests: in-process synthesis and template queries."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from aws_cdk.assertions import Template

from stacks.app_builder import ProjectApp, build_app, cdk_json_context


class Synthesized:
    def __init__(self, project: ProjectApp, outdir: Path) -> None:
        self.project = project
        self.config = project.config
        self.assembly = project.app.synth()
        self.outdir = outdir
        self.templates = {name: Template.from_stack(getattr(project, name))
                          for name in ("storage", "network", "pipeline")}

    def template_json(self, name: str) -> dict[str, Any]:
        return self.templates[name].to_json()


def synth(tmp_path_factory: pytest.TempPathFactory, env: str, overrides: dict[str, Any] | None = None,
          *, acknowledge: bool = True) -> Synthesized:
    context = copy.deepcopy(cdk_json_context())
    if overrides:
        context["environments"][env].update(overrides)
    outdir = tmp_path_factory.mktemp(f"cdk-{env}")
    return Synthesized(build_app(context=context, env_name=env, outdir=str(outdir), acknowledge=acknowledge), outdir)


def nag_findings(outdir: Path) -> set[tuple[str, str]]:
    """(construct path, rule) of every cdk-nag finding in a synth's validation report."""
    report_file = outdir / "validation-report.json"
    if not report_file.exists():
        return set()
    report = json.loads(report_file.read_text())
    return {(c["constructPath"], v["ruleName"]) for p in report.get("pluginReports", [])
            for v in p.get("violations", []) for c in v["violatingConstructs"]}



def resources(template: dict[str, Any], cfn_type: str) -> dict[str, dict[str, Any]]:
    return {k: v for k, v in template["Resources"].items() if v["Type"] == cfn_type}


def policy_statements(template: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(logical id, statement) of every identity policy (inline and AWS::IAM::Policy) in a template."""
    out = []
    for lid, res in template["Resources"].items():
        if res["Type"] == "AWS::IAM::Policy":
            docs = [res["Properties"]["PolicyDocument"]]
        elif res["Type"] == "AWS::IAM::Role":
            docs = [p["PolicyDocument"] for p in res["Properties"].get("Policies", [])]
        else:
            continue
        for doc in docs:
            out.extend((lid, st) for st in doc["Statement"])
    return out


def sagemaker_role(template: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    """(logical id, identity-policy statements) of the one role SageMaker's jobs assume in a template (not the
    MLflow tracking server's own role, stacks/tracking_server.py)."""
    (lid,) = [k for k, r in resources(template, "AWS::IAM::Role").items()
              if r["Properties"]["AssumeRolePolicyDocument"]["Statement"][0]["Principal"].get("Service")
              == "sagemaker.amazonaws.com" and not str(r["Properties"].get("RoleName", "")).endswith("-mlflow-server")]
    return lid, [st for plid, st in policy_statements(template) if lid in json.dumps(
        template["Resources"][plid]["Properties"].get("Roles", [])) or plid == lid]


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def bucket_arn(s: Synthesized, purpose: str) -> str:
    return f"arn:aws:s3:::{s.config.prefix}-{purpose}-{s.config.account}-{s.config.region}"
