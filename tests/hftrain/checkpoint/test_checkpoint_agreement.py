"""Multi-node agreement on the checkpoint to resume from, and a load failure on one rank, with a fake storage and
fake ranks (threads)."""

from __future__ import annotations

import threading

import pytest
from testkit.checkpoints import IDENTITY, OTHER, RESUMABLE, FakeStorage, save

from hftrain.checkpoint import resume
from hftrain.parallel import process_group as distributed

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


def test_a_load_failure_on_one_rank_makes_every_rank_fall_back_together(monkeypatch):
    """The Trainer's loads are guarded by one all-reduce: a failure on any rank raises on all (no rank trains on
    while another waits in a collective)."""
    world = FakeWorld(["a", "b"])
    world.install(monkeypatch)
    monkeypatch.setattr(distributed, "any_rank", lambda flag: any(world.all_gather(bool(flag))))

    def load_on(rank):
        def load():
            if rank == 0:
                raise ValueError("loaded state dict contains a parameter group that doesn't match")
        return load

    def guarded(rank):
        try:
            resume.guarded_load("optimizer/scheduler", "/ckpt/checkpoint-8", load_on(rank))
        except resume.CheckpointLoadError as err:
            return err.reason
        return "no error"

    world.barrier.reset()
    reasons = world.run(guarded)
    assert reasons[0].startswith("optimizer/scheduler: ValueError: loaded state dict")
    assert reasons[1] == "optimizer/scheduler failed on another rank"
    assert world.run(lambda rank: resume.guarded_load("x", "c", lambda: None)) == [None, None]
