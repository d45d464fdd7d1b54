"""`make synth` keeps the previous cdk.out/ until the new synth succeeded; `make bench` finds the project."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
FAKE_CDK = """#!/bin/bash
# Stands in for the CDK CLI: writes a partial assembly into -o DIR, then fails or completes as asked.
while [ $# -gt 0 ]; do case "$1" in -o) out="$2"; shift;; -c) ctx="$2"; shift;; esac; shift; done
mkdir -p "$out" && echo partial > "$out/partial.txt"
[ "$ctx" = "env=staging" ] && { echo "cdk.json: unknown environment 'staging'; known: dev, prod" >&2; exit 1; }
echo '{"version": "fake"}' > "$out/manifest.json"
"""


def make_synth(tmp_path: Path, env: str) -> subprocess.CompletedProcess:
    cdk = tmp_path / "fake-cdk"
    cdk.write_text(FAKE_CDK)
    cdk.chmod(0o755)
    return subprocess.run(["make", "--no-print-directory", "-o", "setup", "-o", ".venv/.stamp", "-o",
                           "node_modules/.stamp", "synth", f"ENV={env}", f"CDK={cdk}",
                           f"SYNTH_OUT={tmp_path / 'cdk.out'}"], cwd=REPO, capture_output=True, text=True,
                          timeout=60)


def test_a_failed_synth_keeps_the_previous_cdk_out(tmp_path: Path) -> None:
    previous = tmp_path / "cdk.out"
    previous.mkdir()
    (previous / "manifest.json").write_text('{"version": "previous"}')
    done = make_synth(tmp_path, "staging")
    assert done.returncode != 0
    assert "unknown environment 'staging'" in done.stderr and f"{previous}/ is unchanged" in done.stderr
    assert (previous / "manifest.json").read_text() == '{"version": "previous"}'
    assert not (tmp_path / "cdk.out.new").exists()


def test_a_successful_synth_replaces_it(tmp_path: Path) -> None:
    previous = tmp_path / "cdk.out"
    previous.mkdir()
    (previous / "stale.json").write_text("{}")
    done = make_synth(tmp_path, "dev")
    assert done.returncode == 0, done.stderr
    assert (previous / "manifest.json").read_text().strip() == '{"version": "fake"}'
    assert not (previous / "stale.json").exists() and not (tmp_path / "cdk.out.new").exists()


def test_make_bench_runs_the_benchmarks_from_the_repo_root() -> None:
    done = subprocess.run(["make", "-n", "bench"], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert "benchmarks/bench_" in done.stdout and "PYTHONPATH" not in done.stdout
    # the imports a benchmark needs resolve by package name from anywhere, with no PYTHONPATH (make setup installs
    # the checkout; issue: No module named 'local_mode')
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    probe = subprocess.run([sys.executable, "-c", "import local_mode.synthetic, runctl, stacks, hftrain.args, "
                            "hfsm_lambda.handlers, benchmarks.benchlib"], cwd=REPO / "benchmarks", env=env,
                           capture_output=True, text=True, timeout=60)
    assert probe.returncode == 0, probe.stderr


def make_synth_if_changed(tmp_path: Path, env: str) -> subprocess.CompletedProcess:
    cdk = tmp_path / "fake-cdk"
    cdk.write_text(FAKE_CDK + 'echo synthesized >> "$(dirname "$out")/synth-calls"\n')
    cdk.chmod(0o755)
    return subprocess.run(["make", "--no-print-directory", "-o", ".venv/.stamp", "-o", "node_modules/.stamp",
                           "synth-if-changed", f"ENV={env}", f"CDK={cdk}", f"SYNTH_OUT={tmp_path / 'cdk.out'}"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)


def test_synth_if_changed_synthesizes_once_then_skips_until_an_input_changes(tmp_path: Path) -> None:
    calls = tmp_path / "synth-calls"
    first = make_synth_if_changed(tmp_path, "dev")
    assert first.returncode == 0, first.stderr
    assert calls.read_text().count("synthesized") == 1
    stamp = tmp_path / "cdk.out" / ".synth-inputs.sha256"
    assert len(stamp.read_text().strip()) == 64  # recorded by make synth, after the synth succeeded
    again = make_synth_if_changed(tmp_path, "dev")
    assert again.returncode == 0 and "synth skipped" in again.stdout, again.stdout + again.stderr
    assert calls.read_text().count("synthesized") == 1
    other = make_synth_if_changed(tmp_path, "prod")  # another environment is another input
    assert calls.read_text().count("synthesized") == 2, other.stdout + other.stderr
    stamp.write_text("0" * 64 + "\n")  # what an edit of stacks/, lambda/, training_code/ ... looks like
    make_synth_if_changed(tmp_path, "prod")
    assert calls.read_text().count("synthesized") == 3


def test_make_demo_does_not_build_the_checkov_venv() -> None:
    """-W: as if requirements-checkov.txt had just changed; -n: print, run nothing. A target that needs the checkov
    venv would rebuild it."""
    demo = subprocess.run(["make", "-n", "-W", "requirements-checkov.txt", "-o", "synth-if-changed", "demo"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert demo.returncode == 0, demo.stderr
    assert ".venv-checkov" not in demo.stdout and "local_mode demo" in demo.stdout
    setup = subprocess.run(["make", "-n", "-W", "requirements-checkov.txt", "setup"], cwd=REPO, capture_output=True,
                           text=True, timeout=60)
    assert ".venv-checkov" in setup.stdout  # the check sees a dependency on it where there is one
