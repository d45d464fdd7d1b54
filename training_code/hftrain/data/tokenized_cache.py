"""The tokenized data set, kept with the run's checkpoints so that a restart loads it instead of tokenizing again.

Where: `<checkpoint_dir>/_tokenized/<fingerprint[:20]>/` (a sharded channel: `<fingerprint[:20]>.<host>/`, each
host's own) with `train/` and `eval/` (`Dataset.save_to_disk`) and a
completion marker `_complete.json` written last. The checkpoint dir is synced to the run's own checkpoint
prefix (`checkpoints/<run_id>/`) and restored to every instance at every restart, so the cache is run-scoped:
another run never sees it.

The fingerprint is a sha256 over everything that shapes the features: the data files read (relative name, size
and content hash of each), the tokenizer (its serialized model and settings), the model config (the identity
checkpoints use), the task and what it learned from the data (columns, labels), every data argument
(max_seq_length, doc_stride, ...) and the versions of transformers, tokenizers and datasets. Any change is a new
fingerprint, so a new directory: a cache is never used for other inputs.

Verified like a checkpoint: the marker lists every file with its size and content hash (xxh3-128), the fingerprint
and the rows. A cache directory without a marker, with a marker for another fingerprint, or whose files do not
match the marker is refused by name and reason, moved aside to `<name>.refused-<k>` (never deleted here: the
pipeline moves it out of the checkpoint prefix between attempts, lambda/runs/quarantine.py) and rebuilt.
Superseded: once this attempt's cache is in place, this run's own caches for other inputs (a complete marker that
names this run, `run`: a digest of the run's token, and another fingerprint; the same host's) are deleted, the
marker first, then the files it lists, then the folders left empty (a file the marker does not list is kept):
SageMaker's checkpoint sync mirrors the deletion to S3, so a restart no longer downloads them.
Which host writes: with a replicated training channel all hosts compute the same fingerprint and the first host
writes it; with ShardedByS3Key every host has its own data, so its own fingerprint and directory.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contract import stall_board
from contract.refused_names import CACHE_DIR, CACHE_NAME_RE, REFUSED_TAG
from hftrain.checkpoint import manager as checkpoints
from hftrain.checkpoint.storage import LocalStorage, hash_algorithm, hash_file
from hftrain.data.files import find_data_files

logger = logging.getLogger("hftrain")

MARKER = "_complete.json"
FORMAT = 1
PARTS = ("train", "eval")
# Data arguments that do not change a feature (speed, caches): left out of the fingerprint.
NOT_SHAPING = {"preprocessing_num_workers", "overwrite_cache", "cache_dir"}



def run_mark() -> str | None:
    """This run's mark in a marker: a digest of the run's token (the job's environment, contract/stall_board.py;
    the same in every attempt of the run, never the token itself); None without one (nothing is proved)."""
    token = os.environ.get(stall_board.VARIABLE, "")
    if not stall_board.TOKEN_RE.fullmatch(token):
        return None
    return hashlib.sha256(f"hftrain-run-mark:{token}".encode()).hexdigest()[:24]


class CacheRefused(Exception):
    """A cache directory that must not be used (message: its path and why)."""


def _hash_file(path: str, algorithm: str) -> str:
    return hash_file(path, algorithm)


def data_files_fingerprint(sources: list[tuple[str, str]], data_format: str = "auto") -> list[dict[str, Any]]:
    """(which, path or 'hub:...') -> the files read, each with relative name, size and content hash."""
    algorithm = hash_algorithm()
    out: list[dict[str, Any]] = []
    for which, source in sources:
        if source.startswith("hub:"):
            out.append({"which": which, "source": source})
            continue
        root = Path(source)
        for fmt, files in sorted(find_data_files(source, data_format).items()):
            for file in files:
                name = Path(file).relative_to(root).as_posix() if root.is_dir() else Path(file).name
                out.append({"which": which, "format": fmt, "file": name, "size": os.path.getsize(file),
                            "hash": _hash_file(file, algorithm)})
    return out


def tokenizer_fingerprint(tokenizer) -> str:
    backend = getattr(tokenizer, "backend_tokenizer", None)
    model = backend.to_str() if backend is not None else repr(sorted(tokenizer.get_vocab().items()))
    settings = {"class": type(tokenizer).__name__, "model_max_length": getattr(tokenizer, "model_max_length", None),
                "padding_side": getattr(tokenizer, "padding_side", None),
                "truncation_side": getattr(tokenizer, "truncation_side", None),
                "special_tokens": {k: str(v) for k, v in (tokenizer.special_tokens_map or {}).items()}}
    text = model + json.dumps(settings, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _plain(value: Any) -> Any:
    """JSON-able values only (the task's learned columns and labels; not its argument objects)."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return None


def task_state(task) -> dict[str, Any]:
    return {k: v for k, v in sorted(vars(task).items()) if not k.startswith("_") and _plain(v) is not None}


def fingerprint(*, data_files: list[dict[str, Any]], tokenizer, model_identity: dict[str, Any], task,
                data_args) -> tuple[str, dict[str, Any]]:
    """(sha256 hex, the inputs it covers: logged and kept in the marker)."""
    import datasets
    import tokenizers
    import transformers

    args = {k: _plain(v) for k, v in sorted(dataclasses.asdict(data_args).items()) if k not in NOT_SHAPING}
    inputs = {
        "format": FORMAT, "task": getattr(task, "name", None), "task_state": task_state(task),
        "data_files": data_files, "tokenizer": tokenizer_fingerprint(tokenizer),
        "model_fingerprint": model_identity.get("model_fingerprint"), "data_args": args,
        "versions": {"transformers": transformers.__version__, "tokenizers": tokenizers.__version__,
                     "datasets": datasets.__version__},
    }
    digest = hashlib.sha256(json.dumps(inputs, sort_keys=True, default=str).encode()).hexdigest()
    return digest, inputs


def describe_inputs(inputs: dict[str, Any]) -> str:
    files = inputs.get("data_files") or []
    size = sum(f.get("size") or 0 for f in files)
    return (f"{len(files)} data file(s), {size / 1e6:.1f} MB; tokenizer {str(inputs.get('tokenizer'))[:12]}; "
            f"model config {str(inputs.get('model_fingerprint'))[:12]}; task {inputs.get('task')}")


@dataclass
class CacheResult:
    """What tokenization did: `status` hit (loaded), miss (tokenized and written), rebuilt (a refused cache was
    moved aside, then tokenized and written), off (no cache), skipped (tokenized, another host writes) or unsaved
    (tokenized, the write failed: a restart tokenizes again)."""

    status: str
    train: Any
    eval: Any
    path: str | None = None
    refused: str | None = None
    seconds: float = 0.0
    deleted: list[str] = dataclasses.field(default_factory=list)  # this run's superseded caches, deleted


class TokenizedCache:
    """One host's view of its cache directory; `writer` is False on hosts that only read (replicated data)."""

    def __init__(self, root: str, digest: str, inputs: dict[str, Any], *, writer: bool = True, host: str | None = None,
                 storage: LocalStorage | None = None) -> None:
        self.root = os.path.join(root, CACHE_DIR)
        self.digest = digest
        self.inputs = inputs
        self.writer = writer
        self.storage = storage or LocalStorage()
        # host: a sharded channel's cache is the host's own (two hosts never write one name to the shared prefix)
        self.path = os.path.join(self.root, digest[:20] + (f".{host}" if host else ""))

    # --- verification --------------------------------------------------------------------------------------
    def verify(self, *, hash_files: bool = True) -> dict[str, Any]:
        """The marker when the directory verifies; CacheRefused naming the directory and the reason otherwise.
        hash_files False: sizes only (a node's other local ranks, after its local rank 0 verified or wrote it)."""
        text = self.storage.read_text(os.path.join(self.path, MARKER))
        if text is None:
            raise CacheRefused(f"tokenized cache {self.path}: no completion marker {MARKER} (an interrupted write, "
                               "or files the training code did not write)")
        try:
            marker = json.loads(text)
        except ValueError as err:
            raise CacheRefused(f"tokenized cache {self.path}: {MARKER} is not valid JSON ({err})") from err
        if not isinstance(marker, dict) or marker.get("format") != FORMAT:
            raise CacheRefused(f"tokenized cache {self.path}: {MARKER} has format "
                               f"{marker.get('format') if isinstance(marker, dict) else '?'}, not {FORMAT}")
        if marker.get("fingerprint") != self.digest:
            theirs = marker.get("inputs") if isinstance(marker.get("inputs"), dict) else {}
            raise CacheRefused(f"tokenized cache {self.path}: made for other inputs (fingerprint "
                               f"{str(marker.get('fingerprint'))[:12]}: {describe_inputs(theirs)}; this run has "
                               f"{self.digest[:12]}: {describe_inputs(self.inputs)})")
        present = self.storage.list_files(self.path)
        files = marker.get("files")
        if not isinstance(files, dict) or not files:
            raise CacheRefused(f"tokenized cache {self.path}: {MARKER} lists no files")
        algorithm = marker.get("hash_algorithm", "")
        for name, meta in sorted(files.items()):
            if name not in present:
                raise CacheRefused(f"tokenized cache {self.path}: file {name} listed by {MARKER} is missing")
            if present[name] != (meta or {}).get("size"):
                raise CacheRefused(f"tokenized cache {self.path}: file {name} has {present[name]} bytes, "
                                   f"{MARKER} says {(meta or {}).get('size')}")
            if not hash_files:
                continue
            try:
                actual = self.storage.hash_file(os.path.join(self.path, name), algorithm)
            except (OSError, ValueError) as err:
                raise CacheRefused(f"tokenized cache {self.path}: cannot hash {name}: {err}") from err
            if actual != (meta or {}).get("hash"):
                raise CacheRefused(f"tokenized cache {self.path}: file {name} does not match its content hash "
                                   f"({algorithm} {actual[:16]}..., {MARKER} says "
                                   f"{str((meta or {}).get('hash'))[:16]}...)")
        return marker

    # --- use -------------------------------------------------------------------------------------------------
    def load_or_build(self, build: Callable[[], tuple[Any, Any]], *, hash_files: bool = True) -> CacheResult:
        """Load the verified cache, else build (tokenize), write (when this process writes) and return."""
        import datasets

        started = time.perf_counter()
        refused = None
        if self.storage.exists(self.path):
            try:
                marker = self.verify(hash_files=hash_files)
                parts = {name: datasets.load_from_disk(os.path.join(self.path, name))
                         if name in marker.get("parts", []) else None for name in PARTS}
                return CacheResult("hit", parts["train"], parts["eval"], self.path,
                                   seconds=time.perf_counter() - started,
                                   deleted=self.delete_superseded() if self.writer else [])
            except CacheRefused as err:
                refused = str(err)
                logger.warning("%s: refused; rebuilding it (the refused directory is kept as it is%s)", refused,
                               ", moved aside" if self.writer else "")
                if self.writer:
                    self._move_aside()
        train, evaluation = build()
        status = "rebuilt" if refused else "miss"
        if self.writer:
            try:
                self._write(train, evaluation)
            except OSError as err:  # e.g. the volume is full: the cache only saves time, training goes on
                self.storage.remove_tree(f"{self.path}.tmp-{os.getpid()}")
                logger.warning("the tokenized data set was not kept at %s (%s): a restart tokenizes again",
                               self.path, err)
                status = "unsaved"
        else:
            status = "skipped" if not refused else status
        deleted = self.delete_superseded() if self.writer and status in ("miss", "rebuilt") else []
        return CacheResult(status, train, evaluation, self.path, refused, time.perf_counter() - started, deleted)

    def delete_superseded(self) -> list[str]:
        """This run's own caches for other inputs, of this host (the same name suffix): deleted, each with a log
        line; returns their paths. Only a directory whose complete marker names this run (`run`) and another
        fingerprint, and whose listed files are all there with their sizes; the marker goes first (the directory
        stops counting), then the files it lists, then the folders left empty. Anything else is left as it is."""
        mark = run_mark()
        mine = CACHE_NAME_RE.fullmatch(os.path.basename(self.path))
        if mark is None or mine is None:
            return []
        deleted = []
        for name in self.storage.list_dirs(self.root):
            match = CACHE_NAME_RE.fullmatch(name)
            if match is None or match["host"] != mine["host"] or match["digest"] == mine["digest"]:
                continue  # not a cache directory (refused, temporary, other files), another host's, or this one
            path = os.path.join(self.root, name)
            try:
                if self._delete_if_superseded(path, match["digest"], mark):
                    deleted.append(path)
            except (OSError, ValueError) as err:  # the cache only saves time: training goes on
                logger.warning("tokenized cache: could not delete the superseded %s (%s)", path, err)
        return deleted

    def _delete_if_superseded(self, path: str, digest: str, mark: str) -> bool:
        marker = json.loads(self.storage.read_text(os.path.join(path, MARKER)) or "null")
        if not isinstance(marker, dict) or marker.get("run") != mark or \
                not str(marker.get("fingerprint", "")).startswith(digest) or \
                marker.get("fingerprint") == self.digest or not isinstance(marker.get("files"), dict):
            return False
        present = self.storage.list_files(path)
        if any(present.get(f) != (meta or {}).get("size") for f, meta in marker["files"].items()):
            return False  # not as this run wrote it: left as it is
        self.storage.remove_files(path, [MARKER])
        failed = self.storage.remove_files(path, list(marker["files"]))
        self.storage.remove_empty_dirs(path)
        kept = sorted(set(present) - set(marker["files"]) - {MARKER}) + failed
        logger.info("tokenized cache: deleted %s (this run's cache for other inputs: fingerprint %s; now %s)%s",
                    path, str(marker.get("fingerprint"))[:12], self.digest[:12],
                    f"; kept {len(kept)} file(s) its marker does not list: {', '.join(kept[:5])}" if kept else "")
        return True

    def _move_aside(self) -> None:
        taken = set(self.storage.list_dirs(self.root))
        k = 1
        while f"{os.path.basename(self.path)}{REFUSED_TAG}{k}" in taken:
            k += 1
        target = f"{self.path}{REFUSED_TAG}{k}"
        self.storage.rename(self.path, target)
        logger.warning("moved the refused tokenized cache %s aside to %s", self.path, target)

    def _write(self, train, evaluation) -> None:
        tmp = f"{self.path}.tmp-{os.getpid()}"
        self.storage.remove_tree(tmp)  # our own leftover from a killed write of this process id, if any
        parts = []
        for name, dataset in zip(PARTS, (train, evaluation), strict=True):
            if dataset is not None:
                dataset.save_to_disk(os.path.join(tmp, name))
                parts.append(name)
        if not parts:
            return
        algorithm = hash_algorithm()
        files = {name: {"size": size, "hash": self.storage.hash_file(os.path.join(tmp, name), algorithm)}
                 for name, size in sorted(self.storage.list_files(tmp).items())}
        os.makedirs(self.root, exist_ok=True)
        self.storage.rename(tmp, self.path)
        marker = {"format": FORMAT, "fingerprint": self.digest, "run": run_mark(), "inputs": self.inputs, "parts": parts,
                  "rows": {n: len(d) for n, d in zip(PARTS, (train, evaluation), strict=True) if d is not None},
                  "hash_algorithm": algorithm, "files": files, "written_at": checkpoints.utc_iso(time.time())}
        self.storage.write_text_atomic(os.path.join(self.path, MARKER), json.dumps(marker, indent=1))
        size = sum(f["size"] for f in files.values())
        logger.info("tokenized data set kept at %s (%d file(s), %.1f MB) for a restart to load", self.path,
                    len(files), size / 1e6)
