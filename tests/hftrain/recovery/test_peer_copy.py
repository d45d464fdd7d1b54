"""A recovered generation's checkpoint made whole from the peers (hftrain/recovery/peer_copy.py): which files go
from which host to which."""

from __future__ import annotations

import json

from contract.checkpoint_marker import marker_name
from hftrain.recovery import peer_copy


def inventory(host: str, files: dict[str, int], steps=(20,)) -> dict:
    marker = json.dumps({"format": 2, "host": host, "files": {n: {"size": s, "hash": "x"} for n, s in files.items()}})
    return {f"checkpoint-{step}": {"marker": marker, "files": {**files, marker_name(host): len(marker)}}
            for step in steps}


def test_each_host_gets_the_files_and_the_marker_it_lacks_from_the_host_that_wrote_them():
    leader = inventory("algo-1", {"model.safetensors": 100, "optimizer.pt": 50, "rng_state_0.pth": 3})
    other = inventory("algo-2", {"rng_state_1.pth": 3})
    newest, transfers = peer_copy.plan({0: ("algo-1", leader), 1: ("algo-2", other)}, ["algo-1", "algo-2"])
    assert newest == "checkpoint-20"
    assert {(name, owner, tuple(to)) for name, owner, to in transfers} == {
        (marker_name("algo-1"), 0, (1,)), ("model.safetensors", 0, (1,)), ("optimizer.pt", 0, (1,)),
        ("rng_state_0.pth", 0, (1,)), (marker_name("algo-2"), 1, (0,)), ("rng_state_1.pth", 1, (0,))}


def test_the_newest_checkpoint_every_host_marked_and_nothing_a_host_already_has():
    leader = inventory("algo-1", {"model.safetensors": 100}, steps=(20, 40))
    other = inventory("algo-2", {"model.safetensors": 100}, steps=(20,))  # 40 not marked on algo-2: incomplete
    newest, transfers = peer_copy.plan({0: ("algo-1", leader), 2: ("algo-2", other)}, ["algo-1", "algo-2"])
    assert newest == "checkpoint-20"
    assert ("model.safetensors", 0, [2]) not in transfers  # same size on both: not sent


def test_no_checkpoint_marked_everywhere_means_nothing_to_copy():
    leader = inventory("algo-1", {"model.safetensors": 100})
    assert peer_copy.plan({0: ("algo-1", leader), 1: ("algo-2", {})}, ["algo-1", "algo-2"]) == (None, [])
    assert peer_copy.plan({0: ("algo-1", leader)}, ["algo-1", "algo-2"]) == (None, [])  # a host without a leader
