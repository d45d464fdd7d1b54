"""The boto3 clients runctl and the run readers use: each made on first use from one session, or given (moto, the
local mode's emulator, a test's stub)."""

from __future__ import annotations

from typing import Any


class Clients:
    """The boto3 clients a run is read (and driven) with, made on first use from `session` unless given."""

    def __init__(self, session: Any = None, *, sfn: Any = None, sagemaker: Any = None,
                 cloudformation: Any = None, logs: Any = None, s3: Any = None, lambda_: Any = None,
                 ec2: Any = None) -> None:
        self._session = session
        self._given = {"stepfunctions": sfn, "sagemaker": sagemaker, "cloudformation": cloudformation,
                       "logs": logs, "s3": s3, "lambda": lambda_, "ec2": ec2}

    def _client(self, service: str) -> Any:
        if self._given[service] is None:
            self._given[service] = self._session.client(service)
        return self._given[service]

    @property
    def sfn(self) -> Any:
        return self._client("stepfunctions")

    @property
    def sagemaker(self) -> Any:
        return self._client("sagemaker")

    @property
    def cloudformation(self) -> Any:
        return self._client("cloudformation")

    @property
    def logs(self) -> Any:
        return self._client("logs")

    @property
    def s3(self) -> Any:
        return self._client("s3")

    @property
    def ec2(self) -> Any:  # runctl plan: Prepare's free-IP check of EFA subnets
        return self._client("ec2")

    @property
    def lambda_(self) -> Any:
        return self._client("lambda")
