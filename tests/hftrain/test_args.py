"""Hyperparameters: the schema file, parsing as the toolkit passes them, and validation."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from hftrain import args as hp


def test_hyperparameters_json_matches_the_dataclasses():
    on_disk = json.loads(hp.SCHEMA_FILE.read_text())
    assert on_disk == hp.hyperparameter_schema(), "run: cd training_code && python -m hftrain.args --write"
    for name in ("task", "model_name_or_path", "save_steps", "fsdp", "fsdp_config", "ddp_backend", "checkpoint_dir"):
        assert name in on_disk
    assert on_disk["task"]["choices"] == list(hp.TASKS)
    assert "smddp" in on_disk["ddp_backend"]["choices"]
    assert on_disk["fsdp_config"]["type"] == "object"
    assert on_disk["resume"]["type"] == "boolean"
    for name, entry in on_disk.items():
        assert set(entry) <= {"type", "help", "choices", "default", "keys"} | ({"metrics", "columns", "verdict"} if name == "task" else set()) \
            | ({"extensions"} if name == "data_format" else set())
        assert entry["type"]


def test_the_task_registry_is_the_schema_s_task_list_and_metric_names():
    """Every task module's Task is registered; the schema (what the Lambdas read) lists exactly those tasks, in the
    registry's order, with the metric names each declares."""
    from hftrain import tasks
    from hftrain.tasks import REGISTRY
    from hftrain.tasks.classification import TextClassification
    from hftrain.tasks.qa import QuestionAnswering
    from hftrain.tasks.summarization import Summarization

    known = {"question-answering": QuestionAnswering, "text-classification": TextClassification,
             "summarization": Summarization}
    assert list(REGISTRY)[:3] == list(known) and known.items() <= REGISTRY.items()
    modules = {p.stem for p in Path(tasks.__file__).parent.glob("*.py")} - {"__init__", "base"}
    assert {cls.__module__.rsplit(".", 1)[1] for cls in REGISTRY.values()} == modules  # one task a module
    task = json.loads(hp.SCHEMA_FILE.read_text())["task"]
    assert task["choices"] == list(REGISTRY)
    assert task["metrics"] == {name: list(cls.metric_names()) for name, cls in REGISTRY.items()}
    assert task["metrics"]["text-classification"] == [
        "eval_accuracy", "eval_macro_f1", "eval_baseline_accuracy", "eval_baseline_macro_f1"]
    for cls in REGISTRY.values():  # each task's own hyperparameters are DataArguments fields
        assert {f.name for f in dataclasses.fields(cls.arguments)} <= {f.name for f in dataclasses.fields(
            hp.DataArguments)}


def test_toolkit_style_arguments(tmp_path, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    m, d, t = hp.parse_args([
        "--task", "summarization", "--model_name_or_path", "facebook/bart-base", "--save_steps", "25",
        "--pad_to_max_length", "False", "--resume", "True", "--fsdp", "full_shard auto_wrap",
        "--fsdp_config", '{"min_num_params": 1000}', "--lr_scheduler_kwargs", "power=2.0,lr_end=0.0",
    ])
    assert d.task == "summarization" and m.model_name_or_path == "facebook/bart-base"
    assert t.checkpoint_dir == str(tmp_path / "checkpoints") == t.output_dir
    assert t.save_steps == 25 and t.resume is True and d.pad_to_max_length is False
    assert t.fsdp_config["min_num_params"] == 1000
    assert t.lr_scheduler_kwargs == {"power": 2.0, "lr_end": 0.0}
    assert d.val_max_target_length == d.max_target_length


def test_hardware_defaults_on_cpu(tmp_path, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    _, _, t = hp.parse_args(["--task", "text-classification"])
    assert not t.bf16 and not t.fp16  # no GPU here: fp32
    assert t.dataloader_num_workers == 0 and t.dataloader_pin_memory is False
    assert t.use_cpu is True
    assert t.ddp_find_unused_parameters is False


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        ([], "task is required"),
        (["--task", "qa"], "invalid choice"),
        (["--task", "summarization", "--learning_rat", "1e-4"], "unknown hyperparameter(s): learning_rat"),
        (["--task", "summarization", "--output_dir", "/x"], "output_dir is managed"),
        (["--task", "question-answering", "--max_seq_length", "64", "--doc_stride", "64"], "doc_stride"),
        (["--task", "summarization", "--ddp_backend", "smddp"], "smdistributed"),
        (["--task", "summarization", "--save_steps", "0"], "save_steps"),
        (["--task", "summarization", "--precision", "fp8"], "invalid choice"),
        (["--task", "question-answering", "--padding_free", "maybe"], "invalid choice"),
    ],
)
def test_bad_hyperparameters_are_named(argv, message, tmp_path, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    with pytest.raises(hp.ArgumentError, match=message.replace("(", r"\(").replace(")", r"\)")):
        hp.parse_args(argv)


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--save_on_each_node", "true"], "save_on_each_node would make every node write"),
        (["--eval_strategy", "steps"], "needs validation data"),
        (["--doc_stride", "400"], r"doc_stride \(400\) must be smaller than max_seq_length \(unset; 384 when unset\)"),
        (["--per_device_train_batch_size", "0"], "per_device_train_batch_size must be >= 1"),
        (["--seed", "-1"], "seed must be >= 0"),
        (["--deepspeed", "{}"], "deepspeed cannot be set as a hyperparameter"),
    ],
)
def test_rules_from_hp_rules_stop_the_script(argv, message, tmp_path, monkeypatch):
    """hp_rules (owner hftrain) and its bounds are what parse_args enforces (the Lambda checks the same data)."""
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    with pytest.raises(hp.ArgumentError, match=message):
        hp.parse_args(["--task", "question-answering", *argv])


def test_evaluation_with_validation_data_passes(tmp_path, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    (tmp_path / "input" / "data" / "validation").mkdir(parents=True)  # the channel, as SageMaker lays it out
    _, _, t = hp.parse_args(["--task", "question-answering", "--eval_strategy", "steps"])
    assert t.eval_strategy == "steps"
    _, _, t = hp.parse_args(["--task", "question-answering", "--eval_strategy", "epoch"],
                            environ={"SAGEMAKER_BASE_DIR": str(tmp_path / "none"), "SM_CHANNEL_VALIDATION": "/v"})
    assert t.eval_strategy == "epoch"


def test_speed_defaults_and_their_opt_outs(tmp_path, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    _, _, t = hp.parse_args(["--task", "question-answering", "--per_device_train_batch_size", "16"])
    assert t.train_sampling_strategy == "auto"  # length-aware batches where they pay (batching.training_lengths)
    assert t.per_device_eval_batch_size == 32  # twice the training batch
    assert t.padding_free == "auto"
    _, _, t = hp.parse_args(["--task", "question-answering", "--per_device_train_batch_size", "2"])
    assert t.per_device_eval_batch_size == 8  # at least 8
    _, _, t = hp.parse_args(["--task", "question-answering", "--train_sampling_strategy", "random",
                             "--per_device_eval_batch_size", "4", "--padding_free", "false"])
    assert (t.train_sampling_strategy, t.per_device_eval_batch_size, t.padding_free) == ("random", 4, "false")


def test_the_automatic_eval_batch_stays_within_its_bound():
    """A training batch Prepare accepts (up to 2**31 - 1) never makes the automatic eval batch (twice it) one the
    script refuses (found by the hyperparameter-equivalence property test: 2**30 gave 2**31)."""
    from hftrain import args as hp

    _, _, training_args = hp.parse_args(["--task", "text-classification", "--model_name_or_path", "m",
                                         "--per_device_train_batch_size", str(2**30)])
    assert training_args.per_device_eval_batch_size == 2**31 - 1
