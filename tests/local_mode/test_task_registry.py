"""A task is one module: local mode takes everything it does per task from the task registry
(training_code/hftrain/tasks/, each task's `local` declaration), and every registered task brings what that
declaration names: its example spec under examples/, its row generator in local_mode/synthetic.py (rows its own
column resolution accepts, under a spec's column names too), a tiny model family that can do it, and its section
in docs/training.md (docs/training.md "Adding a task")."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import datasets
import pytest
from transformers import AutoConfig

from hftrain.args import DataArguments
from hftrain.tasks import REGISTRY, get_task
from hftrain.tasks.base import LocalMode
from local_mode import spec_inputs, synthetic, task_registry

REPO = Path(__file__).resolve().parents[2]
TASKS = list(REGISTRY)


def _local(name: str) -> LocalMode:
    local = REGISTRY[name].local
    assert isinstance(local, LocalMode), (
        f"task {name!r} declares no `local = LocalMode(...)` (hftrain/tasks/base.py): the example spec, tiny model "
        "family and row generator local mode uses for it")
    return local


def _data_args(name: str, hyperparameters: dict) -> DataArguments:
    fields = {f.name for f in dataclasses.fields(DataArguments)}
    return DataArguments(task=name, **{k: v for k, v in hyperparameters.items() if k in fields})


def test_local_mode_reads_the_training_code_s_registry() -> None:
    assert task_registry.registry() is REGISTRY


@pytest.mark.parametrize("name", TASKS)
def test_every_task_has_an_example_spec(name: str) -> None:
    path = REPO / "examples" / _local(name).example
    assert path.is_file(), f"task {name!r}: its example spec {path.relative_to(REPO)} is missing"
    assert json.loads(path.read_text())["task"] == name, f"{path.relative_to(REPO)} is a spec for another task"


@pytest.mark.parametrize("name", TASKS)
def test_every_task_has_a_row_generator_whose_rows_it_reads(name: str) -> None:
    """The rows as generated and as renamed for the task's example spec resolve with the task's own columns."""
    rows_function = _local(name).rows
    assert callable(getattr(synthetic, rows_function, None)), (
        f"task {name!r}: no row generator {rows_function}(n, seed, hyperparameters) in local_mode/synthetic.py")
    example = json.loads((REPO / "examples" / _local(name).example).read_text())
    for hyperparameters in ({}, example.get("hyperparameters") or {}):
        rows = spec_inputs.task_rows(name, 8, 1, hyperparameters)
        assert len(rows) == 8
        task = get_task(name, _data_args(name, hyperparameters))
        task.resolve_columns(datasets.Dataset.from_list(rows), "generated data")


@pytest.mark.parametrize("name", TASKS)
def test_every_task_s_tiny_model_family_can_do_it(name: str) -> None:
    family = _local(name).model_family
    assert family in synthetic.MODEL_KINDS, f"task {name!r}: model family {family!r} is not one synthetic.py builds"
    get_task(name, _data_args(name, {})).check_model(AutoConfig.for_model(family))


@pytest.mark.parametrize("name", TASKS)
def test_every_task_has_its_docs_section(name: str) -> None:
    headings = re.findall(r"^#+ (.+)$", (REPO / "docs" / "training.md").read_text(), flags=re.MULTILINE)
    assert f"`{name}`" in headings, f"docs/training.md has no section `{name}` (under ### Tasks)"


@pytest.mark.parametrize("name", TASKS)
def test_a_tokenizer_stage_trains_on_the_task_s_text(name: str, tmp_path: Path) -> None:
    """A tokenizer stage's text_field is filled from the column that the task's `local.tokenizer_text` names."""
    spec = {"task": name, "tokenizer": {"text_field": "raw"}, "data": {"train": {"s3": "datasets/x/train/"}}}
    spec_inputs.write_spec_data(spec, tmp_path, parts=1, train_rows=4)
    rows = [json.loads(line) for line in (tmp_path / "datasets/x/train/part-0.jsonl").read_text().splitlines()]
    task = get_task(name, _data_args(name, {}))
    task.resolve_columns(datasets.Dataset.from_list(rows), "generated data")
    source = task.column(_local(name).tokenizer_text)
    assert source and [row["raw"] for row in rows] == [row[source] for row in rows]


def test_local_mode_names_no_task() -> None:
    """No per-task tables or branches in the modules that generate inputs and run specs: they ask the registry."""
    for module in ("cli_runs.py", "spec_inputs.py", "task_registry.py"):
        source = (REPO / "local_mode" / module).read_text()
        assert not [name for name in TASKS if f'"{name}"' in source or f"'{name}'" in source], module


def test_an_unknown_task_has_no_generator() -> None:
    with pytest.raises(spec_inputs.InputsError, match="no generator for task 'qa'"):
        spec_inputs.task_rows("qa", 4, 1, {})
