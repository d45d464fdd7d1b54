"""Which S3 objects a channel selects and which host gets which (FullyReplicated / ShardedByS3Key)."""

from __future__ import annotations

import tarfile
from pathlib import Path

import pytest
from testkit.local_sagemaker import mocked_bucket

from local_mode.sagemaker.s3_channels import (
    ChannelError,
    S3Object,
    download_prefix,
    parse_s3_uri,
    select_objects,
    shard,
    tar_folder,
    upload_folder,
)

BUCKET = "channel-tests"


@pytest.fixture
def s3():
    with mocked_bucket(BUCKET) as client:
        yield client


def put(s3, *keys: str) -> None:
    for key in keys:
        s3.put_object(Bucket=BUCKET, Key=key, Body=key.encode())


def test_parse_s3_uri():
    assert parse_s3_uri("s3://b/a/b/") == ("b", "a/b/")
    assert parse_s3_uri("s3://b") == ("b", "")
    with pytest.raises(ChannelError):
        parse_s3_uri("/local/path")


def test_prefix_selects_keys_below_it_at_relative_paths(s3):
    put(
        s3,
        "data/train/a.jsonl",
        "data/train/sub/b.jsonl",
        "data/train/",
        "data/trainx/c.jsonl",
        "data/valid/d.jsonl",
    )
    objects = select_objects(s3, f"s3://{BUCKET}/data/train/")
    assert [o.relative_path for o in objects] == ["a.jsonl", "sub/b.jsonl"]  # folder marker skipped


def test_prefix_without_slash_is_a_plain_key_prefix(s3):
    put(s3, "data/train/a.jsonl", "data/trainx/c.jsonl")
    objects = select_objects(s3, f"s3://{BUCKET}/data/train")
    assert [o.relative_path for o in objects] == [
        "a.jsonl",
        "x/c.jsonl",
    ]  # as SageMaker: a key prefix, not a folder


def test_uri_naming_one_object_is_that_object(s3):
    put(s3, "models/m/model.tar.gz", "models/m/model.tar.gz.sha")
    objects = select_objects(s3, f"s3://{BUCKET}/models/m/model.tar.gz")
    assert objects == [S3Object("models/m/model.tar.gz", "model.tar.gz", len(b"models/m/model.tar.gz"))]


def objs(n: int) -> list[S3Object]:
    return [S3Object(f"k{i:02d}", f"k{i:02d}") for i in range(n)]


def test_fully_replicated_gives_every_host_everything():
    assert shard(objs(5), "FullyReplicated", 1, 3) == objs(5)


def test_sharded_by_s3_key_is_round_robin_over_sorted_keys():
    shares = [[o.key for o in shard(objs(5), "ShardedByS3Key", i, 2)] for i in range(2)]
    assert shares == [["k00", "k02", "k04"], ["k01", "k03"]]
    # every object exactly once, about 1/N each
    assert sorted(shares[0] + shares[1]) == [o.key for o in objs(5)]


def test_sharded_with_fewer_objects_than_hosts_leaves_some_empty():
    shares = [shard(objs(2), "ShardedByS3Key", i, 3) for i in range(3)]
    assert [len(s) for s in shares] == [1, 1, 0]


def test_unknown_distribution_is_rejected():
    with pytest.raises(ChannelError, match="S3DataDistributionType"):
        shard(objs(1), "Random", 0, 1)


def test_download_prefix_writes_one_hosts_share(s3, tmp_path: Path):
    put(s3, *(f"in/part-{i}.txt" for i in range(4)))
    got = download_prefix(
        s3, f"s3://{BUCKET}/in/", tmp_path, distribution="ShardedByS3Key", host_index=1, host_count=2
    )
    assert [o.relative_path for o in got] == ["part-1.txt", "part-3.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["part-1.txt", "part-3.txt"]
    assert (tmp_path / "part-3.txt").read_text() == "in/part-3.txt"


def test_upload_folder_and_tar_folder(s3, tmp_path: Path):
    folder = tmp_path / "model"
    (folder / "sub").mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / "sub" / "w.bin").write_bytes(b"\0")
    keys = upload_folder(s3, folder, f"s3://{BUCKET}/out/")
    assert keys == ["out/config.json", "out/sub/w.bin"]
    with tarfile.open(tar_folder(folder, tmp_path / "model.tar.gz")) as tar:
        assert sorted(tar.getnames()) == [
            "config.json",
            "sub",
            "sub/w.bin",
        ]  # content at the root, as SageMaker packs
