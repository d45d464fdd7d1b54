"""Checkpoints on disk (issue 24, and issue 23's verify-before-open): links, rotation of what the markers list,
what gets unpickled, the view without hard links."""

from __future__ import annotations

import json
import os
import shutil
from types import SimpleNamespace

import pytest
from testkit.checkpoints import IDENTITY, RESUMABLE

from hftrain.checkpoint import manager as ck
from hftrain.checkpoint import resume
from hftrain.parallel import process_group as distributed
from hftrain.run.callbacks import CheckpointCallback

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
