"""Refused checkpoints and caches moved out of the run's checkpoint prefix before its next attempt starts.

SageMaker copies the whole checkpoint prefix (the job's `CheckpointConfig.S3Uri`, `checkpoints/<run_id>/`) to every
instance at every start. The training code never deletes what failed verification: it renames it in place, under
names only it gives (`checkpoint-<step>.unverified-<k>/` and `_tokenized/<name>.refused-<k>/`, declared once in
contract/refused_names.py), and that rename reaches S3 through the checkpoint sync. Left there, every
later start would download them again to every instance. StartTraining therefore moves those directories, object by
object, to `refused/<run_id>/` (the same relative keys), a prefix no job reads: a server-side copy encrypted with the
project key, then the original is deleted. An object is deleted only after its copy succeeded; nothing else is
touched. A managed spot restart inside one job still restores them (no Lambda runs in between); the next attempt
does not. Bounded per call (MAX_KEYS listed, BUDGET_SECONDS spent): what is left is moved at the next start.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from contract.refused_names import REFUSED_KEY_RE
from hfsm_lambda.plan.preflight import parse_s3_uri
from hfsm_lambda.s3_layout import CHECKPOINTS_PREFIX, REFUSED_PREFIX

MAX_KEYS = 10_000
BUDGET_SECONDS = 120.0


def refused_uri(bucket: str, run_id: str) -> str:
    return f"s3://{bucket}/{REFUSED_PREFIX}{run_id}/"


def _split(uri: str) -> tuple[str, str]:
    bucket, prefix = parse_s3_uri(uri)
    return bucket, prefix.rstrip("/") + "/"


def move_refused(s3: Any, checkpoint_uri: str, target_uri: str, kms_key_arn: str, *,
                 clock: Callable[[], float] = time.monotonic, budget: float = BUDGET_SECONDS) -> dict[str, Any]:
    """Moves the refused directories under `checkpoint_uri` to `target_uri`; returns {directories, objects, bytes,
    left} (left: objects not moved in this call's budget, or whose copy failed)."""
    bucket, prefix = _split(checkpoint_uri)
    target_bucket, target_prefix = _split(target_uri)
    if not prefix.startswith(CHECKPOINTS_PREFIX) or prefix == CHECKPOINTS_PREFIX:
        raise ValueError(f"{checkpoint_uri} is not a run's checkpoint prefix ({CHECKPOINTS_PREFIX}<run_id>/)")
    found = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix,
                                                             PaginationConfig={"MaxItems": MAX_KEYS}):
        for obj in page.get("Contents", []):
            relative = obj["Key"][len(prefix):]
            match = REFUSED_KEY_RE.fullmatch(relative)  # the training code's own names (contract/refused_names.py)
            if match:
                found.append((relative, match["directory"], int(obj.get("Size") or 0)))
    began, moved, size, directories = clock(), 0, 0, set()
    left = len(found)
    for relative, directory, nbytes in found:
        if clock() - began > budget:
            break
        # managed copy: server-side, multipart above its threshold (a checkpoint file may exceed 5 GB)
        s3.copy({"Bucket": bucket, "Key": prefix + relative}, target_bucket, target_prefix + relative,
                ExtraArgs={"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": kms_key_arn})
        s3.delete_object(Bucket=bucket, Key=prefix + relative)
        moved, size, left = moved + 1, size + nbytes, left - 1
        directories.add(directory)
    return {"directories": sorted(directories), "objects": moved, "bytes": size, "left": left}
