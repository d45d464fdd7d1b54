"""runctl and python -m local_mode as a user meets them (issue: everything a user reads is true, point 4): an
installed `runctl` command, AWS configuration errors that name the fix, global options before or after the
sub-command."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from local_mode.__main__ import _parser


def test_make_setup_installs_a_runctl_command():
    command = Path(sys.executable).parent / "runctl"
    assert command.is_file(), "pyproject.toml [project.scripts] runctl, installed by make setup"
    done = subprocess.run([str(command), "--help"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and "submit" in done.stdout and "status" in done.stdout


@pytest.mark.parametrize("missing", ["region", "credentials"])
def test_without_aws_configuration_the_error_names_the_fix(tmp_path, missing):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(HOME=str(tmp_path), AWS_CONFIG_FILE=str(tmp_path / "none"),
               AWS_SHARED_CREDENTIALS_FILE=str(tmp_path / "none"), AWS_EC2_METADATA_DISABLED="true")
    if missing == "credentials":
        env["AWS_DEFAULT_REGION"] = "us-east-1"
    done = subprocess.run([sys.executable, "-m", "runctl", "list"], capture_output=True, text=True, env=env,
                          timeout=120)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert f"runctl: error: no AWS {missing} configured" in done.stderr
    assert "--region" in done.stderr and "add --local" in done.stderr


@pytest.mark.parametrize("argv", [["--verbose", "--work-dir", "w", "data", "qa", "d"],
                                  ["data", "qa", "d", "--verbose", "--work-dir", "w"],
                                  ["--work-dir", "w", "data", "qa", "d", "--verbose"]])
def test_local_mode_global_options_work_before_or_after_the_sub_command(argv):
    args = _parser().parse_args(argv)
    assert args.verbose is True and args.work_dir == Path("w") and args.cdk_out == Path("cdk.out")


def test_local_mode_global_options_keep_their_defaults():
    args = _parser().parse_args(["data", "qa", "d"])
    assert args.verbose is False and args.work_dir is None and args.cdk_out == Path("cdk.out")
