"""Spot-safe checkpoints in the SageMaker checkpoint dir (CheckpointConfig.LocalPath).

Layout: `<checkpoint_dir>/checkpoint-<step>/` as the Trainer writes it (model, optimizer, scheduler and
trainer state by global rank 0 only; `rng_state_<rank>.pth` by each rank), plus one completion marker per
node, `_complete.<host>.json`, written by the node's local rank 0 *after* every rank has finished writing.
Each marker lists the files the node wrote and their sizes. Every node syncs its own local directory to
the same S3 prefix, so no two nodes may write a file of the same name: the Trainer's files are
rank-unique and the markers carry the host name.

A checkpoint is complete when a marker exists for every host its markers name and every file a marker
lists exists with the listed size (so a marker that reached S3 before the data it describes does not
count). On start every rank lists the complete checkpoints it sees and the ranks resume from the newest
step that all of them see as complete. Partial checkpoints are logged and skipped. Rotation
(`save_total_limit`) deletes only checkpoints older than the newest complete one and never the one this
run resumed from. Deleting a local directory deletes it in S3 too (the sync mirrors it), so each node
deletes only from its own local directory and all nodes decide the same deletions from the same inputs.

The storage is abstracted (`LocalStorage`) so the logic is tested with a fake.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

logger = logging.getLogger(__name__)

PREFIX = "checkpoint-"
MARKER_PREFIX = "_complete."
MARKER_SUFFIX = ".json"
_STEP_RE = re.compile(r"^checkpoint-(\d+)$")


def marker_name(host: str) -> str:
    return f"{MARKER_PREFIX}{host}{MARKER_SUFFIX}"


def is_marker(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.startswith(MARKER_PREFIX) and (base.endswith(MARKER_SUFFIX) or base.endswith(".tmp"))


class LocalStorage:
    """The few file operations checkpoints need (tests substitute a fake)."""

    def list_dirs(self, root: str) -> list[str]:
        try:
            return sorted(entry.name for entry in os.scandir(root) if entry.is_dir())
        except FileNotFoundError:
            return []

    def list_files(self, directory: str) -> dict[str, int]:
        """relative path -> size, recursively."""
        out: dict[str, int] = {}
        base = Path(directory)
        if not base.is_dir():
            return out
        for path in base.rglob("*"):
            if path.is_file():
                out[path.relative_to(base).as_posix()] = path.stat().st_size
        return out

    def read_text(self, path: str) -> str | None:
        try:
            return Path(path).read_text()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def write_text_atomic(self, path: str, text: str) -> None:
        tmp = f"{path}.tmp"
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)

    def remove_tree(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)


def step_of(name: str) -> int | None:
    match = _STEP_RE.match(name)
    return int(match.group(1)) if match else None


@dataclass
class CheckpointInfo:
    step: int
    path: str
    complete: bool
    reason: str = ""
    hosts: list[str] = field(default_factory=list)


def write_node_marker(
    checkpoint_path: str,
    *,
    host: str,
    hosts: Sequence[str],
    step: int,
    world_size: int,
    storage: LocalStorage | None = None,
) -> dict:
    """Write this node's completion marker, listing the files present on this node (call after a barrier)."""
    storage = storage or LocalStorage()
    files = {name: size for name, size in storage.list_files(checkpoint_path).items() if not is_marker(name)}
    marker = {
        "step": step,
        "host": host,
        "hosts": sorted(hosts),
        "world_size": world_size,
        "files": dict(sorted(files.items())),
    }
    storage.write_text_atomic(os.path.join(checkpoint_path, marker_name(host)), json.dumps(marker, indent=1))
    return marker


def inspect(checkpoint_path: str, storage: LocalStorage | None = None) -> tuple[bool, str, list[str]]:
    """(complete, reason when not, hosts) for one checkpoint directory."""
    storage = storage or LocalStorage()
    present = storage.list_files(checkpoint_path)
    markers = sorted(name for name in present if "/" not in name and name.startswith(MARKER_PREFIX)
                     and name.endswith(MARKER_SUFFIX))
    if not markers:
        return False, "no completion marker (the save was interrupted)", []
    parsed = []
    for name in markers:
        text = storage.read_text(os.path.join(checkpoint_path, name))
        try:
            parsed.append(json.loads(text or ""))
        except ValueError:
            return False, f"unreadable marker {name}", []
    hosts = sorted({h for m in parsed for h in m.get("hosts", [])})
    have = {m.get("host") for m in parsed}
    missing = [h for h in hosts if h not in have]
    if missing:
        return False, f"no completion marker from host(s) {', '.join(missing)}", hosts
    for marker in parsed:
        for name, size in marker.get("files", {}).items():
            if name not in present:
                return False, f"file {name} listed by {marker.get('host')} is missing", hosts
            if present[name] != size:
                return False, f"file {name} has {present[name]} bytes, marker says {size}", hosts
    return True, "", hosts


def discover(root: str, storage: LocalStorage | None = None) -> list[CheckpointInfo]:
    """All checkpoint-<step> directories under root, oldest first, each marked complete or not."""
    storage = storage or LocalStorage()
    infos = []
    for name in storage.list_dirs(root):
        step = step_of(name)
        if step is None:
            continue
        path = os.path.join(root, name)
        complete, reason, hosts = inspect(path, storage)
        infos.append(CheckpointInfo(step=step, path=path, complete=complete, reason=reason, hosts=hosts))
    return sorted(infos, key=lambda info: info.step)


def newest_complete(infos: Iterable[CheckpointInfo]) -> CheckpointInfo | None:
    complete = [info for info in infos if info.complete]
    return complete[-1] if complete else None


def choose_resume_step(complete_steps_per_rank: Sequence[Iterable[int]]) -> int | None:
    """The newest step every rank sees as complete (None: start from scratch)."""
    sets = [set(steps) for steps in complete_steps_per_rank]
    if not sets:
        return None
    common = set.intersection(*sets)
    return max(common) if common else None


def rotation_victims(
    steps_on_disk: Iterable[int],
    known_complete: Iterable[int],
    *,
    keep: int | None,
    protected: Iterable[int] = (),
) -> list[int]:
    """Steps to delete: everything older than the newest complete checkpoint except the newest `keep`
    complete ones and the protected ones (the checkpoint this run resumed from).

    Nothing newer than the newest complete checkpoint is touched. keep=None/0 keeps all complete ones
    (partial ones older than the newest complete checkpoint are still removed).
    """
    complete = sorted(set(known_complete))
    if not complete:
        return []
    newest = complete[-1]
    keep_set = set(complete[-keep:]) if keep else set(complete)
    keep_set |= set(protected)
    keep_set.add(newest)
    return sorted(step for step in set(steps_on_disk) if step < newest and step not in keep_set)
