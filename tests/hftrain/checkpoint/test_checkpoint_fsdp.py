"""FSDP checkpoints (sharded model and optimizer state) follow the same rules: every shard file hashed in the
markers, verified before resume, a corrupt shard rejected by name, resume from the next older checkpoint,
and a consolidated final model that `from_pretrained` loads. Two ranks through torchrun on CPU (gloo), FSDP2
(`"version": 2`, the pipeline's default; hftrain/parallel/fsdp.py turns FSDP on for CPU ranks). Killed runs resuming
from the shards with the weights of an uninterrupted run: tests/hftrain/parallel/test_fsdp.py."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from testkit.training import TRAIN_PY, layout_job, subprocess_env, to_argv

from hftrain.checkpoint import manager as ck
from local_mode import synthetic as synth
from local_mode.sagemaker.training_hosts import free_port

pytestmark = pytest.mark.slow

FSDP_CONFIG = {"version": 2, "transformer_layer_cls_to_wrap": ["BertLayer"], "state_dict_type": "SHARDED_STATE_DICT"}


def _torchrun(base: Path, hps: dict) -> tuple[int, str]:
    torchrun = str(Path(sys.executable).parent / "torchrun")
    proc = subprocess.run(
        ["nice", "-n", "5", torchrun, "--nproc_per_node", "2", "--master_port", str(free_port()), str(TRAIN_PY),
         *to_argv(hps)],
        env={**subprocess_env(base), "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout + proc.stderr


def test_fsdp_sharded_checkpoints_verify_resume_and_consolidate(tiny_models, tmp_path):
    base = layout_job(tmp_path / "job", train=synth.cls_examples(40, 3))
    hps = {"task": "text-classification", "max_steps": 4, "save_steps": 2, "per_device_train_batch_size": 4,
           "learning_rate": 1e-3, "seed": 5, "model_name_or_path": tiny_models["bert"], "progress_every_seconds": 0,
           "fsdp": "full_shard auto_wrap", "fsdp_config": json.dumps(FSDP_CONFIG)}
    code, log = _torchrun(base, hps)
    assert code == 0, log[-4000:]
    assert "FSDP2 on CPU: 2 ranks" in log, log[-3000:]
    root = base / "checkpoints"
    assert not (root / "checkpoint-4" / "model.safetensors").exists()  # sharded state only
    marker = json.loads((root / "checkpoint-4" / "_complete.algo-1.json").read_text())
    shards = sorted(f for f in marker["files"] if f.startswith(("pytorch_model_fsdp_0/", "optimizer_0/")))
    for part in ("pytorch_model_fsdp_0", "optimizer_0"):  # one shard per rank, each hashed in the marker
        assert {f"{part}/__0_0.distcp", f"{part}/__1_0.distcp", f"{part}/.metadata"} <= set(shards), shards
    assert all("hash" in marker["files"][f] for f in shards)
    assert ck.verify(str(root / "checkpoint-4")).ok
    shard = root / "checkpoint-4" / next(f for f in shards if f.endswith(".distcp"))
    data = bytearray(shard.read_bytes())
    data[-16:] = bytes(16)  # same size, other content
    shard.write_bytes(bytes(data))
    (base / "model" / "model.safetensors").unlink(missing_ok=True)
    code, log = _torchrun(base, {**hps, "max_steps": 6})
    assert code == 0, log[-4000:]
    assert f"checkpoint {root / 'checkpoint-4'} rejected (corrupt): file {shard.relative_to(root / 'checkpoint-4')}" \
           in log
    assert f"resuming from {root / 'checkpoint-2'}" in log
    assert (root / "checkpoint-4.unverified-1").is_dir() and ck.verify(str(root / "checkpoint-6")).ok
    from transformers import AutoModelForSequenceClassification

    AutoModelForSequenceClassification.from_pretrained(base / "model")
