"""The real sagemaker-training toolkit runs train.py from a sourcedir.tar.gz: 2 hosts x 2 processes
(torchrun, gloo), with replicated input and with sharded, uneven input."""

from __future__ import annotations

import collections
import json
import tarfile
from pathlib import Path

import hftrain_smhost as smhost
import pytest

from local_mode import synthetic as synth

HPS = {"task": "text-classification", "num_train_epochs": 2, "per_device_train_batch_size": 4, "save_steps": 5,
       "logging_steps": 5, "save_total_limit": 2, "learning_rate": 1e-3}


@pytest.fixture(scope="module")
def code_and_model(tiny_models, tmp_path_factory):
    root = tmp_path_factory.mktemp("toolkit-code")
    sourcedir = smhost.build_sourcedir(root / "sourcedir.tar.gz")
    archive = root / "model.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        for path in tiny_models["bert"].iterdir():
            tar.add(path, arcname=path.name)
    return sourcedir, archive


def _seen(trace_dir: Path) -> tuple[dict[int, collections.Counter], int]:
    seen: dict[int, collections.Counter] = collections.defaultdict(collections.Counter)
    zero = 0
    for path in trace_dir.glob("seen-*.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            seen[record["epoch"]].update(record["ids"])
            zero += record["zero_weight"]
    return seen, zero


def _common_checks(results, all_ids):
    for result in results:
        assert result.returncode == 0, f"{result.host.name} failed:\n{result.log[-4000:]}"
        assert (result.host.output_dir / "success").exists()
    first, second = results[0].host, results[1].host
    # global rank 0 (on algo-1) writes the model, the metrics and the log lines, once
    assert (first.model_dir / "model.safetensors").exists()
    assert not any(second.model_dir.iterdir())
    metrics = json.loads((first.output_dir / "data" / "metrics.json").read_text())
    assert "train_loss" in metrics and "eval_accuracy" in metrics
    assert "METRIC train_loss=" in results[0].log and "METRIC train_loss=" not in results[1].log
    assert "PROGRESS global_step=" in results[0].log
    assert "torchrun --nnodes 2 --nproc_per_node 2" in results[0].log
    # no two nodes write a file of the same name into the (shared) checkpoint prefix
    names = [
        {p.relative_to(h.checkpoint_dir).as_posix() for p in h.checkpoint_dir.rglob("*") if p.is_file()}
        for h in (first, second)
    ]
    assert names[0] and names[1] and not (names[0] & names[1])
    assert any(n.endswith("_complete.algo-2.json") for n in names[1])
    assert {n for n in names[1] if n.endswith(".pth")} and all("rng_state_" in n for n in names[1] if n.endswith(".pth"))


@pytest.mark.slow
def test_sharded_uneven_input_every_example_once_per_epoch(code_and_model, tmp_path):
    sourcedir, archive = code_and_model
    rows = synth.cls_examples(70, 5)
    files = {
        "algo-1": [synth.write_jsonl(tmp_path / "data" / "part-0.jsonl", rows[:37]),
                   synth.write_jsonl(tmp_path / "data" / "part-1.jsonl", rows[37:57])],
        "algo-2": [synth.write_jsonl(tmp_path / "data" / "part-2.jsonl", rows[57:])],
    }
    validation = synth.write_jsonl(tmp_path / "data" / "val.jsonl", synth.cls_examples(20, 6))
    hosts = smhost.layout_hosts(
        tmp_path / "hosts", hosts=["algo-1", "algo-2"], hyperparameters=HPS,
        channels={"train": files, "validation": {"algo-1": [validation], "algo-2": [validation]},
                  "model": {"algo-1": [archive], "algo-2": [archive]}},
        distribution={"train": "ShardedByS3Key"}, sourcedir=sourcedir, processes_per_host=2,
    )
    results = smhost.run_hosts(hosts, timeout=420, extra_env={"HFTRAIN_TRACE_DIR": str(tmp_path / "trace")})
    _common_checks(results, [r["id"] for r in rows])
    seen, zero_weight = _seen(tmp_path / "trace")
    assert sorted(seen) == [0, 1]
    for epoch, counter in seen.items():
        assert sorted(counter) == sorted(r["id"] for r in rows), f"epoch {epoch}"
        assert set(counter.values()) == {1}, f"epoch {epoch}: an example was used twice"
    # 57 rows on algo-1 -> 29 + 28, 13 on algo-2 -> 7 + 6: 8 batches for everyone, algo-2 fills 1 + 2
    assert zero_weight == 2 * 3
    assert "sharded input, rows per rank [29, 28, 7, 6], 8 batches per epoch" in results[0].log


@pytest.mark.slow
def test_replicated_input_uses_a_distributed_sampler(code_and_model, tmp_path):
    sourcedir, archive = code_and_model
    rows = synth.cls_examples(50, 7)
    train = synth.write_jsonl(tmp_path / "data" / "train.jsonl", rows)
    validation = synth.write_jsonl(tmp_path / "data" / "val.jsonl", synth.cls_examples(20, 8))
    hosts = smhost.layout_hosts(
        tmp_path / "hosts", hosts=["algo-1", "algo-2"], hyperparameters={**HPS, "num_train_epochs": 1},
        channels={"train": {"algo-1": [train], "algo-2": [train]},
                  "validation": {"algo-1": [validation], "algo-2": [validation]},
                  "model": {"algo-1": [archive], "algo-2": [archive]}},
        distribution={}, sourcedir=sourcedir, processes_per_host=2,
    )
    results = smhost.run_hosts(hosts, timeout=420, extra_env={"HFTRAIN_TRACE_DIR": str(tmp_path / "trace")})
    _common_checks(results, [r["id"] for r in rows])
    seen, zero_weight = _seen(tmp_path / "trace")
    assert set(seen[0].values()) == {1} and sorted(seen[0]) == sorted(r["id"] for r in rows)
    assert zero_weight == 0
    assert "replicated input, rows per rank [13, 13, 12, 12]" in results[0].log


@pytest.mark.slow
def test_a_host_without_files_keeps_in_step(code_and_model, tmp_path):
    """ShardedByS3Key with fewer objects than hosts: algo-2 gets nothing and still joins every step."""
    sourcedir, archive = code_and_model
    rows = synth.cls_examples(24, 9)
    train = synth.write_jsonl(tmp_path / "data" / "only.jsonl", rows)
    hosts = smhost.layout_hosts(
        tmp_path / "hosts", hosts=["algo-1", "algo-2"], hyperparameters={**HPS, "num_train_epochs": 1},
        channels={"train": {"algo-1": [train], "algo-2": []}, "model": {"algo-1": [archive], "algo-2": [archive]}},
        distribution={"train": "ShardedByS3Key"}, sourcedir=sourcedir, processes_per_host=1,
    )
    results = smhost.run_hosts(hosts, timeout=300, extra_env={"HFTRAIN_TRACE_DIR": str(tmp_path / "trace")})
    for result in results:
        assert result.returncode == 0, f"{result.host.name} failed:\n{result.log[-4000:]}"
    seen, zero_weight = _seen(tmp_path / "trace")
    assert sorted(seen[0]) == sorted(r["id"] for r in rows) and set(seen[0].values()) == {1}
    assert zero_weight == 6  # 24 rows / batch 4 = 6 steps; algo-2 runs all 6 with zero weight
    assert "rows per rank [24, 0], 6 batches per epoch" in results[0].log
    assert (hosts[0].model_dir / "model.safetensors").exists()


def _merge_as_s3(hosts, target: Path) -> Path:
    """What the shared S3 prefix holds after every node synced its own checkpoint dir (no name in common)."""
    import shutil

    seen: set[str] = set()
    for host in hosts:
        for path in sorted(host.checkpoint_dir.rglob("*")):
            if path.is_file():
                rel = path.relative_to(host.checkpoint_dir).as_posix()
                assert rel not in seen, f"{rel} written by two nodes"
                seen.add(rel)
                (target / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target / rel)
    return target


@pytest.mark.slow
def test_multi_node_markers_and_a_restart_on_other_host_names(code_and_model, tmp_path):
    """Two nodes each write their own marker; a step counts only with every node's marker. The restart runs
    on two hosts with other names (spot replacement), each restored from the shared prefix: they verify the
    checkpoint written by algo-1 + algo-2, reject the one whose algo-2 marker never arrived, and agree."""
    import shutil

    sourcedir, archive = code_and_model
    train = synth.write_jsonl(tmp_path / "data" / "train.jsonl", synth.cls_examples(32, 11))
    hps = {"task": "text-classification", "max_steps": 4, "save_steps": 2, "per_device_train_batch_size": 4,
           "learning_rate": 1e-3, "logging_steps": 2, "progress_every_seconds": 0}

    def layout(root, names, extra):
        return smhost.layout_hosts(root, hosts=names, hyperparameters={**hps, **extra},
                                   channels={"train": {n: [train] for n in names},
                                             "model": {n: [archive] for n in names}},
                                   distribution={}, sourcedir=sourcedir, processes_per_host=1)

    first = layout(tmp_path / "first", ["algo-1", "algo-2"], {})
    for result in smhost.run_hosts(first, timeout=300):
        assert result.returncode == 0, f"{result.host.name} failed:\n{result.log[-4000:]}"
    for step in (2, 4):  # per-node markers, each listing only what its node wrote
        a = json.loads((first[0].checkpoint_dir / f"checkpoint-{step}" / "_complete.algo-1.json").read_text())
        b = json.loads((first[1].checkpoint_dir / f"checkpoint-{step}" / "_complete.algo-2.json").read_text())
        assert "model.safetensors" in a["files"] and list(b["files"]) == ["rng_state_1.pth"]
        assert a["hosts"] == b["hosts"] == ["algo-1", "algo-2"] and a["world_size"] == 2
    shared = _merge_as_s3(first, tmp_path / "s3")
    (shared / "checkpoint-4" / "_complete.algo-2.json").unlink()  # algo-2's last marker never reached S3

    second = layout(tmp_path / "second", ["algo-5", "algo-6"], {"max_steps": 6})
    for host in second:
        shutil.rmtree(host.checkpoint_dir)
        shutil.copytree(shared, host.checkpoint_dir)  # SageMaker restores the prefix to every instance
    results = smhost.run_hosts(second, timeout=300)
    for result in results:
        assert result.returncode == 0, f"{result.host.name} failed:\n{result.log[-4000:]}"
    log = results[0].log
    assert "checkpoint-4 rejected (incomplete): no completion marker from host(s) algo-2" in log
    assert "resuming from" in log and "checkpoint-2 (verified on 2 node(s)" in log
    final = [json.loads((h.checkpoint_dir / "checkpoint-6" / f"_complete.{h.name}.json").read_text()) for h in second]
    assert [m["hosts"] for m in final] == [["algo-5", "algo-6"]] * 2
    assert final[0]["lineage"] == json.loads(
        (shared / "checkpoint-2" / "_complete.algo-1.json").read_text())["lineage"]
    # both nodes moved the unverified checkpoint-4 aside (same name) before saving step 4 again
    for host in second:
        assert (host.checkpoint_dir / "checkpoint-4.unverified-1" / "_complete.algo-1.json").exists()
    assert (second[0].model_dir / "model.safetensors").exists()
