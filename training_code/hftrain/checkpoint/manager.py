"""Checkpoints you can trust: completion markers with content hashes, verification, safe rotation.

Layout: `<checkpoint_dir>/checkpoint-<step>/` as the Trainer writes it (model, optimizer, scheduler and
trainer state by global rank 0; `rng_state_<rank>.pth` by each rank; FSDP: sharded directories such as
`pytorch_model_fsdp_0/` and `optimizer_0/` with one file per rank), plus one completion marker per node,
`_complete.<host>.json`, written by the node's local rank 0 *after* every rank has finished writing.

A marker (format 2) records, for every file the node wrote (recursively, so sharded directories are covered
file by file), its size and a fast content hash (xxh3-128; blake2b where xxhash is missing), plus the model
config fingerprint, the task, the world size, the host set, the global step, when it was saved and the run's
lineage (an id shared by every checkpoint of one run, across restarts). Every node syncs its own directory to
the one S3 prefix, so no two nodes may write a file of the same name: the Trainer's files are rank-unique and
the markers carry the host name.

A checkpoint *verifies* when a marker exists for every host its markers name, no two markers claim one file,
every listed file exists with the listed size and hash, the markers agree on the step, the world size and the
identity, the identity is the run's (else it is *foreign*, refused by the caller), and it holds what a resume
needs (weights, optimizer, scheduler, trainer state). Anything else under the checkpoint dir (user files,
other names, checkpoints without a marker) is never deleted: rotation deletes only checkpoints of this run's
lineage that are older than a newer verified one (see `rotation_victims`), and of those only the files their
markers list (`remove_checkpoint`: a file someone added is kept, with its directory), and a checkpoint that failed
verification is moved out of the way (`quarantine_name`) only when the run is about to save the same step.

Symbolic links are never followed: the training code writes none, so a link inside a checkpoint (which could point
anywhere) makes it corrupt, and a `checkpoint-<step>` that is itself a link is not a checkpoint (never resumed,
never rotated). A resume loads only what the markers list and verify: `stage` gives the Trainer a directory of
its own (`view_dir`, outside the synced checkpoint dir) holding hard links to (or, across file systems, links by
name to) exactly the listed files, and the content hashes are checked on those, so a file added later (an `rng_state.pth`
nobody saved) is never opened and a file swapped after verification is not the one loaded.

The storage is abstracted (`LocalStorage`) so the logic is tested with a fake.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from contract.checkpoint_marker import (
    MARKER_FORMAT,
    MARKER_PREFIX,
    MARKER_SUFFIX,
    PREFIX,
    MarkerError,
    format_marker,
    is_marker_name,
    marker_name,
    parse_marker,
    step_of,
)
from contract.refused_names import QUARANTINE_TAG
from hftrain.checkpoint.storage import LocalStorage, hash_algorithm

logger = logging.getLogger(__name__)

# Verified checkpoints of a run kept when save_total_limit is not given (the Trainer's default keeps all). SageMaker
# copies the whole checkpoint prefix to every instance at every start: each one kept is downloaded by every restart.
# Two, not one: the newest may have been cut short in S3 by the interruption that caused the restart (the sync of
# its last files lost with the instance); the one before it was complete long before.
DEFAULT_KEEP = 2

# What a resume needs, by role: any one name of each group (directories hold FSDP's sharded state).
WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json", "pytorch_model.bin",
                "pytorch_model.bin.index.json", "pytorch_model_fsdp.bin", "adapter_model.safetensors",
                "adapter_model.bin")
WEIGHT_DIRS = ("pytorch_model_fsdp_0",)
OPTIMIZER_FILES = ("optimizer.pt", "optimizer.bin")
OPTIMIZER_DIRS = ("optimizer_0",)
SCHEDULER_FILE = "scheduler.pt"
TRAINER_STATE_FILE = "trainer_state.json"


def safetensors_files(folder: str) -> list[str] | None:
    """The safetensors weight files of a saved model (sharded via its index, or the single file); None if none."""
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index) as handle:
            return sorted(set(json.load(handle)["weight_map"].values()))
    if os.path.isfile(os.path.join(folder, "model.safetensors")):
        return ["model.safetensors"]
    return None

# Config fields that say nothing about the weights' meaning (paths, library versions, runtime switches).
_VOLATILE_CONFIG_KEYS = {
    "_name_or_path", "transformers_version", "_commit_hash", "_attn_implementation", "_attn_implementation_autoset",
    "_attn_implementation_internal", "attn_implementation", "torch_dtype", "dtype", "use_cache",
    "output_attentions", "output_hidden_states", "return_dict", "_experts_implementation",
}
_SUMMARY_KEYS = ("model_type", "architectures", "hidden_size", "d_model", "num_hidden_layers", "num_layers",
                 "vocab_size", "num_labels")


# ---------------------------------------------------------------- identity


def model_identity(config: Any, task: str) -> dict[str, Any]:
    """{task, model_fingerprint, model}: what a checkpoint must match to be resumed by this run.

    The fingerprint is a sha256 of the model config (as a dict, volatile fields removed: the model's path and
    library version change between attempts without changing what the weights mean); `model` is a short
    human-readable summary for messages.
    """
    raw = config.to_dict() if hasattr(config, "to_dict") else dict(config)
    kept = {k: v for k, v in raw.items() if k not in _VOLATILE_CONFIG_KEYS}
    text = json.dumps(kept, sort_keys=True, default=str, separators=(",", ":"))
    summary = {k: raw[k] for k in _SUMMARY_KEYS if raw.get(k) is not None}
    return {"task": task, "model_fingerprint": hashlib.sha256(text.encode()).hexdigest()[:32], "model": summary}


def describe_identity(identity: dict[str, Any]) -> str:
    model = identity.get("model") or {}
    parts = [f"{k}={v}" for k, v in model.items() if k != "architectures"]
    arch = ",".join(model.get("architectures") or []) or "?"
    return (f"task {identity.get('task')}, {arch} ({' '.join(parts)}), config fingerprint "
            f"{str(identity.get('model_fingerprint'))[:12]}")


def same_identity(a: dict[str, Any], b: dict[str, Any]) -> bool:
    return a.get("task") == b.get("task") and a.get("model_fingerprint") == b.get("model_fingerprint")


def is_marker(name: str) -> bool:
    base = name.rsplit("/", 1)[-1]
    return base.startswith(MARKER_PREFIX) and (base.endswith(MARKER_SUFFIX) or base.endswith(".tmp"))


def utc_iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# ---------------------------------------------------------------- markers


def write_node_marker(
    checkpoint_path: str,
    *,
    host: str,
    hosts: Sequence[str],
    step: int,
    world_size: int,
    identity: dict[str, Any],
    lineage: str,
    storage: LocalStorage | None = None,
    now: float | None = None,
) -> dict:
    """Hash every file this node wrote into the checkpoint and write the node's marker last (atomically).

    Call after a barrier (every rank has finished writing) on each node's local rank 0.
    """
    storage = storage or LocalStorage()
    algorithm = hash_algorithm()
    started = time.perf_counter()
    files = {}
    for name, size in sorted(storage.list_files(checkpoint_path).items()):
        if is_marker(name):
            continue
        files[name] = {"size": size, "hash": storage.hash_file(os.path.join(checkpoint_path, name), algorithm)}
    saved_at = time.time() if now is None else now
    marker = {
        "format": MARKER_FORMAT,
        "step": step,
        "host": host,
        "hosts": sorted(hosts),
        "world_size": world_size,
        "task": identity.get("task"),
        "model_fingerprint": identity.get("model_fingerprint"),
        "model": identity.get("model", {}),
        "lineage": lineage,
        "saved_at": utc_iso(saved_at),
        "saved_at_unix": round(saved_at, 3),
        "hash_algorithm": algorithm,
        "hash_seconds": round(time.perf_counter() - started, 4),
        "files": files,
    }
    storage.write_text_atomic(os.path.join(checkpoint_path, marker_name(host)), format_marker(marker))
    return marker


@dataclass
class Verdict:
    """What one checkpoint directory is. kind: ok | incomplete | corrupt | foreign | unusable."""

    name: str
    step: int | None
    kind: str
    reason: str = ""
    markers: list[dict] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.kind == "ok"

    @property
    def hosts(self) -> list[str]:
        return sorted({h for m in self.markers for h in m.get("hosts", [])})

    @property
    def lineage(self) -> str | None:
        return self.markers[0].get("lineage") if self.markers else None

    @property
    def identity(self) -> dict[str, Any]:
        m = self.markers[0] if self.markers else {}
        return {"task": m.get("task"), "model_fingerprint": m.get("model_fingerprint"), "model": m.get("model")}

    @property
    def saved_at_unix(self) -> float | None:
        values = [m.get("saved_at_unix") for m in self.markers if m.get("saved_at_unix") is not None]
        return max(values) if values else None

    @property
    def world_size(self) -> int | None:
        return self.markers[0].get("world_size") if self.markers else None

    def summary(self) -> dict[str, Any]:
        return {"checkpoint": self.name, "kind": self.kind, "reason": self.reason}


def read_markers(checkpoint_path: str, storage: LocalStorage) -> tuple[list[dict], str]:
    """(markers, problem): every `_complete.<host>.json` at the top of the directory, parsed."""
    present = storage.list_files(checkpoint_path)
    names = sorted(n for n in present if "/" not in n and is_marker_name(n))
    markers = []
    for name in names:
        try:
            markers.append(parse_marker(storage.read_text(os.path.join(checkpoint_path, name))))
        except MarkerError as err:
            return [], f"marker {name} {err}"
    return markers, ""


def inspect_structure(checkpoint_path: str, storage: LocalStorage | None = None) -> Verdict:
    """The cheap checks (no hashing): markers from every host, consistent, listing files that exist with
    their sizes. kind is ok, incomplete or corrupt."""
    storage = storage or LocalStorage()
    name = os.path.basename(checkpoint_path.rstrip("/"))
    step = step_of(name)
    markers, problem = read_markers(checkpoint_path, storage)
    if problem:
        return Verdict(name, step, "corrupt", problem)
    if not markers:
        return Verdict(name, step, "incomplete", "no completion marker (the save was interrupted, or these files "
                                                 "were not written by the training code)")
    # the first problem found, in this order; the files are listed only when the markers are consistent
    found = (_marker_format_problem(markers) or _missing_host_problem(markers)
             or _disagreement_problem(markers, name, step)
             or _listed_file_problem(markers, storage.list_files(checkpoint_path),
                                     storage.list_links(checkpoint_path)))
    if found is not None:
        kind, reason = found
        return Verdict(name, step, kind, reason, markers)
    return Verdict(name, step, "ok", "", markers)


def _marker_format_problem(markers: list[dict]) -> tuple[str, str] | None:
    """(kind, reason) for the first marker of another format or without a file list."""
    for marker in markers:
        if marker.get("format") != MARKER_FORMAT:
            return "corrupt", (f"marker {marker_name(str(marker.get('host')))} has format {marker.get('format', 1)}, "
                               f"not {MARKER_FORMAT} (no content hashes: written by an older version)")
        if not isinstance(marker.get("files"), dict):
            return "corrupt", f"marker of {marker.get('host')} lists no files"
    return None


def _missing_host_problem(markers: list[dict]) -> tuple[str, str] | None:
    """(kind, reason) when a host the markers name wrote no marker."""
    hosts = sorted({h for m in markers for h in m.get("hosts", [])})
    have = {m.get("host") for m in markers}
    missing = [h for h in hosts if h not in have]
    if missing:
        return "incomplete", f"no completion marker from host(s) {', '.join(missing)} (of {', '.join(hosts)})"
    return None


def _disagreement_problem(markers: list[dict], name: str, step: int | None) -> tuple[str, str] | None:
    """(kind, reason) when two markers disagree, or the markers' step is not the directory's."""
    first = markers[0]
    for marker in markers[1:]:
        for key in ("step", "world_size", "task", "model_fingerprint", "lineage", "hosts"):
            if marker.get(key) != first.get(key):
                return "corrupt", f"markers of {first.get('host')} and {marker.get('host')} disagree on {key}"
    if step is not None and first.get("step") != step:
        return "corrupt", f"markers say step {first.get('step')}, the directory {name}"
    return None


def _listed_file_problem(markers: list[dict], present: dict[str, int],
                         links: dict[str, str]) -> tuple[str, str] | None:
    """(kind, reason) for the first listed file reached through a link, claimed twice, missing or of another
    size."""
    owner: dict[str, str] = {}
    for marker in markers:
        for file, meta in marker["files"].items():
            link = _linked_part(file, links)
            if link is not None:
                return "corrupt", (f"file {file} is reached through the symbolic link {link} -> {links[link]} (the "
                                   "training code writes no links; a link can point outside the checkpoint)")
            if file in owner:
                return "corrupt", (f"file {file} is claimed by {owner[file]} and {marker.get('host')} (one would "
                                   "overwrite the other in S3)")
            owner[file] = str(marker.get("host"))
            if file not in present:
                return "incomplete", f"file {file} listed by {marker.get('host')} is missing"
            if present[file] != meta.get("size"):
                return "corrupt", f"file {file} has {present[file]} bytes, the marker says {meta.get('size')}"
    return None


def _linked_part(file: str, links: dict[str, str]) -> str | None:
    """The link among `file` and its parent directories, if any."""
    parts = file.split("/")
    return next(("/".join(parts[:i]) for i in range(1, len(parts) + 1) if "/".join(parts[:i]) in links), None)


def listed_files(markers: Sequence[dict]) -> list[str]:
    """Every file the markers list (relative paths), sorted."""
    return sorted({f for m in markers for f in m.get("files", {})})


def unlisted_files(checkpoint_path: str, markers: Sequence[dict], storage: LocalStorage | None = None) -> list[str]:
    """Files and links inside a checkpoint that no marker lists (the markers themselves aside): never loaded."""
    storage = storage or LocalStorage()
    listed = set(listed_files(markers))
    present = set(storage.list_files(checkpoint_path)) | set(storage.list_links(checkpoint_path))
    return sorted(n for n in present - listed if not ("/" not in n and is_marker(n)))


def missing_for_resume(files: Iterable[str]) -> list[str]:
    """What a resume needs and these (relative) file names lack."""
    names = set(files)
    tops = {n.split("/", 1)[0] for n in names if "/" in n}
    problems = []
    if not (names & set(WEIGHT_FILES) or tops & set(WEIGHT_DIRS)):
        problems.append("model weights (model.safetensors or a sharded model directory)")
    if not (names & set(OPTIMIZER_FILES) or tops & set(OPTIMIZER_DIRS)):
        problems.append("optimizer state (optimizer.pt): resuming would restart the optimizer")
    if SCHEDULER_FILE not in names:
        problems.append("scheduler.pt: resuming would restart the learning-rate schedule")
    if TRAINER_STATE_FILE not in names:
        problems.append("trainer_state.json (the global step and epoch position)")
    return problems


def verify(checkpoint_path: str, *, identity: dict[str, Any] | None = None, storage: LocalStorage | None = None,
           hash_files: bool = True) -> Verdict:
    """Full verification: structure, identity (foreign when it differs), resumability, then content hashes."""
    storage = storage or LocalStorage()
    verdict = inspect_structure(checkpoint_path, storage)
    if not verdict.ok:
        return verdict
    first = verdict.markers[0]
    if identity is not None and not same_identity(first, identity):
        return Verdict(verdict.name, verdict.step, "foreign",
                       f"saved for {describe_identity(verdict.identity)}; this run trains "
                       f"{describe_identity(identity)}", verdict.markers)
    lacking = missing_for_resume(listed_files(verdict.markers))
    if lacking:
        return Verdict(verdict.name, verdict.step, "unusable", "no " + "; no ".join(lacking), verdict.markers)
    return verify_hashes(checkpoint_path, verdict, storage) if hash_files else verdict


def verify_hashes(files_root: str, verdict: Verdict, storage: LocalStorage | None = None) -> Verdict:
    """Every file the verdict's markers list, read under `files_root` (the checkpoint, or its staged copy), against
    its content hash; the verdict itself when all match."""
    storage = storage or LocalStorage()
    for marker in verdict.markers:
        algorithm = marker.get("hash_algorithm", "")
        for file, meta in sorted(marker["files"].items()):
            try:
                actual = storage.hash_file(os.path.join(files_root, file), algorithm)
            except (OSError, ValueError) as err:
                return Verdict(verdict.name, verdict.step, "corrupt", f"cannot hash {file}: {err}", verdict.markers)
            if actual != meta.get("hash"):
                return Verdict(verdict.name, verdict.step, "corrupt",
                               f"file {file} does not match its content hash ({algorithm} {actual[:16]}..., "
                               f"the marker says {str(meta.get('hash'))[:16]}...)", verdict.markers)
    return verdict


# ---------------------------------------------------------------- what a resume loads

VIEW_DIR = ".hftrain-verified"


def view_dir(root: str, name: str) -> str:
    """Where checkpoint `name` of `root` is staged for loading: beside the checkpoint dir (the same file system,
    so hard links work, and outside what SageMaker syncs to S3), else under the temp dir. Every rank of a node
    computes the same path."""
    parent = os.path.dirname(os.path.abspath(root))
    if not os.access(parent, os.W_OK):
        parent = os.path.join(tempfile.gettempdir(), f"hftrain-{hashlib.sha256(root.encode()).hexdigest()[:12]}")
    return os.path.join(parent, VIEW_DIR, os.path.basename(os.path.abspath(root)), name)


def stage(checkpoint_path: str, verdict: Verdict, target: str, storage: LocalStorage | None = None) -> Verdict:
    """Stage the files the markers list into `target` and verify their content hashes there: what the Trainer
    is given to load (`target`) holds exactly the verified files. A verdict of kind `unusable` when staging
    fails, `corrupt` when a hash does not match."""
    storage = storage or LocalStorage()
    try:
        how = storage.stage_files(checkpoint_path, listed_files(verdict.markers), target)
    except OSError as err:
        return Verdict(verdict.name, verdict.step, "unusable", f"cannot stage its verified files in {target}: {err}",
                       verdict.markers)
    if how == "linked" and storage.list_links(target):  # a listed file was swapped for a link meanwhile
        return Verdict(verdict.name, verdict.step, "corrupt", "a listed file became a symbolic link while it was "
                                                              "being staged", verdict.markers)
    if how == "symlinked":
        links = storage.list_links(checkpoint_path)
        if any(_linked_part(name, links) for name in listed_files(verdict.markers)):
            return Verdict(verdict.name, verdict.step, "corrupt", "a listed file became a symbolic link while it "
                                                                  "was being staged", verdict.markers)
        logger.warning("%s: no hard links possible in %s (another file system): the Trainer reads the listed files "
                       "through links by name, verified now; a file replaced before it is loaded would not be "
                       "noticed", checkpoint_path, target)
    return verify_hashes(target, verdict, storage)


def release_view(target: str, storage: LocalStorage | None = None) -> None:
    """Remove a staged directory (links or copies only: the checkpoint itself is not touched)."""
    if os.path.basename(os.path.dirname(os.path.dirname(target))) == VIEW_DIR:  # never anything else
        (storage or LocalStorage()).remove_tree(target)


def remove_checkpoint(path: str, storage: LocalStorage | None = None) -> list[str]:
    """Rotation's delete: the markers first (the checkpoint stops counting), then the files they list, then the
    directories left empty. Files no marker lists (someone's own) are kept, with the directories holding them;
    returns them (empty: the checkpoint is gone)."""
    storage = storage or LocalStorage()
    markers, _ = read_markers(path, storage)
    names = sorted(n for n in storage.list_files(path) if "/" not in n and n.startswith(MARKER_PREFIX))
    failed = storage.remove_files(path, names)
    failed += storage.remove_files(path, listed_files(markers))
    if storage.remove_empty_dirs(path):
        return []
    left = sorted(set(storage.list_files(path)) | set(storage.list_links(path)))
    return left or failed or ["(the directory itself)"]


# ---------------------------------------------------------------- the checkpoint dir


@dataclass
class Entry:
    """A `checkpoint-<step>` directory under the checkpoint dir."""

    step: int
    name: str
    path: str


def discover(root: str, storage: LocalStorage | None = None) -> list[Entry]:
    """Every `checkpoint-<step>` directory under root, oldest first (other names are not checkpoints)."""
    storage = storage or LocalStorage()
    out = []
    for name in storage.list_dirs(root):
        step = step_of(name)
        if step is not None:
            out.append(Entry(step, name, os.path.join(root, name)))
    return sorted(out, key=lambda e: e.step)


def other_entries(root: str, storage: LocalStorage | None = None) -> list[str]:
    """Directories under root that are not `checkpoint-<step>` (user files, quarantined checkpoints), and
    symbolic links (a linked `checkpoint-<step>` was not written by the training code); names starting with "_"
    are the training code's own (the tokenized data set, `_tokenized/`)."""
    storage = storage or LocalStorage()
    links = [f"{name} (a symbolic link)" for name in storage.list_dir_links(root)]
    return [name for name in storage.list_dirs(root) if step_of(name) is None and not name.startswith("_")] + links


def quarantine_name(step: int, taken: Iterable[str]) -> str:
    """`checkpoint-<step>.unverified-<k>`, the first k not taken: a name discovery never reads as a checkpoint."""
    taken = set(taken)
    k = 1
    while f"{PREFIX}{step}{QUARANTINE_TAG}{k}" in taken:
        k += 1
    return f"{PREFIX}{step}{QUARANTINE_TAG}{k}"


def choose_resume_step(verified_steps_per_node: Sequence[Iterable[int]]) -> int | None:
    """The newest step every node verified (None: none)."""
    sets = [set(steps) for steps in verified_steps_per_node]
    if not sets:
        return None
    common = set.intersection(*sets)
    return max(common) if common else None


def rotation_victims(ours_verified: Iterable[int], *, keep: int | None, protected: Iterable[int] = ()) -> list[int]:
    """Steps rotation may delete: checkpoints of this run's lineage known to verify, except the newest `keep`
    of them and the protected ones (the checkpoint this run resumed from). Only checkpoints older than a
    newer verified one are ever returned; keep None or below 1 deletes nothing (transformers reads a
    save_total_limit <= 0 as no limit; Prepare and the argument parser refuse it anyway)."""
    steps = sorted(set(ours_verified))
    if keep is None or keep < 1 or len(steps) <= 1:
        return []
    newest = steps[-1]
    kept = set(steps[-keep:]) | set(protected) | {newest}
    return [s for s in steps if s < newest and s not in kept]
