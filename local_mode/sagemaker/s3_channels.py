"""Copy S3 data to and from a job's host folders, as SageMaker does for channels and outputs.

Which objects a prefix selects follows the SageMaker Python SDK's local mode (``download_folder``): an
S3 URI naming one object is that object (kept under its base name); otherwise every object whose key
starts with the prefix, at the path relative to the prefix, "folder" marker keys (ending in "/") skipped.

ShardedByS3Key: SageMaker documents only that each instance gets about 1/N of the objects and that with
fewer objects than instances some get none. The rule here: the selected objects sorted by key, object i
goes to host i mod N (host index = position of algo-<k> in the sorted host list). Deterministic, within one
object of an even split, and independent of object sizes.
"""

from __future__ import annotations

import os
import tarfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

FULLY_REPLICATED = "FullyReplicated"
SHARDED_BY_S3_KEY = "ShardedByS3Key"


class ChannelError(Exception):
    """A channel or output the local runner cannot lay out (reported as the job's FailureReason)."""


@dataclass(frozen=True)
class S3Object:
    key: str
    relative_path: str
    size: int = 0


def parse_s3_uri(uri: str) -> tuple[str, str]:
    """`s3://bucket/key/prefix` -> ("bucket", "key/prefix")."""
    if not uri.startswith("s3://"):
        raise ChannelError(f"not an S3 URI: {uri!r}")
    bucket, _, key = uri[len("s3://") :].partition("/")
    if not bucket:
        raise ChannelError(f"S3 URI without a bucket: {uri!r}")
    return bucket, key


def _list(s3: Any, bucket: str, prefix: str) -> Iterator[dict[str, Any]]:
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        yield from page.get("Contents", [])


def select_objects(s3: Any, uri: str) -> list[S3Object]:
    """The objects an S3Prefix URI selects, sorted by key, with their paths inside the channel."""
    bucket, prefix = parse_s3_uri(uri)
    listed = [obj for obj in _list(s3, bucket, prefix) if not obj["Key"].endswith("/")]
    exact = [obj for obj in listed if obj["Key"] == prefix]
    if exact and not prefix.endswith("/"):
        return [S3Object(prefix, os.path.basename(prefix), exact[0].get("Size", 0))]
    objects = []
    for obj in listed:
        relative = obj["Key"][len(prefix) :].lstrip("/")
        if relative:
            objects.append(S3Object(obj["Key"], relative, obj.get("Size", 0)))
    return sorted(objects, key=lambda o: o.key)


def shard(objects: list[S3Object], distribution: str, host_index: int, host_count: int) -> list[S3Object]:
    """The objects one host receives under a data distribution type."""
    if distribution in ("", FULLY_REPLICATED):
        return list(objects)
    if distribution == SHARDED_BY_S3_KEY:
        return [obj for i, obj in enumerate(objects) if i % host_count == host_index]
    raise ChannelError(f"unknown S3DataDistributionType {distribution!r}")


def download_objects(s3: Any, bucket: str, objects: Iterable[S3Object], dest: Path) -> int:
    """Download objects under dest at their relative paths; returns the bytes written."""
    dest.mkdir(parents=True, exist_ok=True)
    total = 0
    for obj in objects:
        target = (dest / obj.relative_path).resolve()
        if not target.is_relative_to(dest.resolve()):
            raise ChannelError(f"S3 key {obj.key!r} escapes the channel folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(bucket, obj.key, str(target))
        total += target.stat().st_size
    return total


def download_prefix(
    s3: Any,
    uri: str,
    dest: Path,
    *,
    distribution: str = FULLY_REPLICATED,
    host_index: int = 0,
    host_count: int = 1,
) -> list[S3Object]:
    """Copy one host's share of an S3 prefix into dest; returns the objects copied."""
    bucket, _ = parse_s3_uri(uri)
    objects = shard(select_objects(s3, uri), distribution, host_index, host_count)
    download_objects(s3, bucket, objects, dest)
    return objects


def upload_folder(s3: Any, folder: Path, uri: str) -> list[str]:
    """Upload every file under folder to the S3 prefix uri (relative paths kept); returns the keys."""
    bucket, prefix = parse_s3_uri(uri)
    keys = []
    if not folder.is_dir():
        return keys
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        key = join_key(prefix, path.relative_to(folder).as_posix())
        s3.upload_file(str(path), bucket, key)
        keys.append(key)
    return keys


def join_key(prefix: str, relative: str) -> str:
    if not prefix:
        return relative
    return prefix.rstrip("/") + "/" + relative


def tar_folder(folder: Path, target: Path) -> Path:
    """A gzip tarball of folder's content at its root, as SageMaker packs model.tar.gz/output.tar.gz."""
    target.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(target, "w:gz") as tar:
        if folder.is_dir():
            for path in sorted(folder.rglob("*")):
                tar.add(path, arcname=path.relative_to(folder).as_posix(), recursive=False)
    return target


def safe_extract(tarball: Path, dest: Path) -> None:
    """Unpack a tar.gz refusing members that would land outside dest."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tarball, "r:*") as tar:
        tar.extractall(dest, filter="data")
