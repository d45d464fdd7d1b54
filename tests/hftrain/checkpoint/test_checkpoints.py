"""Markers, verification and rotation, with a fake storage. Agreement across ranks: test_checkpoint_agreement.py;
real files and links: test_checkpoint_real_files.py."""

from __future__ import annotations

import json
import posixpath
from types import SimpleNamespace

import pytest
from testkit.checkpoints import IDENTITY, OTHER, RESUMABLE, FakeStorage, save

from hftrain.checkpoint import manager as ck
from hftrain.parallel import process_group as distributed
from hftrain.run.callbacks import CheckpointCallback


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
