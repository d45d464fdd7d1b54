"""boto3 clients (created once per container) and translation of AWS errors into named exceptions."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from functools import cache
from typing import Any

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

from .errors import ResourceLimitExceeded, ThrottlingException

_THROTTLING_CODES = {"ThrottlingException", "Throttling", "TooManyRequestsException", "RequestLimitExceeded",
                     "SlowDown", "ProvisionedThroughputExceededException"}
_CONFIG = Config(retries={"mode": "standard", "max_attempts": 3}, connect_timeout=5, read_timeout=30)


@cache
def _session() -> boto3.session.Session:
    # One session per container: its loader parses each service model once.
    return boto3.session.Session()


@cache
def client(service: str, region: str | None = None) -> Any:
    region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
    return _session().client(service, region_name=region, config=_CONFIG)


def reset_clients() -> None:
    """Forget cached clients (tests make new ones inside each moto mock; the session and its models stay)."""
    client.cache_clear()


def error_code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def error_message(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Message", ""))


def is_not_found(err: ClientError) -> bool:
    """DescribeTrainingJob/DescribeProcessingJob on an unknown name (ValidationException 'not found')."""
    code, message = error_code(err), error_message(err).lower()
    return code in {"ResourceNotFound", "ResourceNotFoundException", "NoSuchKey", "404"} or (
        code == "ValidationException" and ("not found" in message or "could not find" in message))


def is_already_exists(err: ClientError) -> bool:
    code, message = error_code(err), error_message(err).lower()
    return code == "ResourceInUse" or (code == "ValidationException" and
                                       ("already exists" in message or "must be unique" in message))


@contextmanager
def aws_errors() -> Iterator[None]:
    """Re-raise throttling and SageMaker quota errors under the names the state machine's Retry matches."""
    try:
        yield
    except ClientError as err:
        code = error_code(err)
        if code in _THROTTLING_CODES:
            raise ThrottlingException(f"{code}: {error_message(err)}") from err
        if code == "ResourceLimitExceeded":
            raise ResourceLimitExceeded(error_message(err)) from err
        raise
