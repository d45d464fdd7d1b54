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
from synth_helpers import Synthesized

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
        assert "[" in finding or finding == "AwsSolutions-L1", f"{finding} must name the one finding it covers"
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


@pytest.mark.slow
@pytest.mark.parametrize("env", ["dev", "prod"])
def test_cdk_cli_synth_offline_without_credentials(env: str, tmp_path: Path) -> None:
    cdk_cli = REPO / "node_modules" / ".bin" / "cdk"
    if not cdk_cli.exists():
        pytest.skip("the CDK CLI is installed by `make setup`")
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    clean["PATH"] = f"{Path(sys.executable).parent}:{clean['PATH']}"
    clean["HOME"] = str(tmp_path)  # no ~/.aws either
    out = tmp_path / "cdk.out"
    proc = subprocess.run([str(cdk_cli), "synth", "--no-notices", "--quiet", "-c", f"env={env}", "-o", str(out)],
                          cwd=REPO, env=clean, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert {p.name for p in out.glob("*.template.json")} == {
        f"hfsm-{env}-{s}.template.json" for s in ("storage", "network", "pipeline")}
    shutil.rmtree(out)
