"""Issue 23, finding 1: a checkpoint from outside the run must never be opened.

The exploit as a data-bucket writer would run it: a torch distributed checkpoint (FSDP's sharded state) in a data
channel, with a completion marker whose content hashes the attacker computed and a `.metadata` that is a pickle of
code, named by `resume_from_checkpoint`. Under FSDP the Trainer reads that `.metadata` with `pickle.load`
(torch/distributed/checkpoint/filesystem.py, `FileSystemReader.read_metadata`) and the code runs with the job's
role. The payload here only writes a file. The training code now refuses the hyperparameter before anything is
read (Prepare and the request guard refuse the spec earlier still: tests/lambda/spec/test_lambda_hp_paths.py).
"""

from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path

import pytest
from testkit.training import TRAIN_PY, layout_job, subprocess_env, to_argv

from hftrain.checkpoint import manager as ck
from hftrain.data.files import DataError
from local_mode import synthetic as synth
from local_mode.sagemaker.training_hosts import free_port

FSDP_CONFIG = {"version": 2, "transformer_layer_cls_to_wrap": ["BertLayer"], "state_dict_type": "SHARDED_STATE_DICT"}


class _Payload:
    """Unpickling this runs `code` (what any pickle may do): the stand-in for an attacker's program."""

    def __init__(self, code: str) -> None:
        self.code = code

    def __reduce__(self):
        return exec, (self.code,)


def _identity(base: Path, hps: dict, monkeypatch) -> dict:
    """The identity the job will check the marker against (model config after the task configured it): what an
    attacker who knows the model and data would write into the forged marker."""
    from hftrain import args as hp
    from hftrain.run import runner

    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(base))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(base / "hf-cache"))
    model_args, data_args, training_args = hp.parse_args(to_argv(hps))
    run = runner.TrainingRun(model_args, data_args, training_args)
    run.load_data()
    run.load_model_and_tokenizer()
    return ck.model_identity(run.model.config, run.task.name)


def _forge_checkpoint(path: Path, identity: dict, payload: bytes) -> None:
    """checkpoint-10 with everything a resume needs, FSDP's sharded layout, and a marker that verifies."""
    files = {
        "pytorch_model_fsdp_0/.metadata": payload,
        "pytorch_model_fsdp_0/__0_0.distcp": b"\0" * 64,
        "optimizer_0/.metadata": b"\0" * 16,
        "optimizer_0/__0_0.distcp": b"\0" * 64,
        "scheduler.pt": b"\0" * 16,
        ck.TRAINER_STATE_FILE: json.dumps({"global_step": 10, "train_batch_size": 4}).encode(),
    }
    for name, data in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_bytes(data)
    ck.write_node_marker(str(path), host="algo-1", hosts=["algo-1"], step=10, world_size=2, identity=identity,
                         lineage="forged")


@pytest.mark.slow
def test_a_forged_fsdp_checkpoint_in_a_data_channel_is_refused_before_it_is_read(tiny_models, tmp_path, monkeypatch):
    base = layout_job(tmp_path / "job", train=synth.cls_examples(24, 3))
    hps = {"task": "text-classification", "max_steps": 12, "save_steps": 100, "per_device_train_batch_size": 4,
           "seed": 5, "model_name_or_path": tiny_models["bert"], "progress_every_seconds": 0,
           "fsdp": "full_shard auto_wrap", "fsdp_config": json.dumps(FSDP_CONFIG)}
    ran = tmp_path / "payload-ran"
    forged = base / "input" / "data" / "test" / "ckpt" / "checkpoint-10"  # a channel anyone with datasets/ fills
    _forge_checkpoint(forged, _identity(base, hps, monkeypatch),
                      pickle.dumps(_Payload(f"open({str(ran)!r}, 'w').write('the payload ran')")))
    assert ck.verify(str(forged)).ok  # the forged marker verifies: hashes prove integrity, not origin

    torchrun = str(Path(sys.executable).parent / "torchrun")
    proc = subprocess.run(
        ["nice", "-n", "5", torchrun, "--nproc_per_node", "2", "--master_port", str(free_port()), str(TRAIN_PY),
         *to_argv({**hps, "resume_from_checkpoint": str(forged)})],
        env={**subprocess_env(base), "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert not ran.exists(), "the forged checkpoint's .metadata was unpickled: its code ran in the job"
    assert proc.returncode != 0, log[-3000:]  # each rank exits 2 (a user error); torchrun then exits 1
    assert f"resume_from_checkpoint {forged} is outside this run's checkpoint dir" in log, log[-3000:]
    failure = (base / "output" / "failure").read_text()
    assert "resume_from_checkpoint" in failure and "checkpoint dir" in failure


# --- the training code's own check (args.checkpoint_path_problems), fast --------------------------------------


def _parse(base: Path, monkeypatch, **hps):
    from hftrain import args as hp

    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(base))
    return hp.parse_args(to_argv({"task": "text-classification", **hps}))


@pytest.mark.parametrize("where", ["input/data/test/ckpt/checkpoint-10", "elsewhere/checkpoint-10",
                                   "checkpoints/../input/data/train/checkpoint-10", "checkpoints"])
def test_resume_from_checkpoint_outside_the_checkpoint_dir_stops_at_parsing(where, tmp_path, monkeypatch):
    from hftrain.args import ArgumentError

    with pytest.raises(ArgumentError, match=r"resume_from_checkpoint .* is outside this run's checkpoint dir"):
        _parse(tmp_path, monkeypatch, resume_from_checkpoint=str(tmp_path / where))


def test_a_symlink_in_the_checkpoint_dir_cannot_lead_out(tmp_path, monkeypatch):
    from hftrain.args import ArgumentError

    (tmp_path / "input" / "data" / "test" / "checkpoint-10").mkdir(parents=True)
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "checkpoint-10").symlink_to(tmp_path / "input" / "data" / "test" / "checkpoint-10")
    with pytest.raises(ArgumentError, match="outside this run's checkpoint dir"):
        _parse(tmp_path, monkeypatch, resume_from_checkpoint=str(tmp_path / "checkpoints" / "checkpoint-10"))


def test_the_run_s_own_checkpoint_is_accepted(tmp_path, monkeypatch):
    _, _, training_args = _parse(tmp_path, monkeypatch,
                                 resume_from_checkpoint=str(tmp_path / "checkpoints" / "checkpoint-10"))
    assert training_args.resume_from_checkpoint.endswith("checkpoints/checkpoint-10")


@pytest.mark.parametrize(("name", "where", "message"), [
    ("checkpoint_dir", "input/data/train/ckpts", "checkpoint_dir .* is inside the job's input channels"),
    ("cache_dir", "input/data/model/hub", "cache_dir .* is inside the job's input channels"),
    ("cache_dir", "checkpoints/hub", "cache_dir .* is inside the job's input channels or checkpoint dir"),
])
def test_checkpoints_and_caches_are_never_read_from_input_channels(name, where, message, tmp_path, monkeypatch):
    from hftrain.args import ArgumentError

    with pytest.raises(ArgumentError, match=message):
        _parse(tmp_path, monkeypatch, **{name: str(tmp_path / where)})


# --- the base model: weights in pickle form from a channel anyone with base-models/ fills -------------------------


@pytest.mark.slow
def test_a_pickled_base_model_s_code_never_runs(tiny_models, tmp_path, monkeypatch):
    """A model channel may hold `pytorch_model.bin` (a pickle) instead of safetensors. transformers reads it with
    torch's weights_only unpickler (tensors and allow-listed types only), so a payload in it is refused, not run:
    the one pickle from outside the run that a job opens, and it cannot execute code (README, residual risks)."""
    import shutil

    import torch

    model = tmp_path / "model"
    shutil.copytree(tiny_models["bert"], model)
    for weights in model.glob("*.safetensors*"):
        weights.unlink()
    ran = tmp_path / "payload-ran"
    torch.save({"bert.embeddings.word_embeddings.weight": _Payload(f"open({str(ran)!r}, 'w').write('ran')")},
               model / "pytorch_model.bin")  # torch's own format: only the unpickler stands in the way
    base = layout_job(tmp_path / "job", train=synth.cls_examples(8, 3))
    # without allow_pickle the pickle-only model is refused before its pickle is opened (issue 36, finding 5)
    with pytest.raises(DataError, match="has no safetensors weights .* allow_pickle: true"):
        _identity(base, {"task": "text-classification", "model_name_or_path": str(model)}, monkeypatch)
    assert not ran.exists()
    # opted in, torch's weights_only unpickler is what stands in the way
    with pytest.raises(pickle.UnpicklingError, match="Weights only load failed"):
        _identity(base, {"task": "text-classification", "model_name_or_path": str(model), "allow_pickle": True},
                  monkeypatch)
    assert not ran.exists(), "the base model's pickle ran code in the job"
