"""Markers, verification, multi-node agreement and rotation, with a fake storage and fake ranks (threads)."""

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import shutil
import threading
from types import SimpleNamespace

import pytest

from hftrain import checkpoints as ck
from hftrain import distributed, resume
from hftrain.callbacks import CheckpointCallback

IDENTITY = {"task": "text-classification", "model_fingerprint": "f" * 32, "model": {"model_type": "bert"}}
OTHER = {"task": "text-classification", "model_fingerprint": "0" * 32, "model": {"model_type": "roberta"}}
RESUMABLE = {"model.safetensors": "weights", "optimizer.pt": "optim", "scheduler.pt": "sched",
             "trainer_state.json": "{}"}


class FakeStorage(ck.LocalStorage):
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
            storage.add(f"{d}/{ck.marker_name(host)}", scratch.files[f"{d}/{ck.marker_name(host)}"])
    return d


def test_marker_hashes_every_file_recursively_and_is_written_last(tmp_path):
    d = tmp_path / "checkpoint-5"
    (d / "optimizer_0").mkdir(parents=True)
    (d / "rng_state_0.pth").write_bytes(b"abc")
    (d / "optimizer_0" / "__0_0.distcp").write_bytes(b"12345")
    marker = ck.write_node_marker(str(d), host="algo-1", hosts=["algo-1"], step=5, world_size=1, identity=IDENTITY,
                                  lineage="l")
    assert set(marker["files"]) == {"rng_state_0.pth", "optimizer_0/__0_0.distcp"}
    assert marker["files"]["optimizer_0/__0_0.distcp"]["size"] == 5
    assert marker["hash_algorithm"] == "xxh3_128" and len(marker["files"]["rng_state_0.pth"]["hash"]) == 32
    assert {k: marker[k] for k in ("format", "step", "world_size", "task", "model_fingerprint", "lineage")} == {
        "format": 2, "step": 5, "world_size": 1, "task": "text-classification", "model_fingerprint": "f" * 32,
        "lineage": "l"}
    assert not any(name.endswith(".tmp") for name in (p.name for p in d.iterdir()))
    assert ck.inspect_structure(str(d)).ok
    (d / "optimizer_0" / "__0_0.distcp").write_bytes(b"12x45")  # same size, other content
    assert ck.inspect_structure(str(d)).ok
    verdict = ck.verify(str(d))  # not resumable: caught before hashing
    assert verdict.kind == "unusable" and "no model weights" in verdict.reason


def test_verification_kinds():
    s, root = FakeStorage(), "/ckpt"
    hosts = ("algo-1", "algo-2")
    assert ck.verify(save(s, root, 10, hosts=hosts), identity=IDENTITY, storage=s).ok
    half = save(s, root, 20, hosts=hosts, markers=["algo-1"])
    v = ck.verify(half, identity=IDENTITY, storage=s)
    assert v.kind == "incomplete" and "algo-2" in v.reason
    corrupt = save(s, root, 30, hosts=hosts)
    s.add(f"{corrupt}/pytorch_model_fsdp_0/__1_0.distcp", "SHARD")  # same size: only the hash sees it
    v = ck.verify(corrupt, identity=IDENTITY, storage=s)
    assert v.kind == "corrupt" and "pytorch_model_fsdp_0/__1_0.distcp does not match its content hash" in v.reason
    assert ck.verify(corrupt, identity=IDENTITY, storage=s, hash_files=False).ok
    truncated = save(s, root, 40, hosts=hosts)
    s.add(f"{truncated}/optimizer.pt", "op")
    assert "has 2 bytes" in ck.verify(truncated, storage=s).reason
    foreign = save(s, root, 50, identity=OTHER)
    v = ck.verify(foreign, identity=IDENTITY, storage=s)
    assert v.kind == "foreign" and "roberta" in v.reason and "bert" in v.reason
    nothing = posixpath.join(root, "checkpoint-60")
    s.add(f"{nothing}/model.safetensors")
    assert ck.verify(nothing, storage=s).kind == "incomplete"
    old = posixpath.join(root, "checkpoint-70")
    s.add(f"{old}/model.safetensors")
    s.add(f"{old}/_complete.algo-1.json", json.dumps({"step": 70, "host": "algo-1", "hosts": ["algo-1"],
                                                      "files": {"model.safetensors": 1}}))
    assert "format 1" in ck.verify(old, storage=s).reason
    no_sched = save(s, root, 80)
    del s.files[f"{no_sched}/scheduler.pt"]
    assert "scheduler.pt listed by algo-1 is missing" in ck.verify(no_sched, storage=s).reason


def test_two_markers_may_not_claim_one_file():
    s, root = FakeStorage(), "/ckpt"
    d = save(s, root, 10, hosts=("algo-1", "algo-2"))
    marker = json.loads(s.files[f"{d}/_complete.algo-2.json"])
    marker["files"]["optimizer.pt"] = {"size": 5, "hash": "x"}
    s.add(f"{d}/_complete.algo-2.json", json.dumps(marker))
    assert "claimed by algo-1 and algo-2" in ck.verify(d, storage=s).reason


def test_identity_ignores_paths_and_versions_but_not_the_head():
    from transformers import BertConfig

    a = BertConfig(hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=37,
                   num_labels=3, id2label={0: "a", 1: "b", 2: "c"})
    b = BertConfig.from_dict(a.to_dict())
    b._name_or_path = "/opt/ml/input/data/model"
    b.transformers_version = "0.0.1"
    assert ck.model_identity(a, "text-classification") == ck.model_identity(b, "text-classification")
    c = BertConfig.from_dict({**a.to_dict(), "id2label": {0: "x", 1: "b", 2: "c"}})
    assert not ck.same_identity(ck.model_identity(a, "text-classification"), ck.model_identity(c, "text-classification"))
    assert not ck.same_identity(ck.model_identity(a, "text-classification"), ck.model_identity(a, "summarization"))


def test_rotation_deletes_only_this_runs_older_verified_checkpoints():
    assert ck.rotation_victims([10, 20, 30, 40], keep=2) == [10, 20]
    assert ck.rotation_victims([10, 20, 30, 40], keep=1, protected=[20]) == [10, 30]
    assert ck.rotation_victims([10, 20, 30], keep=None) == []
    assert ck.rotation_victims([10], keep=1) == []
    assert ck.quarantine_name(8, ["checkpoint-8", "checkpoint-8.unverified-1"]) == "checkpoint-8.unverified-2"
    assert ck.step_of("checkpoint-8.unverified-1") is None


# --- fake ranks: threads that exchange objects like all_gather_object ---------------------------------------


class FakeWorld:
    """world_size ranks as threads; `nodes[r]` names the node of rank r (local rank 0 = first rank of a node)."""

    def __init__(self, nodes: list[str]) -> None:
        self.nodes = nodes
        self.local = threading.local()
        self.barrier = threading.Barrier(len(nodes))
        self.slots: list = [None] * len(nodes)

    def install(self, monkeypatch) -> None:
        monkeypatch.setattr(distributed, "rank", lambda: self.local.rank)
        monkeypatch.setattr(distributed, "world_size", lambda: len(self.nodes))
        monkeypatch.setattr(distributed, "local_rank", lambda: self.nodes[:self.local.rank].count(
            self.nodes[self.local.rank]))
        monkeypatch.setattr(distributed, "all_gather_objects", self.all_gather)
        monkeypatch.setattr(distributed, "barrier", lambda: self.barrier.wait())

    def all_gather(self, obj):
        self.slots[self.local.rank] = obj
        self.barrier.wait()
        out = list(self.slots)
        self.barrier.wait()
        return out

    def run(self, fn):
        results, errors = [None] * len(self.nodes), []
        self.barrier.reset()

        def body(rank):
            self.local.rank = rank
            try:
                results[rank] = fn(rank)
            except Exception as err:  # noqa: BLE001 - re-raised in the test thread
                errors.append(err)
                if not isinstance(err, resume.CheckpointMismatchError):  # raised by every rank together
                    self.barrier.abort()

        threads = [threading.Thread(target=body, args=(r,)) for r in range(len(self.nodes))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=30)
        real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
        if errors:
            raise (real or errors)[0]
        return results


def test_all_ranks_agree_on_the_newest_checkpoint_every_node_verifies(monkeypatch):
    """Two nodes x two ranks, each node with its own copy (as SageMaker restores S3 to every instance).
    Node B's copy of checkpoint-20 is corrupt: everyone resumes from 10, and from the same step."""
    world = FakeWorld(["a", "a", "b", "b"])
    world.install(monkeypatch)
    stores = {"a": FakeStorage(), "b": FakeStorage()}
    for store in stores.values():
        for step in (10, 20):
            save(store, "/ckpt", step, hosts=("algo-1", "algo-2"))
    stores["b"].files["/ckpt/checkpoint-20/optimizer.pt"] = "OPTIM"
    calls = {"a": 0, "b": 0}

    def count(node, store):
        original = store.hash_file

        def wrapped(path, algorithm):
            calls[node] += 1
            return original(path, algorithm)
        return wrapped

    for node, store in stores.items():
        store.hash_file = count(node, store)

    def plan(rank):
        store = stores[world.nodes[rank]]
        return resume.ResumePlanner("/ckpt", IDENTITY, storage=store).plan(resume=True)

    decisions = world.run(plan)
    assert {d.step for d in decisions} == {10}
    assert all(d.rejected[0]["checkpoint"] == "checkpoint-20" and "content hash" in d.rejected[0]["reason"]
               for d in decisions)
    assert len({d.lineage for d in decisions}) == 1
    files_per_checkpoint = 2 * 2 + len(RESUMABLE)
    assert calls == {"a": 2 * files_per_checkpoint, "b": files_per_checkpoint + 2}, "only node leaders hash"


def test_a_replaced_node_with_other_host_names_verifies_the_shared_checkpoint(monkeypatch):
    """Saved by algo-1 + algo-2; the restart runs on hosts with other names: the markers, not the current
    host set, say which nodes' shards a checkpoint needs."""
    world = FakeWorld(["x", "y"])
    world.install(monkeypatch)
    stores = {n: FakeStorage() for n in "xy"}
    for store in stores.values():
        save(store, "/ckpt", 10, hosts=("algo-1", "algo-2"))
        save(store, "/ckpt", 20, hosts=("algo-1", "algo-2"), markers=["algo-1"])  # algo-2's never arrived
    decisions = world.run(lambda r: resume.ResumePlanner("/ckpt", IDENTITY, storage=stores[world.nodes[r]]
                                                         ).plan(resume=True))
    assert [d.step for d in decisions] == [10, 10]
    assert "no completion marker from host(s) algo-2" in decisions[0].rejected[0]["reason"]


def test_a_foreign_checkpoint_stops_every_rank_before_training(monkeypatch):
    world = FakeWorld(["a", "b"])
    world.install(monkeypatch)
    stores = {n: FakeStorage() for n in "ab"}
    for store in stores.values():
        save(store, "/ckpt", 10)
        save(store, "/ckpt", 20, identity=OTHER)
    with pytest.raises(resume.CheckpointMismatchError, match="checkpoint-20 was saved for task"):
        world.run(lambda r: resume.ResumePlanner("/ckpt", IDENTITY, storage=stores[world.nodes[r]]).plan(resume=True))
    fresh = world.run(lambda r: resume.ResumePlanner("/ckpt", IDENTITY, storage=stores[world.nodes[r]]
                                                     ).plan(resume=False))
    assert [d.step for d in fresh] == [None, None]


def test_checkpoint_callback_moves_stale_dirs_aside_and_rotates_only_its_own(monkeypatch):
    monkeypatch.setattr(distributed, "local_rank", lambda: 0)
    s, root = FakeStorage(), "/ckpt"
    save(s, root, 10)  # the checkpoint this run resumed from
    save(s, root, 5)  # an older one of this run
    s.add(f"{root}/checkpoint-30/rng_state_7.pth", "old")  # a partial leftover of an earlier attempt
    s.add(f"{root}/checkpoint-3/user.txt", "mine")  # someone's files
    cb = CheckpointCallback(root=root, host="algo-1", hosts=["algo-1"], keep=1, resumed_step=10, ours=[5, 10],
                            identity=IDENTITY, lineage="run-a", storage=s)
    for step in (20, 30, 40):
        state = SimpleNamespace(global_step=step, is_world_process_zero=True)
        control = SimpleNamespace(should_save=True)
        cb.on_step_end(None, state, control)
        d = posixpath.join(root, f"checkpoint-{step}")
        for name, text in RESUMABLE.items():
            s.add(f"{d}/{name}", text)
        cb.on_save(None, state, control)
        assert ck.verify(d, identity=IDENTITY, storage=s).ok
    assert s.files[f"{root}/checkpoint-30.unverified-1/rng_state_7.pth"] == "old"
    assert s.files[f"{root}/checkpoint-3/user.txt"] == "mine"
    assert sorted(e.step for e in ck.discover(root, s)) == [3, 10, 40]  # keep=1 plus the resumed one
    assert cb.deleted == ["checkpoint-5", "checkpoint-20", "checkpoint-30"]


def test_a_load_failure_on_one_rank_makes_every_rank_fall_back_together(monkeypatch):
    """The Trainer's loads are guarded by one all-reduce: a failure on any rank raises on all (no rank trains on
    while another waits in a collective)."""
    from transformers import Trainer

    from hftrain.runner import make_trainer_class

    world = FakeWorld(["a", "b"])
    world.install(monkeypatch)
    monkeypatch.setattr(distributed, "any_rank", lambda flag: any(world.all_gather(bool(flag))))
    trainer_cls = make_trainer_class(Trainer)

    def load_on(rank):
        def load():
            if rank == 0:
                raise ValueError("loaded state dict contains a parameter group that doesn't match")
        return load

    def guarded(rank):
        try:
            trainer_cls._guarded_load(object(), "optimizer/scheduler", "/ckpt/checkpoint-8", load_on(rank))
        except resume.CheckpointLoadError as err:
            return err.reason
        return "no error"

    world.barrier.reset()
    reasons = world.run(guarded)
    assert reasons[0].startswith("optimizer/scheduler: ValueError: loaded state dict")
    assert reasons[1] == "optimizer/scheduler failed on another rank"
    assert world.run(lambda rank: trainer_cls._guarded_load(object(), "x", "c", lambda: None)) == [None, None]


# --- issue 24 (and issue 23's verify-before-open): real files, real links -----------------------------------


def _real_checkpoint(root, step, *, lineage="run-a", extra=None):
    """checkpoint-<step> on disk with what a resume needs, and its marker."""
    d = root / f"checkpoint-{step}"
    d.mkdir(parents=True)
    files = {**RESUMABLE, "trainer_state.json": json.dumps({"global_step": step}), "rng_state.pth": "rng",
             **(extra or {})}
    for name, text in files.items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(text) if isinstance(text, str) else (d / name).write_bytes(text)
    ck.write_node_marker(str(d), host="algo-1", hosts=["algo-1"], step=step, world_size=1, identity=IDENTITY,
                         lineage=lineage)
    return d


def test_a_listed_file_replaced_by_a_link_to_outside_is_corrupt_even_with_the_same_bytes(tmp_path):
    d = _real_checkpoint(tmp_path / "ckpt", 10)
    outside = tmp_path / "elsewhere" / "optimizer.pt"
    outside.parent.mkdir()
    outside.write_bytes((d / "optimizer.pt").read_bytes())  # identical content: the hash alone cannot tell
    (d / "optimizer.pt").unlink()
    (d / "optimizer.pt").symlink_to(outside)
    verdict = ck.verify(str(d), identity=IDENTITY)
    assert verdict.kind == "corrupt", verdict
    assert f"file optimizer.pt is reached through the symbolic link optimizer.pt -> {outside}" in verdict.reason
    linked_dir = _real_checkpoint(tmp_path / "ckpt", 20, extra={"optimizer_0/__0_0.distcp": "shard"})
    shutil.move(str(linked_dir / "optimizer_0"), str(tmp_path / "elsewhere" / "optimizer_0"))
    (linked_dir / "optimizer_0").symlink_to(tmp_path / "elsewhere" / "optimizer_0")
    verdict = ck.verify(str(linked_dir), identity=IDENTITY)
    assert verdict.kind == "corrupt" and "through the symbolic link optimizer_0 ->" in verdict.reason


def test_a_linked_checkpoint_dir_is_not_a_checkpoint_never_resumed_nor_rotated(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(distributed, "local_rank", lambda: 0)
    root = tmp_path / "ckpt"
    _real_checkpoint(root, 10)
    elsewhere = _real_checkpoint(tmp_path / "elsewhere", 5)  # a checkpoint of this run's lineage, outside
    (root / "checkpoint-5").symlink_to(elsewhere)
    planner = resume.ResumePlanner(str(root), IDENTITY)
    with caplog.at_level("INFO"):
        decision = planner.plan(resume=True)
    assert decision.step == 10 and decision.ours == [10]
    assert "checkpoint-5 (a symbolic link) is not a checkpoint-<step> directory; left as it is" in caplog.text
    cb = CheckpointCallback(root=str(root), host="algo-1", hosts=["algo-1"], keep=1, resumed_step=None,
                            ours=decision.ours, identity=IDENTITY, lineage=decision.lineage)
    for step in (20, 30):
        state = SimpleNamespace(global_step=step, is_world_process_zero=True)
        _real_checkpoint(root, step, lineage=decision.lineage).joinpath("_complete.algo-1.json").unlink()
        cb.on_save(None, state, SimpleNamespace(should_save=True))
    assert cb.deleted == ["checkpoint-10", "checkpoint-20"]
    assert (root / "checkpoint-5").is_symlink() and ck.verify(str(elsewhere), identity=IDENTITY).ok
    assert "checkpoint-5" not in caplog.text.split("left as it is")[-1]


def test_rotation_deletes_what_the_markers_list_and_keeps_someone_elses_files(tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(distributed, "local_rank", lambda: 0)
    root = tmp_path / "ckpt"
    old = _real_checkpoint(root, 10, extra={"pytorch_model_fsdp_0/__0_0.distcp": "shard"})
    (old / "notes.txt").write_text("my analysis of step 10")
    (old / "pytorch_model_fsdp_0" / "mine.bin").write_text("mine")
    cb = CheckpointCallback(root=str(root), host="algo-1", hosts=["algo-1"], keep=1, resumed_step=None,
                            ours=[10], identity=IDENTITY, lineage="run-a")
    _real_checkpoint(root, 20).joinpath("_complete.algo-1.json").unlink()
    with caplog.at_level("INFO"):
        cb.on_save(None, SimpleNamespace(global_step=20, is_world_process_zero=True), SimpleNamespace())
    assert cb.deleted == ["checkpoint-10"]
    assert sorted(p.relative_to(old).as_posix() for p in old.rglob("*") if p.is_file()) == [
        "notes.txt", "pytorch_model_fsdp_0/mine.bin"]
    assert "kept 2 file(s) its markers do not list: notes.txt, pytorch_model_fsdp_0/mine.bin" in caplog.text
    _real_checkpoint(root, 30).joinpath("_complete.algo-1.json").unlink()
    cb.on_save(None, SimpleNamespace(global_step=30, is_world_process_zero=True), SimpleNamespace())
    assert not (root / "checkpoint-20").exists()  # nothing of anyone else's in it: gone entirely


@pytest.mark.parametrize("keep", [0, -1, -2, -100])
def test_a_save_total_limit_below_one_deletes_nothing(keep, monkeypatch):
    """transformers reads save_total_limit <= 0 as "no limit"; so does the rotation here (Prepare and the
    argument parser refuse such a value anyway)."""
    assert ck.rotation_victims([10, 20, 30, 40], keep=keep) == []
    monkeypatch.setattr(distributed, "local_rank", lambda: 0)
    s, root = FakeStorage(), "/ckpt"
    save(s, root, 10)
    cb = CheckpointCallback(root=root, host="algo-1", hosts=["algo-1"], keep=keep, resumed_step=None, ours=[],
                            identity=IDENTITY, lineage="run-a", storage=s)
    for step in (20, 30):
        for name, text in RESUMABLE.items():
            s.add(f"{root}/checkpoint-{step}/{name}", text)
        cb.on_save(None, SimpleNamespace(global_step=step, is_world_process_zero=True), SimpleNamespace())
    assert cb.deleted == [] and sorted(e.step for e in ck.discover(root, s)) == [10, 20, 30]


@pytest.mark.filterwarnings("ignore:torch.distributed is disabled:UserWarning")
def test_dcp_metadata_swapped_after_the_decision_is_not_what_gets_unpickled(tmp_path, monkeypatch):
    """Issue 23: torch's distributed checkpoint reads `.metadata` with pickle.load (any code). A harmless payload
    swapped in after the resume decision never runs: what the Trainer is given to load (`load_path`; main's runner
    loaded `path` itself) holds the verified file."""
    import pickle

    import torch
    import torch.distributed.checkpoint as dcp

    monkeypatch.setattr(distributed, "local_rank", lambda: 0)
    root = tmp_path / "ckpt"
    d = _real_checkpoint(root, 10)
    (d / "_complete.algo-1.json").unlink()
    for part in ("pytorch_model_fsdp_0", "optimizer_0"):
        dcp.save({"w": torch.arange(4.0)}, checkpoint_id=str(d / part))
    ck.write_node_marker(str(d), host="algo-1", hosts=["algo-1"], step=10, world_size=1, identity=IDENTITY,
                         lineage="run-a")
    decision = resume.ResumePlanner(str(root), IDENTITY).plan(resume=True)
    assert decision.step == 10

    class Payload:
        def __reduce__(self):
            return (os.makedirs, (str(tmp_path / "payload-ran"),))

    metadata = d / "pytorch_model_fsdp_0" / ".metadata"
    (tmp_path / "new").write_bytes(pickle.dumps(Payload()))
    os.replace(tmp_path / "new", metadata)
    loaded, failure = {"w": torch.zeros(4)}, None
    try:
        dcp.load(loaded, checkpoint_id=os.path.join(getattr(decision, "load_path", None) or decision.path,
                                                    "pytorch_model_fsdp_0"))
    except BaseException as err:  # noqa: BLE001 - DCP raises CheckpointException (a BaseException); shown below
        failure = err
    assert not (tmp_path / "payload-ran").exists(), "the swapped .metadata was unpickled: its payload ran"
    assert failure is None and loaded["w"].tolist() == [0.0, 1.0, 2.0, 3.0], failure


def test_without_hard_links_the_view_still_holds_only_the_listed_files(tmp_path, monkeypatch, caplog):
    """Another file system (no hard links): links by name to the listed files, the unlisted still left out."""
    import errno

    monkeypatch.setattr(distributed, "local_rank", lambda: 0)

    def no_hard_links(*args, **kwargs):
        raise OSError(errno.EXDEV, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", no_hard_links)
    root = tmp_path / "ckpt"
    d = _real_checkpoint(root, 10)
    (d / "rng_state_7.pth").write_text("planted")
    with caplog.at_level("INFO"):
        decision = resume.ResumePlanner(str(root), IDENTITY).plan(resume=True)
    view = decision.load_path
    assert decision.step == 10 and view is not None and view != decision.path
    assert sorted(os.listdir(view)) == sorted(set(RESUMABLE) | {"rng_state.pth"})
    assert all(os.path.islink(os.path.join(view, n)) for n in os.listdir(view))
    assert "no hard links possible" in caplog.text and "rng_state_7.pth" in caplog.text
