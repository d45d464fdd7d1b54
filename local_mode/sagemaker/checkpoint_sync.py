"""Checkpoint folders <-> CheckpointConfig.S3Uri, with SageMaker's managed-spot semantics.

- At every (re)start the whole S3 prefix is copied into every host's checkpoint folder.
- While the job runs, each host's folder is synced to the one shared prefix: new or changed files are
  uploaded, files deleted locally are deleted in S3 (rotation is mirrored). A host only mirrors its own
  changes: a file it got at restore and never touched is neither re-uploaded nor deleted, so a host that
  does not write checkpoints cannot undo another host's rotation.
- Files with one name written by several hosts overwrite each other in S3 (last upload wins).
"""

from __future__ import annotations

import logging
import os
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local_mode.sagemaker.s3_channels import download_prefix, join_key, parse_s3_uri

log = logging.getLogger(__name__)

Snapshot = dict[str, tuple[int, int]]  # relative path -> (size, mtime_ns)


def scan(folder: Path) -> Snapshot:
    """Files under folder with their size and modification time.

    The training code deletes while this runs (rotation, superseded caches, staged copies): a directory that goes
    between its parent's listing and its own is skipped (os.walk ignores it; Path.rglob raises FileNotFoundError,
    which once ended an emulated job), and its files count as deleted."""
    found: Snapshot = {}
    for parent, _dirs, names in os.walk(folder):  # followlinks=False: a linked directory is not entered
        for name in names:
            path = Path(parent) / name
            try:
                info = path.stat()  # one stat per file (a link is followed, as is_file would)
            except FileNotFoundError:  # deleted while scanning
                continue
            if stat.S_ISREG(info.st_mode):
                found[path.relative_to(folder).as_posix()] = (info.st_size, info.st_mtime_ns)
    return found


@dataclass
class SyncStats:
    uploaded: int = 0
    deleted: int = 0
    restored: int = 0


@dataclass
class CheckpointSync:
    """Syncs the checkpoint folder of each host with one S3 prefix."""

    s3: Any
    s3_uri: str
    host_dirs: dict[str, Path]
    interval_seconds: float = 2.0
    stats: SyncStats = field(default_factory=SyncStats)
    _snapshots: dict[str, Snapshot] = field(default_factory=dict)
    _last_sync: float = 0.0

    def restore(self) -> int:
        """Copy the S3 prefix into every host folder (the start of an attempt); returns objects per host."""
        count = 0
        for host, folder in self.host_dirs.items():
            folder.mkdir(parents=True, exist_ok=True)
            count = len(download_prefix(self.s3, self._prefix_uri(), folder))
            self._snapshots[host] = scan(folder)
        self.stats.restored += count
        self._last_sync = time.monotonic()
        return count

    def maybe_sync(self) -> None:
        """Sync when the interval has passed since the last sync."""
        if time.monotonic() - self._last_sync >= self.interval_seconds:
            self.sync()

    def sync(self) -> None:
        """Mirror each host's changes since its last sync to S3."""
        bucket, prefix = parse_s3_uri(self._prefix_uri())
        for host, folder in self.host_dirs.items():
            before = self._snapshots.get(host, {})
            now = scan(folder)
            for relative, signature in sorted(now.items()):
                if before.get(relative) == signature:
                    continue
                try:
                    self.s3.upload_file(str(folder / relative), bucket, join_key(prefix, relative))
                    self.stats.uploaded += 1
                except FileNotFoundError:  # removed between scan and upload: the next sync deletes it
                    now.pop(relative, None)
            gone = sorted(set(before) - set(now))
            for start in range(0, len(gone), 1000):
                batch = gone[start : start + 1000]
                self.s3.delete_objects(
                    Bucket=bucket,
                    Delete={"Objects": [{"Key": join_key(prefix, r)} for r in batch], "Quiet": True},
                )
                self.stats.deleted += len(batch)
            self._snapshots[host] = now
        self._last_sync = time.monotonic()

    def _prefix_uri(self) -> str:
        # A checkpoint URI names a "folder": keys under it, never a sibling prefix like ".../run-1b".
        return self.s3_uri.rstrip("/") + "/"
