"""Spot behaviour end to end: kill and restart resumes exactly; SIGTERM saves and exits 0; partial
checkpoints are skipped."""

from __future__ import annotations

import json
import signal
import subprocess
import time

import pytest
from safetensors.torch import load_file
from testkit.training import finish, layout_job, start_train, wait_for

from local_mode import synthetic as synth

HPS = {"task": "text-classification", "max_steps": 14, "save_steps": 4, "logging_steps": 1,
       "per_device_train_batch_size": 4, "learning_rate": 1e-3, "seed": 11, "warmup_steps": 2,
       "progress_every_seconds": 0}


@pytest.mark.slow
def test_killed_run_resumes_to_the_same_weights(tiny_models, tmp_path):
    rows = synth.cls_examples(40, 3)  # 10 batches an epoch: the run crosses an epoch boundary after resuming
    hps = {**HPS, "model_name_or_path": tiny_models["bert"]}

    straight = layout_job(tmp_path / "straight", train=rows)
    proc = start_train(straight, hps)
    out = finish(proc)
    assert proc.returncode == 0, out[-3000:]

    killed = layout_job(tmp_path / "killed", train=rows)
    proc = start_train(killed, hps)
    wait_for(proc, "PROGRESS global_step=7 ")
    proc.kill()
    proc.wait()
    ckpt = killed / "checkpoints"
    assert (ckpt / "checkpoint-4" / "_complete.algo-1.json").exists()
    assert not (killed / "model" / "model.safetensors").exists()
    # a partial checkpoint (its save was interrupted: no completion marker) must not be resumed from
    partial = ckpt / "checkpoint-12"
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"truncated")

    proc = start_train(killed, hps)
    out = finish(proc)
    assert proc.returncode == 0, out[-3000:]
    assert "checkpoint-12 rejected (incomplete): no completion marker" in out
    assert f"resuming from {ckpt / 'checkpoint-4'}" in out  # killed at step 7: 4 is the newest complete one
    state = json.loads((ckpt / "checkpoint-14" / "trainer_state.json").read_text())
    assert state["global_step"] == 14
    # the partial directory was moved aside (kept) when step 12 was saved again
    assert (ckpt / "checkpoint-12.unverified-1" / "model.safetensors").read_bytes() == b"truncated"
    history = json.loads((ckpt / "_history.json").read_text())
    (interruption,) = history["interruptions"]
    assert interruption["resumed_from_step"] == 4 and interruption["step_reached"] >= 4

    # a restart after the last checkpoint trains no further step and writes the same model again
    (killed / "model" / "model.safetensors").unlink()
    proc = start_train(killed, hps)
    out = finish(proc)
    assert proc.returncode == 0 and "training finished at" in out, out[-3000:]
    assert not (ckpt / "checkpoint-15").exists()

    a = load_file(straight / "model" / "model.safetensors")
    b = load_file(killed / "model" / "model.safetensors")
    assert a.keys() == b.keys()
    worst = max(float((a[k] - b[k]).abs().max()) for k in a)
    assert worst < 1e-5, f"resumed weights differ by {worst}"


@pytest.mark.slow
def test_sigterm_saves_a_checkpoint_and_exits_zero(tiny_models, tmp_path):
    base = layout_job(tmp_path, train=synth.cls_examples(64, 4))
    proc = start_train(base, {**HPS, "model_name_or_path": tiny_models["bert"], "max_steps": 100000,
                              "save_steps": 100000})
    wait_for(proc, "PROGRESS global_step=3 ")
    sent = time.time()
    proc.send_signal(signal.SIGTERM)
    out = finish(proc, timeout=60)
    took = time.time() - sent
    assert proc.returncode == 0, out[-3000:]
    assert took < 30
    assert "SIGTERM received" in out
    saved = sorted((base / "checkpoints").glob("checkpoint-*"))
    assert len(saved) == 1 and (saved[0] / "_complete.algo-1.json").exists()
    step = int(saved[0].name.split("-")[1])
    assert 3 <= step < 100000
    assert not (base / "model" / "model.safetensors").exists()  # the final model is for finished runs


@pytest.mark.slow
def test_sigterm_through_torchrun_all_ranks_save_one_checkpoint(tiny_models, tmp_path):
    """torchrun passes SIGTERM to its workers; they agree on one step and save one complete checkpoint."""
    import sys
    from pathlib import Path

    from testkit.training import TRAIN_PY, subprocess_env, to_argv

    from local_mode.sagemaker.training_hosts import free_port

    base = layout_job(tmp_path, train=synth.cls_examples(64, 4))
    torchrun = str(Path(sys.executable).parent / "torchrun")
    env = {**subprocess_env(base), "OMP_NUM_THREADS": "1"}
    hps = {**HPS, "model_name_or_path": tiny_models["bert"], "max_steps": 100000, "save_steps": 100000}
    proc = subprocess.Popen(
        ["nice", "-n", "5", torchrun, "--nproc_per_node", "2", "--master_port", str(free_port()), str(TRAIN_PY), *to_argv(hps)],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1,
    )
    wait_for(proc, "PROGRESS global_step=3 ")
    sent = time.time()
    proc.send_signal(signal.SIGTERM)
    out = finish(proc, timeout=60)
    assert time.time() - sent < 30
    assert out.count("SIGTERM received") == 2, out[-3000:]
    assert "stopped by SIGTERM at step" in out
    saved = sorted((base / "checkpoints").glob("checkpoint-*"))
    assert len(saved) == 1, saved
    names = {p.name for p in saved[0].iterdir()}
    assert {"_complete.algo-1.json", "rng_state_0.pth", "rng_state_1.pth", "optimizer.pt"} <= names
    from hftrain.checkpoint import manager as checkpoints

    assert checkpoints.verify(str(saved[0])).ok  # both ranks' files hashed in the one marker
