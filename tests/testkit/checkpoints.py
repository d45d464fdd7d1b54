"""Checkpoints in S3 as the training code writes them, for the Lambda and state-machine tests (issue 9)."""

from __future__ import annotations

import hashlib
import json
import posixpath
from typing import Any

from contract.checkpoint_marker import marker_name
from hftrain.checkpoint import manager as ck
from hftrain.checkpoint.storage import LocalStorage


def upload_checkpoint(s3: Any, uri: str, workdir: Any, step: int, *, hosts: tuple[str, ...] = ("algo-1",),
                      saved_at: float | None = None, skip: tuple[str, ...] = ()) -> None:
    """Write checkpoint-<step> with the training code's own marker writer (one marker per host), then upload it
    as the nodes' sync would; `skip` leaves files (relative paths) out of S3."""
    from pathlib import Path

    from hftrain.checkpoint import manager as ck

    identity = {"task": "text-classification", "model_fingerprint": "f" * 32, "model": {"model_type": "bert"}}
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    for rank, host in enumerate(hosts):
        node = Path(workdir) / host / f"checkpoint-{step}"
        node.mkdir(parents=True, exist_ok=True)
        (node / f"rng_state_{rank}.pth").write_bytes(b"rng" * (rank + 1))
        if rank == 0:
            for name in ("model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json"):
                (node / name).write_bytes(name.encode() * 10)
        ck.write_node_marker(str(node), host=host, hosts=list(hosts), step=step, world_size=len(hosts),
                             identity=identity, lineage="run", now=saved_at)
        for path in sorted(node.rglob("*")):
            rel = f"checkpoint-{step}/{path.relative_to(node).as_posix()}"
            if path.is_file() and rel not in skip:
                s3.put_object(Bucket=bucket, Key=f"{prefix.rstrip('/')}/{rel}", Body=path.read_bytes())


IDENTITY = {"task": "text-classification", "model_fingerprint": "f" * 32, "model": {"model_type": "bert"}}
OTHER = {"task": "text-classification", "model_fingerprint": "0" * 32, "model": {"model_type": "roberta"}}
RESUMABLE = {"model.safetensors": "weights", "optimizer.pt": "optim", "scheduler.pt": "sched",
             "trainer_state.json": "{}"}


class FakeStorage(LocalStorage):
    """An in-memory file tree: path -> text; hashes are sha256 of the text."""

    def __init__(self):
        self.files: dict[str, str] = {}

    def add(self, path, text="x"):
        self.files[path] = text

    def list_dirs(self, root):
        prefix = root.rstrip("/") + "/"
        return sorted({p[len(prefix):].split("/", 1)[0] for p in self.files
                       if p.startswith(prefix) and "/" in p[len(prefix):]})

    def list_files(self, directory):
        prefix = directory.rstrip("/") + "/"
        return {p[len(prefix):]: len(t) for p, t in self.files.items() if p.startswith(prefix)}

    def read_text(self, path):
        return self.files.get(path)

    def write_text_atomic(self, path, text):
        self.files[path] = text

    def hash_file(self, path, algorithm):
        if path not in self.files:
            raise FileNotFoundError(path)
        return hashlib.sha256(self.files[path].encode()).hexdigest()

    def remove_tree(self, path):
        prefix = path.rstrip("/") + "/"
        for p in [p for p in self.files if p.startswith(prefix)]:
            del self.files[p]

    def rename(self, source, target):
        prefix = source.rstrip("/") + "/"
        for p in [p for p in self.files if p.startswith(prefix)]:
            self.files[target.rstrip("/") + "/" + p[len(prefix):]] = self.files.pop(p)

    def exists(self, path):
        prefix = path.rstrip("/") + "/"
        return path in self.files or any(p.startswith(prefix) for p in self.files)

    def list_links(self, directory):
        return {}

    def stage_files(self, source, names, target):
        self.remove_tree(target)
        for name in names:
            self.files[f"{target}/{name}"] = self.files[f"{source}/{name}"]
        return "linked"

    def remove_files(self, directory, names):
        for name in names:
            self.files.pop(f"{directory}/{name}", None)
        return []

    def remove_empty_dirs(self, directory):
        return not self.exists(directory)


def save(storage, root, step, *, hosts=("algo-1",), markers=None, identity=IDENTITY, lineage="run-a"):
    """A checkpoint as the training code writes it: rank files per host, shared files on the first host."""
    d = posixpath.join(root, f"checkpoint-{step}")
    for rank, host in enumerate(hosts):
        scratch = FakeStorage()  # what this node wrote, for its own marker
        node_files = {f"rng_state_{rank}.pth": "rng", f"pytorch_model_fsdp_0/__{rank}_0.distcp": "shard"}
        if rank == 0:
            node_files.update({**RESUMABLE, "trainer_state.json": json.dumps({"global_step": step})})
        for name, text in node_files.items():
            storage.add(f"{d}/{name}", text)
            scratch.add(f"{d}/{name}", text)
        if markers is None or host in markers:
            ck.write_node_marker(d, host=host, hosts=list(hosts), step=step, world_size=len(hosts),
                                 identity=identity, lineage=lineage, storage=scratch)
            storage.add(f"{d}/{marker_name(host)}", scratch.files[f"{d}/{marker_name(host)}"])
    return d
