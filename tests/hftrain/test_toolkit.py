"""The real sagemaker-training toolkit runs train.py from a sourcedir.tar.gz as the local SageMaker runs a
job: 2 hosts x 2 processes (torchrun, gloo), with replicated input and with sharded, uneven input."""

from __future__ import annotations

import collections
import json
import tarfile
from pathlib import Path

import pytest
from testkit import smhost

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


def _dir(host, name: str) -> Path:
    return host.path(f"/opt/ml/{name}")


def _common_checks(results):
    for result in results:
        assert result.returncode == 0, f"{result.host.name} failed:\n{result.log[-4000:]}"
        assert (_dir(result.host, "output") / "success").exists()
    first, second = results[0].host, results[1].host
    # global rank 0 (on algo-1) writes the model, the metrics and the log lines, once
    assert (_dir(first, "model") / "model.safetensors").exists()
    assert not any(_dir(second, "model").iterdir())
    metrics = json.loads((_dir(first, "output") / "data" / "metrics.json").read_text())
    assert "train_loss" in metrics and "eval_accuracy" in metrics
    assert "METRIC train_loss=" in results[0].log and "METRIC train_loss=" not in results[1].log
    assert "PROGRESS global_step=" in results[0].log
    assert "torchrun --nnodes 2 --nproc_per_node 2" in results[0].log
    # no two nodes write a file of the same name into the (shared) checkpoint prefix
    names = [
        {p.relative_to(_dir(h, "checkpoints")).as_posix() for p in _dir(h, "checkpoints").rglob("*") if p.is_file()}
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
    job = smhost.lay_out(
        tmp_path / "hosts", hosts=["algo-1", "algo-2"], hyperparameters=HPS,
        channels={"train": files, "validation": {"algo-1": [validation], "algo-2": [validation]},
                  "model": {"algo-1": [archive], "algo-2": [archive]}},
        distribution={"train": "ShardedByS3Key"}, sourcedir=sourcedir, processes_per_host=2,
        environment={"HFTRAIN_TRACE_DIR": str(tmp_path / "trace")},
    )
    results = job.run(timeout=420)
    _common_checks(results)
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
    job = smhost.lay_out(
        tmp_path / "hosts", hosts=["algo-1", "algo-2"], hyperparameters={**HPS, "num_train_epochs": 1},
        channels={"train": {"algo-1": [train], "algo-2": [train]},
                  "validation": {"algo-1": [validation], "algo-2": [validation]},
                  "model": {"algo-1": [archive], "algo-2": [archive]}},
        sourcedir=sourcedir, processes_per_host=2, environment={"HFTRAIN_TRACE_DIR": str(tmp_path / "trace")},
    )
    results = job.run(timeout=420)
    _common_checks(results)
    seen, zero_weight = _seen(tmp_path / "trace")
    assert set(seen[0].values()) == {1} and sorted(seen[0]) == sorted(r["id"] for r in rows)
    assert zero_weight == 0
    assert "replicated input, rows per rank [13, 13, 12, 12]" in results[0].log


@pytest.mark.slow
@pytest.mark.parametrize("second", [["notes.txt"], []])
def test_a_host_with_no_readable_rows_fails_at_once_naming_its_objects(code_and_model, tmp_path, second):
    """ShardedByS3Key: algo-2 receives only an object the reader does not take (or none at all). Every host fails at
    start-up with a message that names the host, the objects and the fix: never a run that trains on half the
    data and succeeds."""
    sourcedir, archive = code_and_model
    train = synth.write_jsonl(tmp_path / "data" / "part-0.jsonl", synth.cls_examples(24, 9))
    others = []
    for name in second:
        (tmp_path / "data" / name).write_text("free text, not a data file\n")
        others.append(tmp_path / "data" / name)
    job = smhost.lay_out(
        tmp_path / "hosts", hosts=["algo-1", "algo-2"], hyperparameters={**HPS, "num_train_epochs": 1},
        channels={"train": {"algo-1": [train], "algo-2": others}, "model": {"algo-1": [archive], "algo-2": [archive]}},
        distribution={"train": "ShardedByS3Key"}, sourcedir=sourcedir, processes_per_host=1,
    )
    results = job.run(timeout=300)
    for result in results:
        assert result.returncode != 0, f"{result.host.name} succeeded:\n{result.log[-3000:]}"
        failure = (_dir(result.host, "output") / "failure").read_text()
        assert "this host (algo-2) has no readable rows of the ShardedByS3Key channel `train`" in failure, failure
        if second:
            assert "notes.txt (an extension the reader does not take)" in failure
            assert "convert the others, or move them to another prefix" in failure
        else:
            assert "SageMaker gave it no object" in failure
    assert not (_dir(results[0].host, "model") / "model.safetensors").exists()


def _merge_as_s3(hosts, target: Path) -> Path:
    """What the shared S3 prefix holds after every node synced its own checkpoint dir (no name in common)."""
    import shutil

    seen: set[str] = set()
    for host in hosts:
        for path in sorted(_dir(host, "checkpoints").rglob("*")):
            if path.is_file():
                rel = path.relative_to(_dir(host, "checkpoints")).as_posix()
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
        return smhost.lay_out(root, hosts=names, hyperparameters={**hps, **extra},
                              channels={"train": {n: [train] for n in names}, "model": {n: [archive] for n in names}},
                              sourcedir=sourcedir, processes_per_host=1)

    first_job = layout(tmp_path / "first", ["algo-1", "algo-2"], {})
    for result in first_job.run(timeout=300):
        assert result.returncode == 0, f"{result.host.name} failed:\n{result.log[-4000:]}"
    first = first_job.hosts
    for step in (2, 4):  # per-node markers, each listing only what its node wrote
        a = json.loads((_dir(first[0], "checkpoints") / f"checkpoint-{step}" / "_complete.algo-1.json").read_text())
        b = json.loads((_dir(first[1], "checkpoints") / f"checkpoint-{step}" / "_complete.algo-2.json").read_text())
        assert "model.safetensors" in a["files"] and list(b["files"]) == ["rng_state_1.pth"]
        assert a["hosts"] == b["hosts"] == ["algo-1", "algo-2"] and a["world_size"] == 2
    shared = _merge_as_s3(first, tmp_path / "s3")
    (shared / "checkpoint-4" / "_complete.algo-2.json").unlink()  # algo-2's last marker never reached S3

    second_job = layout(tmp_path / "second", ["algo-5", "algo-6"], {"max_steps": 6})
    second = second_job.hosts
    for host in second:
        shutil.rmtree(_dir(host, "checkpoints"))
        shutil.copytree(shared, _dir(host, "checkpoints"))  # SageMaker restores the prefix to every instance
    results = second_job.run(timeout=300)
    for result in results:
        assert result.returncode == 0, f"{result.host.name} failed:\n{result.log[-4000:]}"
    log = results[0].log
    assert "checkpoint-4 rejected (incomplete): no completion marker from host(s) algo-2" in log
    assert "resuming from" in log and "checkpoint-2 (verified on 2 node(s)" in log
    final = [json.loads((_dir(h, "checkpoints") / "checkpoint-6" / f"_complete.{h.name}.json").read_text())
             for h in second]
    assert [m["hosts"] for m in final] == [["algo-5", "algo-6"]] * 2
    assert final[0]["lineage"] == json.loads(
        (shared / "checkpoint-2" / "_complete.algo-1.json").read_text())["lineage"]
    # both nodes moved the unverified checkpoint-4 aside (same name) before saving step 4 again
    for host in second:
        assert (_dir(host, "checkpoints") / "checkpoint-4.unverified-1" / "_complete.algo-1.json").exists()
    assert (_dir(second[0], "model") / "model.safetensors").exists()
