"""Full-shard FSDP (FSDP2) through the Trainer with 2 ranks on CPU (gloo): it shards, checkpoints, resumes
after a kill, and writes one consolidated model that from_pretrained loads, with the weights DDP gets."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from safetensors.torch import load_file
from testkit.training import TRAIN_PY, finish, layout_job, subprocess_env, to_argv, wait_for

from local_mode import synthetic as synth
from local_mode.sagemaker.training_hosts import free_port

FSDP = {"fsdp": "full_shard auto_wrap",
        "fsdp_config": json.dumps({"version": 2, "transformer_layer_cls_to_wrap": ["BertLayer"]})}
HPS = {"task": "text-classification", "max_steps": 60, "save_steps": 4, "logging_steps": 1, "save_total_limit": 100,
       "per_device_train_batch_size": 4, "learning_rate": 1e-3, "seed": 5, "warmup_steps": 1}


def _torchrun(base: Path, hps: dict) -> subprocess.Popen:
    torchrun = str(Path(sys.executable).parent / "torchrun")
    return subprocess.Popen(
        ["nice", "-n", "5", torchrun, "--nproc_per_node", "2", "--master_port", str(free_port()), str(TRAIN_PY),
         *to_argv(hps)],
        env={**subprocess_env(base), "OMP_NUM_THREADS": "1"}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, bufsize=1,
    )


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL torchrun and its workers (which run in sessions of their own), as a lost instance ends."""
    import psutil

    workers = psutil.Process(proc.pid).children(recursive=True)
    for process in [psutil.Process(proc.pid), *workers]:
        process.kill()
    psutil.wait_procs(workers, timeout=30)
    proc.wait()


def _run(base: Path, hps: dict) -> str:
    proc = _torchrun(base, hps)
    out = finish(proc)
    assert proc.returncode == 0, out[-4000:]
    return out


def _worst_difference(a: Path, b: Path) -> float:
    x, y = load_file(a / "model" / "model.safetensors"), load_file(b / "model" / "model.safetensors")
    assert x.keys() == y.keys()
    return max(float((x[k] - y[k]).abs().max()) for k in x)


@pytest.mark.slow
def test_fsdp2_on_cpu_shards_resumes_and_writes_a_loadable_model(tiny_models, tmp_path):
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    rows, valid = synth.cls_examples(48, 3), synth.cls_examples(8, 4)  # validation: a final evaluation, then the save
    hps = {**HPS, **FSDP, "model_name_or_path": tiny_models["bert"]}

    straight = layout_job(tmp_path / "fsdp", train=rows, validation=valid)
    out = _run(straight, hps)
    assert "FSDP2 on CPU: 2 ranks" in out, out[-3000:]
    shards = straight / "checkpoints" / "checkpoint-4" / "pytorch_model_fsdp_0"
    names = {p.name for p in shards.iterdir()}
    assert {"__0_0.distcp", "__1_0.distcp", ".metadata"} <= names, names  # one shard per rank
    assert (straight / "checkpoints" / "checkpoint-4" / "optimizer_0").is_dir()
    assert not (straight / "checkpoints" / "checkpoint-4" / "model.safetensors").exists()  # sharded, not full

    model = AutoModelForSequenceClassification.from_pretrained(straight / "model")
    tokenizer = AutoTokenizer.from_pretrained(straight / "model")
    assert model(**tokenizer(["a short text"], return_tensors="pt")).logits.shape == (1, 3)

    # the same run under DDP: full sharding changes where the weights live, not what training computes
    ddp = layout_job(tmp_path / "ddp", train=rows, validation=valid)
    _run(ddp, {**HPS, "model_name_or_path": tiny_models["bert"]})
    assert _worst_difference(straight, ddp) < 1e-4

    # killed mid-run (a few steps after the first checkpoint), restarted: resumes from the shards, same weights
    killed = layout_job(tmp_path / "killed", train=rows, validation=valid)
    proc = _torchrun(killed, hps)
    wait_for(proc, "checkpoint-4 complete")
    _kill_tree(proc)
    assert not (killed / "model" / "model.safetensors").exists()
    out = _run(killed, hps)
    resumed = re.search(r"resuming from \S+/checkpoint-(\d+)", out)
    assert resumed and 4 <= int(resumed[1]) < 60, out[-3000:]
    assert _worst_difference(straight, killed) < 1e-5

    # restarted after the last checkpoint: no step trained, the model is rebuilt from the shards
    (killed / "model" / "model.safetensors").unlink()
    out = _run(killed, hps)
    assert "training finished at" in out, out[-3000:]
    assert _worst_difference(straight, killed) < 1e-5


@pytest.mark.slow
def test_fsdp2_on_cpu_trains_tied_embeddings_and_saves_after_evaluation(tiny_models, tmp_path):
    """BART ties one weight across four modules (model.shared, encoder/decoder embed_tokens, lm_head): they are
    sharded as one group (accelerate alone split them and torch stopped at the first forward). The final
    evaluation leaves FSDP2's root unsharded; the consolidated model is still written, equal to DDP's."""
    from transformers import AutoModelForSeq2SeqLM

    rows, valid = synth.summ_examples(32, 1), synth.summ_examples(8, 2)
    hps = {"task": "summarization", "model_name_or_path": tiny_models["bart"], "max_steps": 4, "save_steps": 100,
           "logging_steps": 1, "per_device_train_batch_size": 4, "learning_rate": 1e-3, "seed": 5,
           "val_max_target_length": 8, "generation_num_beams": 1}
    fsdp = {"fsdp": "full_shard auto_wrap",
            "fsdp_config": json.dumps({"version": 2,
                                       "transformer_layer_cls_to_wrap": ["BartEncoderLayer", "BartDecoderLayer"]})}
    sharded = layout_job(tmp_path / "fsdp", train=rows, validation=valid)
    out = _run(sharded, {**hps, **fsdp})
    assert "FSDP2 on CPU: 2 ranks" in out, out[-3000:]
    assert ("tied parameters sharded as one group each: model.shared, model.encoder.embed_tokens, "
            "model.decoder.embed_tokens, lm_head") in out, out[-3000:]
    ddp = layout_job(tmp_path / "ddp", train=rows, validation=valid)
    _run(ddp, hps)
    assert _worst_difference(sharded, ddp) < 1e-4
    fsdp_eval = json.loads((sharded / "output" / "data" / "metrics.json").read_text())["eval_loss"]
    ddp_eval = json.loads((ddp / "output" / "data" / "metrics.json").read_text())["eval_loss"]
    assert fsdp_eval == pytest.approx(ddp_eval, rel=1e-4)
    model = AutoModelForSeq2SeqLM.from_pretrained(sharded / "model")
    assert model.lm_head.weight.data_ptr() == model.model.shared.weight.data_ptr()  # still tied after loading


def test_fsdp1_on_cpu_is_refused_with_a_clear_message():
    from hftrain.args import ArgumentError
    from hftrain.parallel import fsdp

    class Args:
        fsdp = ["full_shard", "auto_wrap"]
        fsdp_config = {"version": 1}
        world_size = 2

        class device:  # noqa: N801 - mimics torch.device
            type = "cpu"

    with pytest.raises(ArgumentError, match="version 1.*cannot run on CPU.*\"version\": 2"):
        fsdp.check_cpu_support(Args)
    Args.fsdp_config = {"version": 2}
    fsdp.check_cpu_support(Args)  # FSDP2 is fine
