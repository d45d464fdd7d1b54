#!/usr/bin/env python3
"""CDK app entry: `cdk synth -c env=dev|prod`. Environment variables are read here and nowhere else."""

from __future__ import annotations

import sys

from stacks.app_builder import build_app
from stacks.settings.environment import ConfigError

try:
    project = build_app()
except ConfigError as exc:
    sys.exit(f"cdk.json: {exc}")
project.app.synth()
