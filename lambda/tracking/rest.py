"""MLflow's REST API (api/2.0/mlflow/...) from the Lambdas: standard library HTTP, SigV4 from botocore.

SageMaker's managed MLflow: the tracking URI is the tracking server's ARN; requests go to
`https://<region>.experiments.sagemaker.<dns suffix>` with the header `x-mlflow-sm-tracking-server-arn: <arn>`,
signed with SigV4 for the service `sagemaker-mlflow` (what the `sagemaker-mlflow` plugin does:
sagemaker_mlflow/mlflow_sagemaker_helpers.py, mlflow_sagemaker_request_header_provider.py, auth_provider.py).
Local mode: an http://127.0.0.1 URL, plain HTTP, unsigned. Every call has a short timeout.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import Any

SERVICE = "sagemaker-mlflow"
CUSTOM_ENDPOINT_VARIABLE = "SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT"  # the plugin's own override of the endpoint URL
ARN_HEADER = "x-mlflow-sm-tracking-server-arn"
API = "/api/2.0/mlflow/"
DEFAULT_TIMEOUT_SECONDS = 10.0  # Finish: a bounded wait (its record is best effort)


class MlflowRestError(RuntimeError):
    """An MLflow call failed: the message names the call and the server's answer."""

    def __init__(self, message: str, code: str = "") -> None:
        super().__init__(message)
        self.code = code  # MLflow's error_code (RESOURCE_DOES_NOT_EXIST, ...) when the server said one


def endpoint(uri: str, custom: str | None = None) -> tuple[str, dict[str, str], str]:
    """(base URL, extra headers, region to sign for: "" = unsigned) of a tracking URI. An ARN's endpoint can be
    overridden (`custom`, default $SAGEMAKER_MLFLOW_CUSTOM_ENDPOINT, as the plugin allows): still signed."""
    custom = os.environ.get(CUSTOM_ENDPOINT_VARIABLE, "") if custom is None else custom
    if uri.startswith("arn:"):
        parts = uri.split(":")
        if len(parts) < 6 or parts[2] != "sagemaker" or not parts[5].startswith("mlflow-tracking-server/"):
            raise MlflowRestError(f"{uri!r} is not a SageMaker MLflow tracking server ARN "
                                  "(arn:aws:sagemaker:REGION:ACCOUNT:mlflow-tracking-server/NAME)")
        partition, region = parts[1], parts[3]
        suffix = "amazonaws.com.cn" if partition == "aws-cn" else "amazonaws.com"
        base = custom.rstrip("/") or f"https://{region}.experiments.sagemaker.{suffix}"
        return base, {ARN_HEADER: uri}, region
    if uri.startswith(("http://", "https://")):
        return uri.rstrip("/"), {}, ""
    raise MlflowRestError(f"tracking URI {uri!r}: expected a tracking server ARN or an http(s):// URL")


def sigv4_signer(region: str, credentials: Any = None) -> Callable[[str, str, dict[str, str], bytes], dict[str, str]]:
    """A function (method, url, headers, body) -> signed headers (botocore's SigV4, service sagemaker-mlflow)."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest

    if credentials is None:
        import boto3

        credentials = boto3.Session().get_credentials()

    def sign(method: str, url: str, headers: dict[str, str], body: bytes) -> dict[str, str]:
        request = AWSRequest(method=method, url=url, data=body, headers=headers)
        SigV4Auth(credentials, SERVICE, region).add_auth(request)
        return dict(request.headers.items())

    return sign


class MlflowRest:
    """One tracking server's REST API; `call` returns the JSON answer or raises MlflowRestError."""

    def __init__(self, uri: str, *, timeout: float = DEFAULT_TIMEOUT_SECONDS, credentials: Any = None,
                 opener: Callable[..., Any] = urllib.request.urlopen) -> None:
        self.uri = uri
        self.base, self.headers, region = endpoint(uri)
        self.sign = sigv4_signer(region, credentials) if region else None
        self.timeout, self.opener = timeout, opener

    def call(self, method: str, path: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
        url = f"{self.base}{API}{path}"
        data = b""
        if method == "GET" and body:
            url += "?" + urllib.parse.urlencode(body)
        elif body is not None:
            data = json.dumps(body).encode()
        headers = {"Content-Type": "application/json", **self.headers}
        if self.sign is not None:
            headers = self.sign(method, url, headers, data)
        request = urllib.request.Request(url, data=data or None, headers=headers, method=method)
        try:
            with self.opener(request, timeout=self.timeout) as response:  # noqa: S310 - https or loopback
                text = response.read().decode() or "{}"
        except urllib.error.HTTPError as err:
            answer = err.read().decode(errors="replace")[:500]
            try:
                code = json.loads(answer).get("error_code", "")
            except ValueError:
                code = ""
            raise MlflowRestError(f"{method} {path}: HTTP {err.code} {answer}", code) from err
        except (OSError, ValueError) as err:
            raise MlflowRestError(f"{method} {path}: {type(err).__name__}: {err}") from err
        return json.loads(text)
