"""Checkpoint folders <-> S3: restore to every host, upload changes, mirror deletions (moto S3)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from testkit.local_sagemaker import mocked_bucket

from local_mode.sagemaker.checkpoint_sync import CheckpointSync

BUCKET = "ckpt-tests"
URI = f"s3://{BUCKET}/checkpoints/run-1"


@pytest.fixture
def s3():
    with mocked_bucket(BUCKET) as client:
        yield client


def keys(s3) -> list[str]:
    return sorted(o["Key"] for o in s3.list_objects_v2(Bucket=BUCKET).get("Contents", []))


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_restore_copies_the_prefix_to_every_host_and_ignores_siblings(s3, tmp_path: Path):
    s3.put_object(Bucket=BUCKET, Key="checkpoints/run-1/checkpoint-2/state.json", Body=b"2")
    s3.put_object(Bucket=BUCKET, Key="checkpoints/run-10/checkpoint-9/state.json", Body=b"other run")
    dirs = {"algo-1": tmp_path / "h1", "algo-2": tmp_path / "h2"}
    assert CheckpointSync(s3, URI, dirs).restore() == 1
    for folder in dirs.values():
        assert [p.relative_to(folder).as_posix() for p in folder.rglob("*.json")] == [
            "checkpoint-2/state.json"
        ]


def test_sync_uploads_new_and_changed_files_and_mirrors_deletions(s3, tmp_path: Path):
    host = tmp_path / "h1"
    sync = CheckpointSync(s3, URI + "/", {"algo-1": host})
    sync.restore()
    write(host / "checkpoint-1" / "state.json", "1")
    write(host / "checkpoint-2" / "state.json", "2")
    sync.sync()
    assert keys(s3) == [
        "checkpoints/run-1/checkpoint-1/state.json",
        "checkpoints/run-1/checkpoint-2/state.json",
    ]
    uploads = sync.stats.uploaded
    sync.sync()
    assert sync.stats.uploaded == uploads  # nothing changed, nothing sent

    state = host / "checkpoint-2" / "state.json"
    state.write_text("2 again")
    os.utime(state, ns=(1, 1))  # a change the size alone would not show
    (host / "checkpoint-1" / "state.json").unlink()  # rotation
    sync.sync()
    assert keys(s3) == ["checkpoints/run-1/checkpoint-2/state.json"]
    assert s3.get_object(Bucket=BUCKET, Key=keys(s3)[0])["Body"].read() == b"2 again"


def test_a_host_that_only_restored_never_undoes_another_hosts_rotation(s3, tmp_path: Path):
    s3.put_object(Bucket=BUCKET, Key="checkpoints/run-1/checkpoint-1/state.json", Body=b"1")
    leader, worker = tmp_path / "h1", tmp_path / "h2"
    sync = CheckpointSync(s3, URI, {"algo-1": leader, "algo-2": worker})
    sync.restore()
    write(leader / "checkpoint-2" / "state.json", "2")
    (leader / "checkpoint-1" / "state.json").unlink()
    sync.sync()
    # algo-2 still holds its restored checkpoint-1 but did not change it: it is not uploaded again
    assert (worker / "checkpoint-1" / "state.json").exists()
    assert keys(s3) == ["checkpoints/run-1/checkpoint-2/state.json"]


def test_maybe_sync_waits_for_the_interval(s3, tmp_path: Path):
    host = tmp_path / "h1"
    sync = CheckpointSync(s3, URI, {"algo-1": host}, interval_seconds=3600)
    sync.restore()
    write(host / "a.bin", "x")
    sync.maybe_sync()
    assert keys(s3) == []
    sync.interval_seconds = 0.0
    sync.maybe_sync()
    assert keys(s3) == ["checkpoints/run-1/a.bin"]


@pytest.mark.parametrize("vanishes", ["checkpoint-4", "checkpoint-4/sub"])
def test_a_directory_rotation_deletes_during_the_scan_is_a_deletion_not_an_error(s3, tmp_path: Path, monkeypatch,
                                                                                  vanishes: str):
    """Rotation deletes a checkpoint while the sync walks the folder (a fresh-clone CI run met it: the walk raised
    FileNotFoundError, the emulated job ended its hosts and failed): the sync goes on, and what vanished is deleted
    in S3 as rotation meant (files the walk had already listed, by the next sync: every few seconds and at the
    job's end)."""
    folder = tmp_path / "h1"
    write(folder / "checkpoint-4" / "model.bin", "4")
    write(folder / "checkpoint-4" / "sub" / "rng.pth", "r")
    write(folder / "checkpoint-8" / "model.bin", "8")
    sync = CheckpointSync(s3, URI, {"algo-1": folder})
    sync.sync()
    assert len(keys(s3)) == 3
    write(folder / "checkpoint-12" / "model.bin", "12")
    real_scandir, gone = os.scandir, folder / vanishes

    def scandir_racing_rotation(path):  # the directory goes after its parent listed it, before it is read
        if not isinstance(path, int) and Path(path) == gone and gone.exists():
            shutil.rmtree(folder / "checkpoint-4")
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir_racing_rotation)
    sync.sync()
    assert "checkpoints/run-1/checkpoint-12/model.bin" in keys(s3)
    sync.sync()
    assert keys(s3) == ["checkpoints/run-1/checkpoint-12/model.bin", "checkpoints/run-1/checkpoint-8/model.bin"]
