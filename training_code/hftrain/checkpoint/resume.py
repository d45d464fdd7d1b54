"""Where a run starts: the newest checkpoint every node verifies, agreed by all ranks before training.

On start each node's local rank 0 verifies candidates newest first (content hashes, identity, resumability,
the weights' names and shapes against the model) and the ranks exchange their verdicts; the first step every
node verifies is resumed. Nothing of a checkpoint is opened before its markers and structure are checked, and the
Trainer loads from a staged directory (`checkpoints.stage`) holding only the files the markers list, whose content
hashes were verified there: files nobody listed are named in the log and never loaded. A checkpoint that fails is reported by name and reason, kept where it is, and the
next older one is tried. A checkpoint saved for another model config or task stops the run before training
(`CheckpointMismatchError`, naming both). When checkpoints exist but none verifies, starting from scratch is
logged as a decision and nothing is deleted. If loading a verified checkpoint still fails inside the Trainer,
`next_after` continues with the next older candidate (see `SageMakerTrainer` in run/runner.py).
"""

from __future__ import annotations

import json
import logging
import os
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from contract.checkpoint_marker import MARKER_FORMAT, checkpoint_name, step_of
from hftrain.checkpoint import manager as checkpoints
from hftrain.checkpoint.storage import LocalStorage
from hftrain.parallel import process_group as distributed

logger = logging.getLogger("hftrain")


class CheckpointMismatchError(ValueError):
    """A checkpoint in the checkpoint dir belongs to another model config or task (a user error: exit 2)."""


class CheckpointLoadError(RuntimeError):
    """Loading a verified checkpoint failed inside the Trainer on at least one rank."""

    def __init__(self, checkpoint: str, reason: str) -> None:
        super().__init__(f"loading {checkpoint} failed: {reason}")
        self.checkpoint = checkpoint
        self.reason = reason


def guarded_load(what: str, checkpoint, load) -> None:
    """Run one load (the Trainer's, of a verified checkpoint) on every rank; if it fails on any, all raise
    CheckpointLoadError together, so that the runner falls back to an older checkpoint instead of crashing or
    hanging."""
    error = None
    try:
        load()
    except Exception as err:  # noqa: BLE001 - any load failure is a reason to fall back
        error = err
    if distributed.any_rank(error is not None):
        reason = f"{what}: {type(error).__name__}: {error}" if error else f"{what} failed on another rank"
        raise CheckpointLoadError(str(checkpoint), reason) from error


_LEGACY_SUFFIXES = (("LayerNorm.gamma", "LayerNorm.weight"), ("LayerNorm.beta", "LayerNorm.bias"))


def _weight_shapes(path: str) -> dict[str, tuple[int, ...]] | None:
    """name -> shape from the safetensors headers (no tensor data read); None when not safetensors."""
    from safetensors import safe_open

    files = checkpoints.safetensors_files(path)
    if files is None:
        return None
    shapes: dict[str, tuple[int, ...]] = {}
    for name in files:
        with safe_open(os.path.join(path, name), framework="pt") as handle:
            for key in handle.keys():  # noqa: SIM118 - safe_open is not a dict
                new = key
                for old, replacement in _LEGACY_SUFFIXES:
                    if key.endswith(old):
                        new = key[: -len(old)] + replacement
                shapes[new] = tuple(handle.get_slice(key).get_shape())
    return shapes


def probe_weights(path: str, model) -> str:
    """'' when the checkpoint's weights fit the model (same names and shapes), else the first problem.

    Reads only the safetensors headers; sharded FSDP weights are left to the Trainer's guarded load.
    """
    try:
        saved = _weight_shapes(path)
    except Exception as err:  # noqa: BLE001 - any header problem is a reason to reject the checkpoint
        return f"cannot read the weights' header: {err}"
    if saved is None:
        return ""
    state = model.state_dict()
    expected = {k: tuple(v.shape) for k, v in state.items()}
    unexpected = sorted(set(saved) - set(expected))
    if unexpected:
        return (f"{len(unexpected)} weight(s) this model does not have, e.g. {unexpected[0]} (saved for another "
                "architecture)")
    wrong = [(k, saved[k], expected[k]) for k in sorted(saved) if saved[k] != expected[k]]
    if wrong:
        key, got, want = wrong[0]
        return f"{len(wrong)} weight(s) with other shapes, e.g. {key}: {list(got)} saved, {list(want)} in the model"
    # Tied parameters (one storage, several names) are saved once: a missing name is fine if an alias is saved.
    by_storage: dict[tuple, set[str]] = {}
    for key, tensor in state.items():
        by_storage.setdefault((tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape)),
                              set()).add(key)
    missing = sorted(k for k in set(expected) - set(saved)
                     if not any(alias in saved for group in by_storage.values() if k in group for alias in group))
    if missing:
        return f"{len(missing)} weight(s) of the model are not in the checkpoint, e.g. {missing[0]}"
    return ""


def probe_trainer_state(path: str, step: int | None, storage: LocalStorage) -> str:
    text = storage.read_text(os.path.join(path, checkpoints.TRAINER_STATE_FILE))
    try:
        state = json.loads(text or "")
    except ValueError as err:
        return f"cannot read {checkpoints.TRAINER_STATE_FILE}: {err}"
    if not isinstance(state, dict):
        return f"{checkpoints.TRAINER_STATE_FILE} is not a JSON object"
    if step is not None and state.get("global_step") != step:
        return f"{checkpoints.TRAINER_STATE_FILE} says global step {state.get('global_step')}, the directory {step}"
    return ""


@dataclass
class ResumeDecision:
    path: str | None  # the checkpoint (for messages and records)
    step: int | None
    lineage: str
    ours: list[int]  # this run's checkpoints known intact (rotation candidates), the resumed one included
    rejected: list[dict[str, Any]] = field(default_factory=list)
    decision: str = ""
    verify_seconds: float = 0.0
    saved_at_unix: float | None = None
    world_size: int | None = None
    load_path: str | None = None  # what the Trainer loads: the verified, staged files of `path` only

    def record(self) -> dict[str, Any]:
        """The start record for `_history.json`."""
        return {"resumed_from_step": self.step, "decision": self.decision, "rejected": self.rejected,
                "verify_seconds": round(self.verify_seconds, 3)}


class ResumePlanner:
    """Runs on every rank; node leaders (local rank 0) read and hash, all ranks take the same decisions."""

    def __init__(self, root: str, identity: dict[str, Any], *, model=None,
                 storage: LocalStorage | None = None) -> None:
        self.root = root
        self.identity = identity
        self.model = model
        self.storage = storage or LocalStorage()
        self.rejected: list[dict[str, Any]] = []
        self.verify_seconds = 0.0
        self._candidates: list[int] = []
        self._entries: list[checkpoints.Entry] = []
        self._unlisted: list[str] = []

    # --- one node's checks -------------------------------------------------------------------------------
    def _leader(self) -> bool:
        return distributed.local_rank() == 0

    def _check(self, step: int) -> checkpoints.Verdict:
        path = os.path.join(self.root, checkpoint_name(step))
        if not self.storage.exists(path):
            return checkpoints.Verdict(checkpoint_name(step), step, "incomplete",
                                       "not present on this node")
        return self._verify_and_stage(path, step)

    def _verify_and_stage(self, path: str, step: int | None) -> checkpoints.Verdict:
        """Markers, structure, identity and resumability (no file of the checkpoint opened but its markers), then
        the listed files staged and hashed where the Trainer will load them, then the probes on those."""
        started = time.perf_counter()
        verdict = checkpoints.verify(path, identity=self.identity, storage=self.storage, hash_files=False)
        view = self._view(path)
        if verdict.ok:
            verdict = checkpoints.stage(path, verdict, view, self.storage)
        if verdict.ok:
            problem = probe_trainer_state(view, step, self.storage)
            if not problem and self.model is not None:
                problem = probe_weights(view, self.model)
            if problem:
                verdict = checkpoints.Verdict(verdict.name, step, "unusable", problem, verdict.markers)
        if verdict.ok:
            self._unlisted = checkpoints.unlisted_files(path, verdict.markers, self.storage)
        else:
            checkpoints.release_view(view, self.storage)
        self.verify_seconds += time.perf_counter() - started
        return verdict

    def _view(self, path: str) -> str:
        return checkpoints.view_dir(self.root, os.path.basename(path.rstrip("/")))

    def _log_unlisted(self, path: str) -> None:
        """Name the files of the resumed checkpoint that no marker lists (rank 0, every node's): left alone."""
        names = sorted({n for node in self._gather(self._unlisted) for n in node})
        if names and distributed.rank() == 0:
            shown = ", ".join(names[:10]) + (f" and {len(names) - 10} more" if len(names) > 10 else "")
            logger.warning("%s: %d file(s) its completion markers do not list are not loaded and are left as they "
                           "are: %s", path, len(names), shown)

    def release(self, decision: ResumeDecision) -> None:
        """After the Trainer loaded the checkpoint (every rank calls this together): remove the staged files."""
        if decision.load_path is None:
            return
        distributed.barrier()  # every rank of the node has finished loading from it
        if self._leader():
            checkpoints.release_view(decision.load_path, self.storage)

    def _gather(self, value):
        """Every node leader's value (non-leaders send None and are dropped); same list on every rank."""
        return [v for v in distributed.all_gather_objects(value if self._leader() else None) if v is not None]

    # --- the decision --------------------------------------------------------------------------------------
    def plan(self, *, resume: bool) -> ResumeDecision:
        self._entries = checkpoints.discover(self.root, self.storage) if self._leader() else []
        steps_per_node = self._gather([e.step for e in self._entries])
        self._candidates = sorted({s for steps in steps_per_node for s in steps}, reverse=True)
        others = self._gather(checkpoints.other_entries(self.root, self.storage))
        if distributed.rank() == 0:
            for name in sorted({n for names in others for n in names}):
                logger.info("checkpoint dir: %s is not a checkpoint-<step> directory; left as it is", name)
        if not resume:
            if self._candidates and distributed.rank() == 0:
                logger.warning("resume is off: starting from scratch although %s has %d checkpoint "
                               "director(ies); they are kept", self.root, len(self._candidates))
            return self._fresh("resume is off", ours=[])
        foreign = self._gather(self._foreign_report())
        problems = sorted({p for node in foreign for p in node})
        if problems:
            raise CheckpointMismatchError(
                f"the checkpoint dir {self.root} holds checkpoints of another model or task: {'; '.join(problems)}. "
                "Nothing was trained or deleted. Resume from them with the same model and task, or give this run "
                "its own checkpoint location (a new run), or set the hyperparameter resume to false to start "
                "from scratch (they are kept).")
        return self._next(below=None)

    def next_after(self, failed_step: int, reason: str) -> ResumeDecision:
        """After the Trainer failed to load `failed_step` (every rank calls this together)."""
        self._reject(checkpoint_name(failed_step), "unusable", f"loading failed: {reason}")
        return self._next(below=failed_step)

    def verify_explicit(self, path: str) -> ResumeDecision:
        """resume_from_checkpoint given by the user: it must verify, or the run stops with the reason."""
        step = step_of(os.path.basename(path.rstrip("/")))
        verdict = self._verify_and_stage(path, step) if self._leader() else None
        verdicts = self._gather(None if verdict is None else (verdict.kind, verdict.reason))
        bad = [reason for kind, reason in verdicts if kind != "ok"]
        if bad:
            if verdict is not None and verdict.ok:
                checkpoints.release_view(self._view(path), self.storage)
            raise CheckpointMismatchError(f"resume_from_checkpoint {path} cannot be resumed: {bad[0]}")
        self._log_unlisted(path)
        lineage = self._gather(verdict.lineage if verdict is not None else None)[0] or uuid.uuid4().hex
        return ResumeDecision(path=path, step=step, lineage=lineage, ours=[], decision=f"resume from {path} "
                              "(resume_from_checkpoint)", verify_seconds=self.verify_seconds,
                              load_path=self._view(path))

    # --- internals -----------------------------------------------------------------------------------------
    def _foreign_report(self) -> list[str]:
        out = []
        for entry in self._entries:
            markers, _ = checkpoints.read_markers(entry.path, self.storage)
            marker = next((m for m in markers if m.get("format") == MARKER_FORMAT), None)
            if marker and not checkpoints.same_identity(marker, self.identity):
                saved = {"task": marker.get("task"), "model_fingerprint": marker.get("model_fingerprint"),
                         "model": marker.get("model")}
                out.append(f"{entry.name} was saved for {checkpoints.describe_identity(saved)}, this run trains "
                           f"{checkpoints.describe_identity(self.identity)}")
        return out

    def _reject(self, name: str, kind: str, reason: str) -> None:
        self.rejected.append({"checkpoint": name, "kind": kind, "reason": reason})
        if distributed.rank() == 0:
            logger.warning("checkpoint %s rejected (%s): %s; kept for inspection, trying the next older one",
                           os.path.join(self.root, name), kind, reason)

    def _next(self, below: int | None) -> ResumeDecision:
        for step in [s for s in self._candidates if below is None or s < below]:
            verdict = self._check(step) if self._leader() else None
            verdicts = self._gather(None if verdict is None else (verdict.kind, verdict.reason))
            failing = [(kind, reason) for kind, reason in verdicts if kind != "ok"]
            path = os.path.join(self.root, checkpoint_name(step))
            if failing:
                if verdict is not None and verdict.ok:  # verified here, not on another node
                    checkpoints.release_view(self._view(path), self.storage)
                self._reject(checkpoint_name(step), *failing[0])
                continue
            meta = self._gather(None if verdict is None else (verdict.lineage, verdict.saved_at_unix,
                                                               verdict.world_size))[0]
            lineage, saved_at, saved_world = meta
            self._log_unlisted(path)
            ours = self._ours(lineage, step)
            decision = f"resume from {checkpoint_name(step)}"
            if distributed.rank() == 0:
                logger.info("resuming from %s (verified on %d node(s) in %.2f s; %d newer checkpoint(s) rejected)",
                            path, len(verdicts), self.verify_seconds, len(self.rejected))
                if saved_world and saved_world != distributed.world_size():
                    logger.warning("%s was saved with world size %d, this run has %d: training continues, but the "
                                   "data order differs from an uninterrupted run", path, saved_world,
                                   distributed.world_size())
            return ResumeDecision(path=path, step=step, lineage=lineage or uuid.uuid4().hex, ours=ours,
                                  rejected=list(self.rejected), decision=decision,
                                  verify_seconds=self.verify_seconds, saved_at_unix=saved_at,
                                  world_size=saved_world, load_path=self._view(path))
        if self._candidates:
            names = ", ".join(f"{r['checkpoint']} ({r['reason']})" for r in self.rejected)
            decision = (f"start from scratch: {len(self._candidates)} checkpoint(s) exist but none verifies: "
                        f"{names}. They are kept, nothing is deleted")
            if distributed.rank() == 0:
                logger.warning("DECISION: %s", decision)
            return self._fresh(decision, ours=[])
        return self._fresh("start from scratch: no checkpoint yet", ours=[])

    def _ours(self, lineage: str | None, resumed: int) -> list[int]:
        """This run's older checkpoints that look intact (markers, sizes): rotation may later delete them."""
        local = []
        if self._leader():
            for entry in self._entries:
                if entry.step >= resumed:
                    continue
                verdict = checkpoints.inspect_structure(entry.path, self.storage)
                if verdict.ok and verdict.lineage == lineage and checkpoints.same_identity(verdict.markers[0],
                                                                                           self.identity):
                    local.append(entry.step)
        per_node = self._gather(local)
        rejected = {step_of(r["checkpoint"]) for r in self.rejected}
        common = set.intersection(*[set(x) for x in per_node]) if per_node else set()
        return sorted((common - rejected) | {resumed})

    def _fresh(self, decision: str, ours: list[int]) -> ResumeDecision:
        lineage = self._gather(uuid.uuid4().hex)[0]  # one id for every rank: the first node leader's
        return ResumeDecision(path=None, step=None, lineage=lineage, ours=ours, rejected=list(self.rejected),
                              decision=decision, verify_seconds=self.verify_seconds)
