"""A run id belongs to one execution: Prepare claims it atomically before the run starts anything.

A caller can choose a run id (runctl names the execution after one; an execution of either state machine named
like a run id of its spec gets that id), and job names are unique per account only for the jobs already created:
without a claim, a second execution could plan a live run's id while that run is still in its tokenizer stage, write
into its prefixes, and stop its jobs when it fails. The claim is `claims/<run_id>.json` in the artifacts bucket,
created with `If-None-Match: *` (S3 conditional writes: the PUT fails with 412 PreconditionFailed when the key
exists), holding the execution ARN. A retried Prepare of the same execution finds its own claim and goes on; any
other execution is refused (PreflightError). Only Prepare's role may write `claims/` (bucket policy), and nothing
deletes a claim.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from hfsm_lambda.aws import aws_errors, error_code
from hfsm_lambda.bounded_reads import read_object
from hfsm_lambda.errors import PreflightError
from hfsm_lambda.s3_layout import CLAIMS_PREFIX
from hfsm_lambda.settings import Settings

MAX_CLAIM_BYTES = 64 * 1024  # a claim is about 200 bytes (only Prepare writes claims/)


def claim_key(run_id: str) -> str:
    return f"{CLAIMS_PREFIX}{run_id}.json"


def claim(s3: Any, settings: Settings, run_id: str, execution_arn: str | None) -> None:
    """Claims `run_id` for `execution_arn`; PreflightError when another execution (or a Prepare outside any
    execution) holds it."""
    key = claim_key(run_id)
    body = json.dumps({"run_id": run_id, "execution_arn": execution_arn,
                       "claimed_at": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}).encode()
    try:
        with aws_errors():
            s3.put_object(Bucket=settings.artifacts_bucket, Key=key, Body=body, IfNoneMatch="*",
                          ContentType="application/json", ServerSideEncryption="aws:kms",
                          SSEKMSKeyId=settings.kms_key_arn)
        return
    except ClientError as err:
        if error_code(err) not in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
            raise
    with aws_errors():
        held = json.loads(read_object(s3, settings.artifacts_bucket, key, max_bytes=MAX_CLAIM_BYTES) or b"{}")
    holder = held.get("execution_arn") if isinstance(held, dict) else None
    if execution_arn is not None and holder == execution_arn:
        return  # this execution's own claim: a retried Prepare
    raise PreflightError([f"run_id: {run_id} is already claimed by execution {holder or '(none)'} "
                          f"(s3://{settings.artifacts_bucket}/{key}); a run id belongs to one execution. Submit "
                          "again for a new run id (runctl submit makes one; an upload names the run itself)"])
