"""Fault injection: one saved tiny run (checkpoints at steps 4, 8, 12 and the final model), copied per fault;
the copy loses checkpoint-12 and the model (an interruption at step 10), gets one fault, and training resumes
in-process to step 12. Each test checks the resume point, the message, the files left on disk (what the S3
sync mirrors) and the final weights against the uninterrupted run."""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import logging
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from safetensors.torch import load_file, save_file
from testkit.training import layout_job, to_argv

from contract import run_history
from hftrain.checkpoint import manager as ck
from local_mode import synthetic as synth

pytestmark = pytest.mark.slow

HPS = {"task": "text-classification", "max_steps": 12, "save_steps": 4, "logging_steps": 1,
       "per_device_train_batch_size": 4, "learning_rate": 1e-3, "seed": 11, "warmup_steps": 2,
       "progress_every_seconds": 0, "save_total_limit": 100}  # every checkpoint kept: the faults fall back to them


def train(base: Path, hps: dict) -> tuple[int, str]:
    """train.py's main() in this process against `base`; returns (exit code, log text)."""
    from hftrain.run import runner

    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
    loggers = [logging.getLogger("hftrain")]  # its children (hftrain.run.callbacks, ...) propagate to it
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SAGEMAKER_BASE_DIR", str(base))
        mp.setenv("HF_DATASETS_CACHE", str(base / "hf-cache"))
        for var in list(os.environ):
            if var.startswith("SM_") or var in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE",
                                                "TRAINING_JOB_NAME"):
                mp.delenv(var, raising=False)
        for lg in loggers:
            lg.addHandler(handler)
        err = io.StringIO()
        try:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
                code = runner.main(to_argv(hps))
        finally:
            for lg in loggers:
                lg.removeHandler(handler)
    return code, stream.getvalue() + err.getvalue()


@pytest.fixture(scope="module")
def saved_run(tiny_models, tmp_path_factory):
    base = layout_job(tmp_path_factory.mktemp("saved-run"), train=synth.cls_examples(40, 3))
    hps = {**HPS, "model_name_or_path": tiny_models["bert"]}
    code, log = train(base, hps)
    assert code == 0, log[-3000:]
    assert sorted(p.name for p in (base / "checkpoints").glob("checkpoint-*")) == [
        "checkpoint-12", "checkpoint-4", "checkpoint-8"]
    return base, hps, load_file(base / "model" / "model.safetensors")


def test_a_run_that_sets_no_save_total_limit_keeps_the_newest_two_checkpoints(tiny_models, tmp_path):
    """Every checkpoint left in the checkpoint dir is downloaded to every instance by every restart (SageMaker copies
    the whole prefix): unset, save_total_limit keeps 2 (the Trainer's default keeps all), and says so."""
    base = layout_job(tmp_path, train=synth.cls_examples(40, 3))
    hps = {k: v for k, v in HPS.items() if k != "save_total_limit"}
    code, log = train(base, {**hps, "model_name_or_path": tiny_models["bert"]})
    assert code == 0, log[-3000:]
    assert sorted(p.name for p in (base / "checkpoints").glob("checkpoint-*")) == ["checkpoint-12", "checkpoint-8"]
    assert "deleting" in log and "checkpoint-4 (rotation: save_total_limit=2 keeps" in log


def interrupted_copy(saved_run, tmp_path: Path, *, reached: int = 10) -> Path:
    """The saved run as it was when interrupted at step `reached`: no checkpoint-12, no model yet."""
    source, _, _ = saved_run
    base = tmp_path / "job"
    shutil.copytree(source, base)
    shutil.rmtree(base / "checkpoints" / "checkpoint-12")
    shutil.rmtree(base / "model")
    (base / "model").mkdir()
    shutil.rmtree(base / "output")
    progress = json.loads((base / "checkpoints" / run_history.PROGRESS_FILE).read_text())
    now = time.time()
    progress.update(step=reached, at=now - 60, started_step=0, started_at=now - 60 - reached * 3.0,
                    finished=False, job="job-attempt-1")
    (base / "checkpoints" / run_history.PROGRESS_FILE).write_text(json.dumps(progress))
    return base


def ckpt(base: Path, step: int) -> Path:
    return base / "checkpoints" / f"checkpoint-{step}"


def remark(directory: Path, **changes) -> None:
    """Rewrite the marker from the files as they are now (a consistent marker over the fault)."""
    marker = json.loads((directory / "_complete.algo-1.json").read_text())
    identity = {"task": marker["task"], "model_fingerprint": marker["model_fingerprint"], "model": marker["model"]}
    identity.update(changes)
    (directory / "_complete.algo-1.json").unlink()
    ck.write_node_marker(str(directory), host="algo-1", hosts=["algo-1"], step=marker["step"], world_size=1,
                         identity=identity, lineage=marker["lineage"])


def tree_digest(directory: Path) -> dict[str, str]:
    """Every file's digest, less the stall watchdog's `_heartbeat.json` (liveness, written from the first second
    of every run so that the outside watch sees its start-up; not checkpoint content)."""
    return {p.relative_to(directory).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.rglob("*")) if p.is_file() and p.name != "_heartbeat.json"}


def dirs(base: Path) -> list[str]:
    """The checkpoint dir's directories, less the training code's own (`_tokenized/`, the tokenized data set)."""
    return sorted(p.name for p in (base / "checkpoints").iterdir() if p.is_dir() and not p.name.startswith("_"))


def assert_same_weights(base: Path, reference: dict) -> None:
    final = load_file(base / "model" / "model.safetensors")
    assert final.keys() == reference.keys()
    worst = max(float((final[k] - reference[k]).abs().max()) for k in final)
    assert worst < 1e-5, f"final weights differ from the uninterrupted run by {worst}"


def history(base: Path) -> dict:
    return json.loads((base / "checkpoints" / run_history.HISTORY_FILE).read_text())


def resumed_from(base: Path, step: int | None, log: str) -> None:
    last = history(base)["starts"][-1]
    assert last["resumed_from_step"] == step, (last, log[-3000:])
    if step is not None:
        assert f"resuming from {ckpt(base, step)} " in log


# --- the table's rows ------------------------------------------------------------------------------------


def test_newest_without_marker_falls_back_and_is_kept(saved_run, tmp_path):
    base = interrupted_copy(saved_run, tmp_path)
    (ckpt(base, 8) / "_complete.algo-1.json").unlink()
    before = tree_digest(ckpt(base, 8))
    code, log = train(base, saved_run[1])
    assert code == 0, log[-3000:]
    resumed_from(base, 4, log)
    assert "checkpoint-8 rejected (incomplete): no completion marker" in log
    # step 8 is saved again: the old directory is moved aside with every file, not deleted
    assert dirs(base) == ["checkpoint-12", "checkpoint-4", "checkpoint-8", "checkpoint-8.unverified-1"]
    assert tree_digest(ckpt(base, 8).with_name("checkpoint-8.unverified-1")) == before
    assert "moved" in log and "checkpoint-8.unverified-1" in log
    assert_same_weights(base, saved_run[2])


def test_truncated_weights_fall_back(saved_run, tmp_path):
    base = interrupted_copy(saved_run, tmp_path)
    weights = ckpt(base, 8) / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:1000])
    code, log = train(base, saved_run[1])
    assert code == 0, log[-3000:]
    resumed_from(base, 4, log)
    assert "model.safetensors has 1000 bytes" in log
    assert "checkpoint-8.unverified-1" in dirs(base)
    assert_same_weights(base, saved_run[2])


def test_same_size_corruption_is_caught_by_the_content_hash(saved_run, tmp_path):
    base = interrupted_copy(saved_run, tmp_path)
    weights = ckpt(base, 8) / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-4096:-2048] = bytes(2048)  # tensor bytes zeroed, same size, header intact
    weights.write_bytes(bytes(data))
    code, log = train(base, saved_run[1])
    assert code == 0, log[-3000:]
    resumed_from(base, 4, log)
    assert "model.safetensors does not match its content hash" in log
    assert_same_weights(base, saved_run[2])


@pytest.mark.parametrize("marker", ["stale", "consistent"])
def test_corrupt_safetensors_header_falls_back_instead_of_crashing(saved_run, tmp_path, marker):
    base = interrupted_copy(saved_run, tmp_path)
    weights = ckpt(base, 8) / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[8:40] = b"{" * 32  # the JSON header
    weights.write_bytes(bytes(data))
    if marker == "consistent":  # hashes over the broken file: the header probe still refuses it
        remark(ckpt(base, 8))
    code, log = train(base, saved_run[1])
    assert code == 0, log[-3000:]
    resumed_from(base, 4, log)
    assert ("cannot read the weights' header" if marker == "consistent" else "does not match its content hash") in log
    assert_same_weights(base, saved_run[2])


@pytest.mark.parametrize("other", ["roberta", "bert-small"])
def test_checkpoint_of_another_model_is_refused_before_training(saved_run, tmp_path, tiny_models, other):
    """Another architecture (other parameter names) or the same names with other widths."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    base = interrupted_copy(saved_run, tmp_path)
    config = AutoConfig.from_pretrained(tiny_models[other], num_labels=3)
    foreign = AutoModelForSequenceClassification.from_config(config)
    target = ckpt(base, 8)
    save_file({k: v.contiguous() for k, v in foreign.state_dict().items()}, target / "model.safetensors")
    config.save_pretrained(target)
    (target / "_complete.algo-1.json").unlink()
    ck.write_node_marker(str(target), host="algo-1", hosts=["algo-1"], step=8, world_size=1,
                         identity=ck.model_identity(config, "text-classification"), lineage="other-run")
    before = tree_digest(base / "checkpoints")
    code, log = train(base, saved_run[1])
    assert code == 2, log[-3000:]
    assert "ERROR: the checkpoint dir" in log and "checkpoint-8 was saved for task text-classification" in log
    saved = "model_type=roberta hidden_size=64" if other == "roberta" else "model_type=bert hidden_size=128"
    assert saved in log and "this run trains task text-classification, BertModel (model_type=bert hidden_size=64" in log
    assert tree_digest(base / "checkpoints") == before, "nothing may be written or deleted"
    assert not (base / "model" / "model.safetensors").exists()


def test_other_widths_under_a_matching_identity_are_rejected_by_the_probe(saved_run, tmp_path, tiny_models):
    """A writer bug: the marker says this model, the weights say another width. No crash: the next older."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    base = interrupted_copy(saved_run, tmp_path)
    wide = AutoModelForSequenceClassification.from_config(
        AutoConfig.from_pretrained(tiny_models["bert-small"], num_labels=3))
    save_file({k: v.contiguous() for k, v in wide.state_dict().items()}, ckpt(base, 8) / "model.safetensors")
    remark(ckpt(base, 8))
    code, log = train(base, saved_run[1])
    assert code == 0, log[-3000:]
    resumed_from(base, 4, log)
    assert "weight(s) with other shapes" in log
    assert_same_weights(base, saved_run[2])


def test_user_files_are_never_deleted_and_rotation_touches_only_this_run(saved_run, tmp_path):
    base = interrupted_copy(saved_run, tmp_path)
    for name in ("checkpoint-3", "checkpoint-100", "notes"):
        (base / "checkpoints" / name).mkdir()
        (base / "checkpoints" / name / "mine.txt").write_text(f"user data in {name}")
    code, log = train(base, {**saved_run[1], "save_total_limit": 1})
    assert code == 0, log[-3000:]
    resumed_from(base, 8, log)
    # rotation kept the newest (12) and the resumed one (8), deleted this run's 4, logged it, nothing else
    assert dirs(base) == ["checkpoint-100", "checkpoint-12", "checkpoint-3", "checkpoint-8", "notes"]
    assert f"deleting {ckpt(base, 4)} (rotation" in log
    for name in ("checkpoint-3", "checkpoint-100", "notes"):
        assert (base / "checkpoints" / name / "mine.txt").read_text() == f"user data in {name}"
    assert log.count("deleting ") == 1
    assert_same_weights(base, saved_run[2])


def test_missing_scheduler_and_no_older_checkpoint_is_an_explicit_fresh_start(saved_run, tmp_path):
    base = interrupted_copy(saved_run, tmp_path)
    shutil.rmtree(ckpt(base, 4))
    (ckpt(base, 8) / "scheduler.pt").unlink()
    before = tree_digest(ckpt(base, 8))
    code, log = train(base, saved_run[1])
    assert code == 0, log[-3000:]
    resumed_from(base, None, log)
    assert "DECISION: start from scratch: 1 checkpoint(s) exist but none verifies" in log
    assert "scheduler.pt listed by algo-1 is missing" in log and "They are kept" in log
    assert tree_digest(ckpt(base, 8).with_name("checkpoint-8.unverified-1")) == before
    assert_same_weights(base, saved_run[2])  # from scratch with the same seed: the same 12 steps


def test_missing_optimizer_under_a_consistent_marker_is_not_resumed_silently(saved_run, tmp_path):
    base = interrupted_copy(saved_run, tmp_path)
    (ckpt(base, 8) / "optimizer.pt").unlink()
    remark(ckpt(base, 8))
    code, log = train(base, saved_run[1])
    assert code == 0, log[-3000:]
    resumed_from(base, 4, log)
    assert "checkpoint-8 rejected (unusable): no optimizer state" in log
    assert_same_weights(base, saved_run[2])


def test_load_error_inside_the_trainer_falls_back_to_the_next_older(saved_run, tmp_path):
    """Verified bytes that still fail to load (here an optimizer state of another shape): no crash."""
    import torch

    base = interrupted_copy(saved_run, tmp_path)
    torch.save({"state": {}, "param_groups": []}, ckpt(base, 8) / "optimizer.pt")
    remark(ckpt(base, 8))
    code, log = train(base, saved_run[1])
    assert code == 0, log[-3000:]
    assert "loading failed: optimizer/scheduler" in log
    starts = history(base)["starts"]
    assert [s["resumed_from_step"] for s in starts[-2:]] == [8, 4]
    assert_same_weights(base, saved_run[2])


# --- the other points --------------------------------------------------------------------------------------


def test_interruption_reports_step_reached_resume_point_and_minutes_lost(saved_run, tmp_path):
    base = interrupted_copy(saved_run, tmp_path, reached=10)
    code, log = train(base, saved_run[1])
    assert code == 0, log[-3000:]
    (record,) = history(base)["interruptions"]
    assert record["job"] == "job-attempt-1" and record["step_reached"] == 10 and record["resumed_from_step"] == 8
    assert record["lost_steps"] == 2 and record["lost_minutes"] == pytest.approx(2 * 3.0 / 60, abs=1e-3)
    assert "interruption: job job-attempt-1 reached step 10, resumed from step 8: 2 step(s) lost" in log
    progress = json.loads((base / "checkpoints" / run_history.PROGRESS_FILE).read_text())
    assert progress["finished"] and progress["step"] == 12
    assert_same_weights(base, saved_run[2])


def test_explicit_resume_from_an_unverified_checkpoint_stops_with_the_reason(saved_run, tmp_path):
    base = interrupted_copy(saved_run, tmp_path)
    (ckpt(base, 8) / "scheduler.pt").unlink()
    code, log = train(base, {**saved_run[1], "resume_from_checkpoint": str(ckpt(base, 8))})
    assert code == 2 and "cannot be resumed: file scheduler.pt listed by algo-1 is missing" in log


def test_every_minutes_saves_by_time_when_steps_are_far_apart(saved_run, tmp_path):
    base = interrupted_copy(saved_run, tmp_path)
    shutil.rmtree(base / "checkpoints")
    code, log = train(base, {**saved_run[1], "max_steps": 4, "save_steps": 1000, "save_every_minutes": 1e-6})
    assert code == 0, log[-3000:]
    assert dirs(base) == ["checkpoint-1", "checkpoint-2", "checkpoint-3", "checkpoint-4"]
    assert "minutes since the last one (save_every_minutes)" in log
    assert all(ck.verify(str(ckpt(base, s))).ok for s in (1, 2, 3, 4))


# --- issue 24 / issue 23: a resume loads only what the markers vouch for; a full volume says so ----------------
# An audit hook (Python's "open" event: builtins.open, io.open, torch.load's own open) records every file opened
# under the job while `OPENED` is a list: what the Trainer and the verification really read.
OPENED: list[str] | None = None


def _record_opens(event: str, args: tuple) -> None:
    if event == "open" and OPENED is not None and isinstance(args[0], str | bytes | os.PathLike):
        OPENED.append(os.fsdecode(args[0]))


sys.addaudithook(_record_opens)


@contextlib.contextmanager
def opened_files():
    global OPENED
    OPENED = []
    try:
        yield OPENED
    finally:
        OPENED = None


class Payload:
    """A pickle that, when an unrestricted unpickler loads it, creates `flag` (harmless, and visible)."""

    def __init__(self, flag: Path) -> None:
        self.flag = str(flag)

    def __reduce__(self):
        return (os.makedirs, (self.flag,))


def test_files_the_marker_does_not_list_are_named_and_never_opened(saved_run, tmp_path):
    """checkpoint-8's marker lists no RNG file (as when another world size saved it); an rng_state.pth put there
    later, which the Trainer reads on a single-process resume, is left alone and never opened."""
    base = interrupted_copy(saved_run, tmp_path)
    (ckpt(base, 8) / "rng_state.pth").unlink()
    remark(ckpt(base, 8))
    planted = ckpt(base, 8) / "rng_state.pth"
    planted.write_bytes(pickle.dumps(Payload(tmp_path / "payload-ran")))
    with opened_files() as opened:
        code, log = train(base, saved_run[1])
    assert code == 0, log[-3000:]
    resumed_from(base, 8, log)
    inside = sorted({p for p in opened if p.startswith(str(ckpt(base, 8)) + os.sep)})
    assert str(planted) not in inside, f"the unlisted {planted.name} was opened: {inside}"
    assert "1 file(s) its completion markers do not list are not loaded and are left as they are: rng_state.pth" \
        in log
    assert planted.read_bytes() == pickle.dumps(Payload(tmp_path / "payload-ran"))  # left alone
    assert not (tmp_path / "payload-ran").exists()
    assert not (base / ".hftrain-verified" / "checkpoints" / "checkpoint-8").exists(), "the staged copy is removed"


def test_a_pickled_file_swapped_after_verification_is_not_what_the_trainer_loads(saved_run, tmp_path, monkeypatch):
    """Issue 23: the hashes are verified before anything pickled is opened, on the very files then loaded. Here
    optimizer.pt is swapped (a new file under the same name) after the resume decision and before the Trainer
    loads: the Trainer still loads the verified bytes, never the swapped file."""
    from hftrain.run import runner

    base = interrupted_copy(saved_run, tmp_path)
    swapped = ckpt(base, 8) / "optimizer.pt"
    decide = runner.decide_resume
    swaps = []

    def decide_then_swap(*args, **kwargs):
        planned = decide(*args, **kwargs)
        swaps.append(swapped)
        replacement = swapped.with_name("optimizer.pt.new")
        replacement.write_bytes(pickle.dumps(Payload(tmp_path / "payload-ran")))
        os.replace(replacement, swapped)
        return planned

    monkeypatch.setattr(runner, "decide_resume", decide_then_swap)
    with opened_files() as opened:
        code, log = train(base, saved_run[1])
    assert code == 0, log[-3000:]
    assert swaps == [swapped], "the resume decision ran without the swap"
    assert str(swapped) not in opened, "the swapped optimizer.pt was opened"
    assert "loading failed" not in log
    assert [s["resumed_from_step"] for s in history(base)["starts"][-1:]] == [8]
    assert not (tmp_path / "payload-ran").exists()
    assert_same_weights(base, saved_run[2])


def test_a_full_volume_at_save_names_the_volume_and_the_setting(saved_run, tmp_path, monkeypatch):
    """ENOSPC inside torch's writer (its message: `unexpected pos ...`, no errno), the volume nearly full: the
    failure reason says the volume is full, how much the save needed and which spec field sizes the volume."""
    import torch

    base = interrupted_copy(saved_run, tmp_path)
    real_save = torch.save

    def full_disk_save(obj, f, *args, **kwargs):
        if str(f).endswith("optimizer.pt"):
            raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 704 vs 598")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", full_disk_save)
    gib = 1024**3
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(8 * gib, 8 * gib - 4096, 4096))
    code, log = train(base, saved_run[1])
    assert code == 2, log[-3000:]
    failure = (base / "output" / "failure").read_text()
    assert failure.startswith("the instance's volume is full: saving checkpoint-12 needs about "), failure
    assert "Raise compute.volume_size_gb in the run spec (the volume is 8 GB" in failure
    assert "unexpected pos" not in failure
    assert not (ckpt(base, 12) / "_complete.algo-1.json").exists()


def _can_mount_tmpfs() -> bool:
    probe = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c",
                            "mount -t tmpfs -o size=64k tmpfs /mnt"], capture_output=True)
    return probe.returncode == 0


@pytest.mark.skipif(shutil.which("unshare") is None or not _can_mount_tmpfs(),
                    reason="needs unprivileged user and mount namespaces (unshare -rm) for a small tmpfs")
def test_a_really_full_volume_at_save(tiny_models, tmp_path):
    """The real thing: train.py with its checkpoint dir on a tmpfs that holds the weights but not the optimizer
    state (a mount namespace of its own: no root needed where unprivileged namespaces are allowed)."""
    from testkit.training import TRAIN_PY, subprocess_env

    base = layout_job(tmp_path / "job", train=synth.cls_examples(16, 3))
    (base / "checkpoints").mkdir()
    size_kb = (Path(tiny_models["bert"]) / "model.safetensors").stat().st_size // 1024 + 64
    hps = {**HPS, "model_name_or_path": tiny_models["bert"], "max_steps": 2, "save_steps": 1}
    script = (f'mount -t tmpfs -o size={size_kb}k tmpfs "$0/checkpoints" && exec "$1" "$2" "${{@:3}}"')
    proc = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "bash", "-c", script, str(base),
                           sys.executable, str(TRAIN_PY), *to_argv(hps)],
                          env={**subprocess_env(base), "OMP_NUM_THREADS": "1"}, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 2, (proc.stdout + proc.stderr)[-3000:]
    failure = (base / "output" / "failure").read_text()
    assert failure.startswith("the instance's volume is full: saving checkpoint-1 needs about "), failure
    assert "free of" in failure and "Raise compute.volume_size_gb" in failure, failure
