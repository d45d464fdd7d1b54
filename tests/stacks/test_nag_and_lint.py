"""External validators: cdk-nag (AwsSolutions) during synth, cfn-lint over every template, synth without AWS."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import aws_cdk as cdk
import pytest
from aws_cdk import aws_s3 as s3
from cdk_nag import AwsSolutionsChecks
from testkit.synth import Synthesized, as_list

from stacks.assets import job_wheels
from stacks.assets.code_asset import build_code_bundle
from stacks.nag import ACKNOWLEDGEMENTS

REPO = Path(__file__).resolve().parents[2]


def test_nag_is_active_and_fails_synth_on_a_finding(tmp_path: Path) -> None:
    """The same plugin set-up as the app: an unencrypted, unlogged bucket must stop synth."""
    app = cdk.App(outdir=str(tmp_path))
    stack = cdk.Stack(app, "Bad")
    s3.Bucket(stack, "Open")
    cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app))
    with pytest.raises(Exception, match="AwsSolutions-S1"):
        app.synth()


def test_app_synthesizes_with_no_unacknowledged_findings(any_env: Synthesized) -> None:
    report = json.loads((any_env.outdir / "validation-report.json").read_text())
    failures = [v for p in report.get("pluginReports", []) for v in p.get("violations", [])]
    assert failures == [], failures


def test_every_acknowledgement_names_one_finding_and_a_reason(any_env: Synthesized) -> None:
    assert ACKNOWLEDGEMENTS
    for path, finding, reason in ACKNOWLEDGEMENTS:
        assert finding.startswith("AwsSolutions-"), finding
        # Rules that are not granular name one construct (the acknowledgement is made on that construct only).
        assert "[" in finding or finding in ("AwsSolutions-L1", "AwsSolutions-SQS3"), \
            f"{finding} must name the one finding it covers"
        assert len(reason) > 40, (path, finding)


def test_cfn_lint_reports_no_errors(dev: Synthesized, prod: Synthesized) -> None:
    """Every template of both apps (the FSx SCRATCH_2 network variant: constructs/test_network_stack.py)."""
    templates = [str(p) for s in (dev, prod) for p in s.outdir.glob("*.template.json")]
    assert len(templates) == 6
    proc = subprocess.run([sys.executable, "-m", "cfnlint", "--format", "json", *templates],
                          capture_output=True, text=True, timeout=300)
    findings = json.loads(proc.stdout or "[]")
    errors = [f for f in findings if f["Level"] == "Error"]
    assert errors == [], errors
    assert proc.returncode & 2 == 0, proc.stderr  # cfn-lint's exit-code bit 2 means errors


def _jsii_package_cache() -> Path:
    """The jsii package cache this test process uses (jsii's default root on Linux and macOS)."""
    if os.environ.get("JSII_RUNTIME_PACKAGE_CACHE_ROOT"):
        return Path(os.environ["JSII_RUNTIME_PACKAGE_CACHE_ROOT"])
    if sys.platform == "darwin":
        return Path.home() / "Library" / "Caches" / "com.amazonaws.jsii" / "package-cache"
    return Path.home() / ".cache" / "aws" / "jsii" / "package-cache"


@pytest.mark.slow
def test_cdk_cli_synth_offline_without_credentials(tmp_path: Path) -> None:
    """`cdk synth -c env=dev` and `-c env=prod` as a user runs them (the CLI runs cdk.json's app), with no AWS
    variables and a HOME without ~/.aws. The two run side by side (each is one core's work)."""
    cdk_cli = REPO / "node_modules" / ".bin" / "cdk"
    if not cdk_cli.exists():
        pytest.skip("the CDK CLI is installed by `make setup`")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    clean["PATH"] = f"{Path(sys.executable).parent}:{clean['PATH']}"
    clean["HOME"] = str(tmp_path)  # no ~/.aws either
    # jsii's package cache holds the unpacked aws-cdk-lib (no credentials); under the empty HOME each run would
    # unpack it again (about 4 s of CPU each).
    clean["JSII_RUNTIME_PACKAGE_CACHE_ROOT"] = str(_jsii_package_cache())
    # The runs share the checkout's wheel cache and code build folder: filled here first (no-ops once filled),
    # so that the two only read them.
    build_code_bundle(REPO / "training_code", REPO / "build" / "code",
                      wheels=job_wheels.wheel_files(job_wheels.wheel_dir()))
    runs = {}
    try:
        for env in ("dev", "prod"):
            log = (tmp_path / f"{env}.log").open("w")
            runs[env] = (subprocess.Popen(
                [str(cdk_cli), "synth", "--no-notices", "--quiet", "-c", f"env={env}", "-o", str(tmp_path / env)],
                cwd=REPO, env=clean, stdout=log, stderr=subprocess.STDOUT, text=True), log)
        for env, (proc, log) in runs.items():
            returncode = proc.wait(timeout=600)
            log.close()
            assert returncode == 0, (env, (tmp_path / f"{env}.log").read_text())
            out = tmp_path / env
            assert {p.name for p in out.glob("*.template.json")} == {
                f"hfsm-{env}-{s}.template.json" for s in ("storage", "network", "pipeline")}
            shutil.rmtree(out)
    finally:
        for proc, log in runs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()


def test_every_acknowledgement_matches_a_finding(dev: Synthesized, prod: Synthesized,
                                                 unacknowledged: dict[str, set[tuple[str, str]]]) -> None:
    """An acknowledgement that matches nothing hides nothing today and would hide something tomorrow."""
    for env in ("dev", "prod"):
        acks = {(path, finding) for path, finding, _ in ACKNOWLEDGEMENTS if path.startswith(f"hfsm-{env}-")}
        assert acks, env
        findings = unacknowledged[env]
        assert acks - findings == set(), f"{env}: acknowledgements that match no finding"
        assert findings - acks == set(), f"{env}: findings that no acknowledgement covers"


# Actions that support no resource-level permissions (Service Authorization Reference), for "Resource::*".
NO_RESOURCE_ACTIONS = ("xray:", "ecr:GetAuthorizationToken", "cloudwatch:PutMetricData", "ec2:Describe",
                       "logs:CreateLogDelivery", "logs:DeleteLogDelivery", "logs:DescribeLogGroups",
                       "logs:DescribeResourcePolicies", "logs:GetLogDelivery", "logs:ListLogDeliveries",
                       "logs:PutResourcePolicy", "logs:UpdateLogDelivery", "sagemaker:List")


def _statements_for(s: Synthesized, path: str, resource: str) -> list[dict]:
    construct = s.project.app.node.find_child(path.split("/", 1)[0]).node.find_child(
        path.split("/", 1)[1].split("/")[0])
    for part in path.split("/")[2:]:
        construct = construct.node.find_child(part)
    stack = s.project.pipeline
    lid = stack.resolve(stack.get_logical_id(construct))
    doc = s.template_json("pipeline")["Resources"][lid]["Properties"]["PolicyDocument"]
    return [st for st in doc["Statement"] if resource in [json.dumps(r) if isinstance(r, dict) else r
                                                          for r in as_list(st["Resource"])]
            or (resource.startswith("<") and any(resource[1:].split(".")[0] in json.dumps(r)
                                                 for r in as_list(st["Resource"])))]


def test_every_acknowledgement_reason_is_true_of_its_policy(dev: Synthesized) -> None:
    for path, finding, reason in ACKNOWLEDGEMENTS:
        if not path.startswith("hfsm-dev-") or not finding.startswith("AwsSolutions-IAM5[Resource::"):
            continue
        resource = finding[len("AwsSolutions-IAM5[Resource::"):-1]
        statements = _statements_for(dev, path, resource)
        assert statements, (path, finding)
        actions = {a for st in statements for a in as_list(st["Action"])}
        if resource == "*":
            assert all(a.startswith(NO_RESOURCE_ACTIONS) for a in actions), (path, actions)
        _assert_reason_holds(path, finding, reason, statements, actions)


def _assert_reason_holds(path: str, finding: str, reason: str, statements: list[dict], actions: set[str]) -> None:
    """What the acknowledgement's reason says of the wildcard statements (put only, read only, no delete, the
    ec2:Vpc condition, the metric namespace) is true of them."""
    if "put only" in reason:
        assert actions <= {"s3:PutObject", "s3:AbortMultipartUpload"}, (path, finding, actions)
    if "read only" in reason or "get only" in reason or "read (s3:GetObject" in reason:
        assert actions <= {"s3:GetObject", "s3:GetObjectVersion"}, (path, finding, actions)
    if "no delete" in reason:
        assert not any("Delete" in a for a in actions), (path, finding, actions)
    if "ec2:Vpc condition" in reason:
        assert all("ec2:Vpc" in json.dumps(st.get("Condition", {})) for st in statements)
    if "pinned to the /aws/sagemaker/*" in reason:
        metric = [st for st in statements if "cloudwatch:PutMetricData" in as_list(st["Action"])]
        assert metric and metric[0]["Condition"] == {"StringLike": {"cloudwatch:namespace": "/aws/sagemaker/*"}}
