"""AWS clients for the local jobs' threads, built from explicit settings (region, emulator credentials).

A job thread never takes its region or credentials from the process environment: the emulated account is
chosen once per session (moto reads MOTO_ACCOUNT_ID, set before any thread starts and restored after all
stopped), and every call from a job lands in moto's in-process backends.
"""

from __future__ import annotations

from typing import Any

import boto3
from botocore.config import Config

# moto accepts any credentials; fixed ones keep a job's clients independent of the caller's environment.
EMULATOR_CREDENTIALS = {"aws_access_key_id": "local-sagemaker", "aws_secret_access_key": "local-sagemaker"}
_CONFIG = Config(retries={"mode": "standard", "max_attempts": 3})


def job_client(service: str, region: str) -> Any:
    """A new client (clients are cheap next to a job; one per call site keeps threads apart)."""
    session = boto3.session.Session(region_name=region, **EMULATOR_CREDENTIALS)
    return session.client(service, region_name=region, config=_CONFIG)
