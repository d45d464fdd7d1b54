"""Checkpoint completeness, discovery, resume agreement and rotation, with a fake storage and fake ranks."""

from __future__ import annotations

import json
import os
import posixpath
from types import SimpleNamespace

from hftrain import checkpoints as ck
from hftrain.callbacks import CheckpointCallback


class FakeStorage(ck.LocalStorage):
    """An in-memory file tree: path -> bytes."""

    def __init__(self):
        self.files: dict[str, str] = {}

    def add(self, path, text="x"):
        self.files[path] = text

    def list_dirs(self, root):
        names = set()
        for path in self.files:
            if path.startswith(root.rstrip("/") + "/"):
                rest = path[len(root.rstrip("/")) + 1:]
                if "/" in rest:
                    names.add(rest.split("/", 1)[0])
        return sorted(names)

    def list_files(self, directory):
        prefix = directory.rstrip("/") + "/"
        return {p[len(prefix):]: len(t) for p, t in self.files.items() if p.startswith(prefix)}

    def read_text(self, path):
        return self.files.get(path)

    def write_text_atomic(self, path, text):
        self.files[path] = text

    def remove_tree(self, path):
        prefix = path.rstrip("/") + "/"
        for p in [p for p in self.files if p.startswith(prefix)]:
            del self.files[p]

    def exists(self, path):
        prefix = path.rstrip("/") + "/"
        return path in self.files or any(p.startswith(prefix) for p in self.files)


HOSTS = ["algo-1", "algo-2"]


def _save(storage, root, step, *, hosts=HOSTS, markers=HOSTS):
    d = posixpath.join(root, f"checkpoint-{step}")
    storage.add(f"{d}/model.safetensors", "weights")
    storage.add(f"{d}/optimizer.pt", "optim")
    for rank, host in enumerate(hosts):
        node_files = {f"rng_state_{rank}.pth": 3}
        if host == hosts[0]:
            node_files.update({"model.safetensors": 7, "optimizer.pt": 5})
        storage.add(f"{d}/rng_state_{rank}.pth", "rng")
        if host in markers:
            storage.add(f"{d}/{ck.marker_name(host)}",
                        json.dumps({"step": step, "host": host, "hosts": hosts, "files": node_files}))
    return d


def test_complete_needs_every_host_marker_and_every_listed_file():
    s, root = FakeStorage(), "/ckpt"
    full = _save(s, root, 10)
    assert ck.inspect(full, s)[0]
    half = _save(s, root, 20, markers=["algo-1"])
    complete, reason, _ = ck.inspect(half, s)
    assert not complete and "algo-2" in reason
    truncated = _save(s, root, 30)
    s.add(f"{truncated}/optimizer.pt", "op")  # marker says 5 bytes
    assert "bytes" in ck.inspect(truncated, s)[1]
    missing = _save(s, root, 40)
    del s.files[f"{missing}/rng_state_1.pth"]
    assert "missing" in ck.inspect(missing, s)[1]
    nothing = posixpath.join(root, "checkpoint-50")
    s.add(f"{nothing}/model.safetensors")
    assert "no completion marker" in ck.inspect(nothing, s)[1]
    infos = ck.discover(root, s)
    assert [(i.step, i.complete) for i in infos] == [(10, True), (20, False), (30, False), (40, False), (50, False)]
    assert ck.newest_complete(infos).step == 10


def test_marker_lists_node_files_and_is_written_atomically(tmp_path):
    d = tmp_path / "checkpoint-5"
    (d / "sub").mkdir(parents=True)
    (d / "rng_state_0.pth").write_bytes(b"abc")
    (d / "sub" / "x.bin").write_bytes(b"12345")
    marker = ck.write_node_marker(str(d), host="algo-1", hosts=["algo-1"], step=5, world_size=1)
    assert marker["files"] == {"rng_state_0.pth": 3, "sub/x.bin": 5}
    assert ck.inspect(str(d)) == (True, "", ["algo-1"])
    assert not any(name.endswith(".tmp") for name in os.listdir(d))


def test_ranks_agree_on_the_newest_step_all_of_them_see():
    assert ck.choose_resume_step([[10, 20, 30], [10, 20], [20, 10, 30]]) == 20
    assert ck.choose_resume_step([[10], []]) is None
    assert ck.choose_resume_step([]) is None


def test_rotation_keeps_the_newest_and_the_resumed_checkpoint():
    assert ck.rotation_victims([10, 20, 30, 40], [10, 20, 30, 40], keep=2) == [10, 20]
    assert ck.rotation_victims([10, 20, 30, 40], [10, 20, 30, 40], keep=1, protected=[20]) == [10, 30]
    # a partial checkpoint older than the newest complete one goes; nothing newer is touched
    assert ck.rotation_victims([10, 15, 20, 25], [10, 20], keep=5) == [15]
    assert ck.rotation_victims([10, 20], [], keep=1) == []
    assert ck.rotation_victims([10, 20, 30], [10, 20, 30], keep=None) == []


def test_checkpoint_callback_marks_and_rotates_with_fake_storage(monkeypatch):
    from hftrain import distributed

    monkeypatch.setattr(distributed, "local_rank", lambda: 0)
    s, root = FakeStorage(), "/ckpt"
    _save(s, root, 10, hosts=["algo-1"])  # the checkpoint this run resumed from
    stale = posixpath.join(root, "checkpoint-30")
    s.add(f"{stale}/rng_state_7.pth", "old")  # a partial leftover of an earlier attempt, same step
    cb = CheckpointCallback(root=root, host="algo-1", hosts=["algo-1"], keep=1, resumed_step=10,
                            known_complete=[10], storage=s)
    for step in (20, 30, 40):
        state = SimpleNamespace(global_step=step, is_world_process_zero=True)
        control = SimpleNamespace(should_save=True)
        cb.on_step_end(None, state, control)
        d = posixpath.join(root, f"checkpoint-{step}")
        s.add(f"{d}/model.safetensors", "weights")
        s.add(f"{d}/rng_state_0.pth", "rng")
        cb.on_save(None, state, control)
        assert ck.inspect(d, s)[0]
    assert f"{stale}/rng_state_7.pth" not in s.files  # removed before step 30 was saved again
    assert [i.step for i in ck.discover(root, s)] == [10, 40]  # keep=1, plus the resumed one
