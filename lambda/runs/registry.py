"""Registered model artifacts are frozen: copied, pinned to the version training wrote, under `registry/`.

Every job runs with one shared execution role that may write `models/`, so the weights behind a model package
must not stay where a later job could overwrite them, and Finish must copy the version *this job* wrote, not the
key's current one (another run's job could have put a newer version between the job's end and Finish). The job's
own description says when SageMaker uploaded its artifact: during the job's `Uploading` phase, which ends at
`TrainingEndTime` (DescribeTrainingJob, SecondaryStatusTransitions). Of the key's versions (ListObjectVersions;
the artifacts bucket is versioned) the one created in that window is the job's; none, or more than one (someone
else wrote the key while the job uploaded), and nothing is registered (`ModelArtifactError`). Finish copies that
version by its VersionId to `registry/<run_id>/<job>/model.tar.gz` (no job may write `registry/`: the SageMaker
role has no grant there and the bucket policy denies every other writer but Finish), checks the copy's source
ETag, and registers the copy with its ETag; the source version id and ETag go into the package's metadata.
The final metrics the package records are written there too (`registry/<run_id>/<job>/metrics.json`, with their
SHA-256 as the package's ContentDigest): `outputs/<run_id>/metrics.json`, the user's copy, is writable by jobs.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta
from hashlib import sha256
from typing import Any

from hfsm_lambda.aws import aws_errors
from hfsm_lambda.errors import ModelArtifactError
from hfsm_lambda.plan.preflight import parse_s3_uri
from hfsm_lambda.s3_layout import REGISTRY_PREFIX
from hfsm_lambda.settings import Settings

MAX_VERSIONS = 1000  # of the model key looked at: a key with more is said, not listed to its end
# S3's LastModified has whole seconds (and is the start of a multipart upload): the window is widened by this.
CLOCK_SLACK = timedelta(seconds=1)


def registry_key(run_id: str, job_name: str, source_key: str) -> str:
    return f"{REGISTRY_PREFIX}{run_id}/{job_name}/{source_key.rsplit('/', 1)[-1]}"


def upload_window(desc: dict[str, Any]) -> tuple[datetime | None, datetime | None]:
    """(from, to) in which SageMaker uploaded the job's artifact: its last Uploading phase (else its training
    start) to TrainingEndTime (else the phase's end); None where the description does not say."""
    uploading = [t for t in desc.get("SecondaryStatusTransitions") or [] if t.get("Status") == "Uploading"]
    start = (uploading[-1].get("StartTime") if uploading else None) or desc.get("TrainingStartTime")
    end = desc.get("TrainingEndTime") or (uploading[-1].get("EndTime") if uploading else None)
    return start, end


def written_version(s3: Any, bucket: str, key: str, desc: dict[str, Any]) -> dict[str, Any]:
    """The one version of `key` created in the job's upload window (ListObjectVersions entry)."""
    start, end = upload_window(desc)
    low = start.replace(microsecond=0) - CLOCK_SLACK if start else None
    high = end + CLOCK_SLACK if end else None
    versions = []
    with aws_errors():
        for page in s3.get_paginator("list_object_versions").paginate(
                Bucket=bucket, Prefix=key, PaginationConfig={"MaxItems": MAX_VERSIONS}):
            versions += [v for v in page.get("Versions", []) if v["Key"] == key]
    inside = [v for v in versions if (low is None or v["LastModified"] >= low)
              and (high is None or v["LastModified"] <= high)]
    if len(inside) != 1:
        seen = ", ".join(f"{v['VersionId']} at {v['LastModified']:%Y-%m-%dT%H:%M:%SZ}" for v in versions[:10])
        what = "no version" if not inside else f"{len(inside)} versions"
        raise ModelArtifactError(
            f"s3://{bucket}/{key} has {what} written while job {desc.get('TrainingJobName')} uploaded it "
            f"({start} to {end}); versions: {seen or 'none'}. Nothing was registered: another writer may have "
            "replaced the model; check the versions, then register the right one by hand")
    return inside[0]


def freeze_model_artifact(s3: Any, settings: Settings, run_id: str, job_name: str, model_uri: str,
                          desc: dict[str, Any]) -> dict[str, str]:
    """Copies the version of the model artifact the job wrote under registry/; returns {uri, etag, version_id,
    source_uri, source_version_id, source_etag}."""
    bucket, key = parse_s3_uri(model_uri)
    version = written_version(s3, bucket, key, desc)
    copy_source = {"Bucket": bucket, "Key": key}
    if version.get("VersionId") and version["VersionId"] != "null":
        copy_source["VersionId"] = version["VersionId"]
    with aws_errors():
        source = s3.head_object(**copy_source)
        if str(source["ETag"]).strip('"') != str(version["ETag"]).strip('"'):
            raise ModelArtifactError(f"{model_uri} version {version.get('VersionId')} changed between listing and "
                                     "copying; nothing was registered")
        dest_key = registry_key(run_id, job_name, key)
        # Managed copy: server-side, multipart above 8 MB, so artifacts over 5 GB copy too.
        s3.copy(copy_source, settings.artifacts_bucket, dest_key,
                ExtraArgs={"ServerSideEncryption": "aws:kms", "SSEKMSKeyId": settings.kms_key_arn})
        frozen = s3.head_object(Bucket=settings.artifacts_bucket, Key=dest_key)
    return {"uri": f"s3://{settings.artifacts_bucket}/{dest_key}", "etag": str(frozen["ETag"]).strip('"'),
            "version_id": str(frozen.get("VersionId") or ""), "source_uri": model_uri,
            "source_version_id": str(copy_source.get("VersionId", "")), "source_etag": str(source["ETag"]).strip('"')}


def freeze_metrics(s3: Any, settings: Settings, run_id: str, job_name: str,
                   metrics: dict[str, Any]) -> dict[str, str]:
    """Writes the metrics the package records under registry/; returns {metrics_uri, metrics_sha256}."""
    body = json.dumps(metrics, indent=1, sort_keys=True, allow_nan=False).encode()
    key = registry_key(run_id, job_name, "metrics.json")
    with aws_errors():
        s3.put_object(Bucket=settings.artifacts_bucket, Key=key, Body=body, ContentType="application/json",
                      ServerSideEncryption="aws:kms", SSEKMSKeyId=settings.kms_key_arn)
    return {"metrics_uri": f"s3://{settings.artifacts_bucket}/{key}", "metrics_sha256": sha256(body).hexdigest()}


def pinned(inference_specification: dict[str, Any], frozen: dict[str, str]) -> dict[str, Any]:
    """The model package's containers point at the frozen copy, pinned by its ETag (ModelDataETag)."""
    for container in inference_specification["Containers"]:
        container["ModelDataUrl"] = frozen["uri"]
        container["ModelDataETag"] = frozen["etag"]
    return inference_specification
