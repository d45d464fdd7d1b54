"""Names and addresses: run ids, job names, execution names, instance types, ARNs, console links. Pure.

The one declaration of these patterns and builders: the Lambdas, runctl (runctl/core.py) and the stacks' config
(stacks/settings/environment.py) import them; tests/lambda/test_lambda_naming.py fails when
a copy reappears. Patterns are whole-string, in the regex subset Python and ECMAScript share (spec/run_spec.py puts
them in the JSON Schema).
"""

from __future__ import annotations

import hashlib
import re
import secrets
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from .s3_layout import RUNS_PREFIX

# A run spec's `name` (and so a run id's first part).
# The project (and environment) name, 1-16 characters: every name built from it is `<project>-<environment>...`
# (so at least 3 characters), and 16 keeps those names within IAM's, Lambda's, S3's and SageMaker's limits (63-64
# characters). stacks/settings/environment.py (cdk.json) and settings.py (the Lambdas) check it with this one pattern.
PROJECT_NAME = r"[a-z][a-z0-9-]{0,15}"
NAME = r"[a-z][a-z0-9-]{0,31}"
NAME_RE = re.compile(NAME)  # fullmatch
# ml.<family>.<size>; families may hold '-' (ml.p6-b200.48xlarge, botocore's TrainingInstanceType).
INSTANCE_TYPE = r"ml\.[a-z0-9-]+\.[a-z0-9]+"
INSTANCE_TYPE_RE = re.compile(INSTANCE_TYPE)  # fullmatch
JOB_NAME_RE = re.compile(r"[a-zA-Z0-9](-*[a-zA-Z0-9]){0,62}")  # fullmatch: SageMaker's TrainingJobName
JOB_NAME_MAX = 63
EXECUTION_NAME_RE = re.compile(r"[A-Za-z0-9_-]{1,80}")
# 16 hex digits = 64 random bits (or 64 bits of a hash of the unique execution ARN): run ids do not collide.
RUN_ID_HEX = 16
RUN_ID_RE = re.compile(rf"(?P<name>{NAME})-(?P<ts>[0-9]{{14}})-(?P<hex>[0-9a-f]{{{RUN_ID_HEX}}})")
# Stage -> short code used in job names.
STAGE_CODES = {"tokenizer_map": "tokmap", "tokenizer_reduce": "tokred", "train": "train"}


def is_job_name(name: str) -> bool:
    return len(name) <= JOB_NAME_MAX and bool(JOB_NAME_RE.fullmatch(name))


def make_run_id(name: str, when: datetime, entropy: str) -> str:
    """`<spec name>-<UTC yyyymmddHHMMSS>-<16 hex>` (CONTRACTS.md); `entropy`: at least 16 hex digits."""
    stamp = when.astimezone(UTC).strftime("%Y%m%d%H%M%S")
    if len(entropy) < RUN_ID_HEX:
        raise ValueError(f"a run id needs {RUN_ID_HEX} hex digits of entropy")
    return f"{name}-{stamp}-{entropy[:RUN_ID_HEX]}"


def run_id_for(name: str, execution: dict[str, Any] | None = None, now: datetime | None = None) -> str:
    """The run id, deterministic in the Step Functions execution when its context is given.

    `execution` is the context object's `$$.Execution` ({Id, Name, StartTime}; lower/snake case accepted).
    An execution named like a run id of this spec (runctl does that) gives its name as the run id; otherwise
    the start time and 64 bits of a hash of the execution ARN (unique per account, region and state machine),
    so a retried Prepare plans the same run; without an execution, 64 random bits.
    """
    execution = {k.lower().replace("_", ""): v for k, v in (execution or {}).items()}
    exec_name, exec_id, start = execution.get("name"), execution.get("id"), execution.get("starttime")
    if isinstance(exec_name, str):
        match = RUN_ID_RE.fullmatch(exec_name)
        if match and match["name"] == name:
            return exec_name
    if isinstance(exec_id, str) and isinstance(start, str):
        try:
            when = datetime.fromisoformat(start.replace("Z", "+00:00"))
        except ValueError:
            when = None
        if when is not None:
            when = when if when.tzinfo else when.replace(tzinfo=UTC)
            return make_run_id(name, when, hashlib.sha256(exec_id.encode()).hexdigest())
    return make_run_id(name, now or datetime.now(UTC), secrets.token_hex(RUN_ID_HEX // 2))


def job_name(project: str, run_id: str, stage: str, attempt: int = 0) -> str:
    """`<project>-<run_id>-<stage><attempt>`; over 63 characters `<project>-<name, cut>-<16 hex>-<stage><attempt>`
    (the run id's random part is unique on its own; the project prefix, which IAM scopes to, stays whole)."""
    tail = f"-{STAGE_CODES[stage]}{attempt}"
    match = RUN_ID_RE.fullmatch(run_id)
    if match:
        head, unique = f"{project}-{match['name']}", match["hex"]
    else:
        head, unique = f"{project}-{run_id}", hashlib.sha256(run_id.encode()).hexdigest()[:RUN_ID_HEX]
    full = f"{project}-{run_id}{tail}"
    if len(full) <= JOB_NAME_MAX and JOB_NAME_RE.fullmatch(full):
        return full
    room = JOB_NAME_MAX - len(unique) - len(tail) - 1
    head = re.sub(r"[^a-zA-Z0-9-]", "-", head)[:room].strip("-") or "job"
    return f"{head}-{unique}{tail}"


def execution_name_for_object(bucket: str, key: str, identity: str) -> str:
    """Execution name for an uploaded spec: the same (bucket, key, version) always gives the same name."""
    digest = hashlib.sha256(f"{bucket}\n{key}\n{identity}".encode()).hexdigest()[:16]
    stem = key.removeprefix(RUNS_PREFIX).removesuffix(".json")
    stem = re.sub(r"[^A-Za-z0-9_-]+", "-", stem).strip("-_")[:59] or "spec"
    return f"run-{stem}-{digest}"


def execution_arn(state_machine_arn: str, name: str) -> str:
    """The ARN of execution `name` of a state machine."""
    return state_machine_arn.replace(":stateMachine:", ":execution:", 1) + f":{name}"


# Console links (commercial partition).
def _console(region: str, service: str, fragment: str) -> str:
    return f"https://{region}.console.aws.amazon.com/{service}/home?region={region}#{fragment}"


def training_job_url(region: str, name: str) -> str:
    return _console(region, "sagemaker", f"/jobs/{name}")


def processing_job_url(region: str, name: str) -> str:
    return _console(region, "sagemaker", f"/processing-jobs/{name}")


def execution_url(region: str, arn: str) -> str:
    return _console(region, "states", f"/v2/executions/details/{arn}")


def job_logs_url(region: str, name: str, job_type: str = "training") -> str:
    group = "/aws/sagemaker/TrainingJobs" if job_type == "training" else "/aws/sagemaker/ProcessingJobs"
    # CloudWatch's fragment encoding: '/' -> $252F, '?' -> $3F, '=' -> $3D.
    encoded = quote(group, safe="").replace("%", "$25")
    return _console(region, "cloudwatch", f"logsV2:log-groups/log-group/{encoded}$3FlogStreamNameFilter$3D{name}")


def s3_url(uri: str, region: str) -> str:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return f"https://s3.console.aws.amazon.com/s3/buckets/{bucket}?region={region}&prefix={quote(prefix)}"
