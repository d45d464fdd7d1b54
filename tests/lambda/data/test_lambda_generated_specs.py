"""`python -m local_mode data TASK DIR --family F` never writes a spec that fails later: it refuses what it cannot
make valid (a family whose models cannot do the task), naming the valid choices, and every spec it writes, for
every task and family, passes Prepare (its validation and data check, against moto) and trains (2 steps of the
real train.py on what it wrote)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from testkit.lambdas import SETTINGS
from testkit.training import to_argv

from hfsm_lambda import aws
from hfsm_lambda.runs.prepare import prepare_run
from local_mode import cli_runs, synthetic, task_registry

REPO = Path(__file__).resolve().parents[3]
COMBINATIONS = [(task, family) for task in task_registry.registry() for family in synthetic.MODEL_KINDS]


def test_a_family_that_cannot_do_the_task_is_refused_with_the_valid_choices() -> None:
    with pytest.raises(cli_runs.UsageError) as info:
        cli_runs.generator_choice("summarization", "bert")
    assert str(info.value) == (
        "--family bert cannot do summarization, the job would refuse it (a 'bert' model cannot do summarization "
        "here: it needs an encoder-decoder (sequence-to-sequence) model such as BART or T5); families for "
        "summarization: bart, t5")
    with pytest.raises(cli_runs.UsageError, match=r"unknown model family 'gpt2'; families for question-answering: "
                                                  r"bert, distilbert, roberta, bart, t5"):
        cli_runs.generator_choice("question-answering", "gpt2")
    for name, cls in task_registry.registry().items():  # each task's own default is one it can do
        assert cli_runs.generator_choice(name, None) == (cls, cls.local.model_family)


def test_the_command_refuses_before_writing_anything(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    done = subprocess.run([sys.executable, "-m", "local_mode", "--cdk-out", str(tmp_path / "no-cdk-out"), "data",
                           "summarization", str(tmp_path / "out"), "--family", "bert"], cwd=REPO, capture_output=True,
                          text=True, timeout=120, env=env)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "--family bert cannot do summarization" in done.stderr and "families for summarization: bart, t5" in \
        done.stderr
    assert not (tmp_path / "out").exists()


def _upload(folder: Path) -> None:
    """What `local_mode run --data DIR` uploads: the data and the model, at their keys under the data bucket."""
    s3 = aws.client("s3")
    for top in ("datasets", "base-models"):
        for path in sorted(p for p in (folder / top).rglob("*") if p.is_file()):
            s3.put_object(Bucket=SETTINGS["data_bucket"], Key=path.relative_to(folder).as_posix(),
                          Body=path.read_bytes())


def _train_two_steps(folder: Path, spec: dict, monkeypatch: pytest.MonkeyPatch) -> str:
    from hftrain.run import runner

    base = folder / "job"
    for channel in ("train", "validation"):
        shutil.copytree(folder / spec["data"][channel]["s3"], base / "input" / "data" / channel)
    model = folder / spec["model"].split("/", 3)[3]
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(base))
    monkeypatch.setenv("HF_DATASETS_CACHE", str(base / "hf-cache"))
    for var in list(os.environ):
        if var.startswith("SM_") or var in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
            monkeypatch.delenv(var, raising=False)
    hps = {**spec["hyperparameters"], "task": spec["task"], "model_name_or_path": str(model), "max_steps": 2,
           "save_steps": 100, "max_eval_samples": 8, "verdict_eval_samples": 4}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert runner.main(to_argv(hps)) == 0
    return out.getvalue()


@pytest.mark.slow
@pytest.mark.parametrize(("task", "family"), COMBINATIONS)
def test_every_spec_the_generator_writes_passes_prepare_and_trains(aws_account, settings, tmp_path, monkeypatch,
                                                                 task, family):
    try:
        task_cls, family = cli_runs.generator_choice(task, family)
    except cli_runs.UsageError as err:  # refused: names the valid choices instead of writing a spec
        assert f"families for {task}: " in str(err)
        assert family not in task_registry.families(task_registry.task_class(task), synthetic.MODEL_KINDS)
        return
    spec_path, _ = cli_runs.write_generated(task_cls, family, tmp_path, SETTINGS["data_bucket"], train_rows=48)
    spec = json.loads(spec_path.read_text())
    _upload(tmp_path)
    run = prepare_run(spec, settings, s3=aws.client("s3"))  # raises SpecError / PreflightError on a bad spec
    assert run.spec.task == task and run.data_skipped == ()
    assert "METRIC train_loss=" in _train_two_steps(tmp_path, spec, monkeypatch)
