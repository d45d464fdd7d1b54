"""Registered model artifacts are frozen: copied, pinned to the version training wrote, under `registry/`.

Every job runs with one shared execution role that may write `models/`, so the weights behind a model package
must not stay where a later job could overwrite them. Finish copies the exact object version the training job
wrote to `registry/<run_id>/<job>/model.tar.gz` (no job may write `registry/`: the SageMaker role has no grant
there and the bucket policy denies every other writer but Finish) and registers that copy with its ETag; the
source version id, the copy's version id and ETag go into the package's metadata.
"""

from __future__ import annotations

from typing import Any

from aws import aws_errors
from preflight import parse_s3_uri
from settings import Settings

REGISTRY_PREFIX = "registry/"


def registry_key(run_id: str, job_name: str, source_key: str) -> str:
    return f"{REGISTRY_PREFIX}{run_id}/{job_name}/{source_key.rsplit('/', 1)[-1]}"


def freeze_model_artifact(s3: Any, settings: Settings, run_id: str, job_name: str, model_uri: str) -> dict[str, str]:
    """Copies the model artifact's current version under registry/; returns {uri, etag, version_id,
    source_uri, source_version_id}."""
    bucket, key = parse_s3_uri(model_uri)
    with aws_errors():
        source = s3.head_object(Bucket=bucket, Key=key)
        copy_source = {"Bucket": bucket, "Key": key}
        if source.get("VersionId") and source["VersionId"] != "null":
            copy_source["VersionId"] = source["VersionId"]
        dest_key = registry_key(run_id, job_name, key)
        # Managed copy: server-side, multipart above 8 MB, so artifacts over 5 GB copy too.
        s3.copy(copy_source, settings.artifacts_bucket, dest_key,
                ExtraArgs={"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": settings.kms_key_arn})
        frozen = s3.head_object(Bucket=settings.artifacts_bucket, Key=dest_key)
    return {"uri": f"s3://{settings.artifacts_bucket}/{dest_key}", "etag": str(frozen["ETag"]).strip('"'),
            "version_id": str(frozen.get("VersionId") or ""), "source_uri": model_uri,
            "source_version_id": str(copy_source.get("VersionId", "")), "source_etag": str(source["ETag"]).strip('"')}


def pinned(inference_specification: dict[str, Any], frozen: dict[str, str]) -> dict[str, Any]:
    """The model package's containers point at the frozen copy, pinned by its ETag (ModelDataETag)."""
    for container in inference_specification["Containers"]:
        container["ModelDataUrl"] = frozen["uri"]
        container["ModelDataETag"] = frozen["etag"]
    return inference_specification
