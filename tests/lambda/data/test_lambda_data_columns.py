"""Prepare resolves a task's columns exactly as the training code does: the same declaration (hftrain.tasks:
Task.columns, exported in hyperparameters.json), the same verdicts. Compared on random column sets and
hyperparameters against the real `Task.resolve_columns` (which raises DataError where the job would stop)."""

from __future__ import annotations

import datasets
from hypothesis import given
from hypothesis import strategies as st

from hfsm_lambda.data import column_checks as data_column_checks
from hfsm_lambda.data import preflight as data_preflight
from hfsm_lambda.data.column_checks import task_columns
from hfsm_lambda.data.sample import Channel, Sample
from hfsm_lambda.spec import hyperparameters
from hftrain.args import DataArguments
from hftrain.data.files import DataError
from hftrain.tasks import REGISTRY, column_declarations, get_task

DEFAULTS = {name: meta.get("default") for name, meta in hyperparameters.schema().items()}
# every name a declaration mentions, plus names no task knows
POOL = sorted({c for cols in column_declarations().values() for col in cols for c in
               [*col["candidates"], DEFAULTS.get(col["hyperparameter"])] if isinstance(c, str)} | {"body", "y"})


def test_the_lambda_reads_the_registry_s_declaration():
    assert {task: task_columns(task) for task in REGISTRY} == column_declarations()
    assert data_preflight.extensions() == hyperparameters.schema()["data_format"]["extensions"]


@st.composite
def cases(draw):
    task = draw(st.sampled_from(sorted(REGISTRY)))
    columns = draw(st.lists(st.sampled_from(POOL), min_size=1, max_size=8, unique=True))
    given_hp = {}
    for col in column_declarations()[task]:
        choice = draw(st.sampled_from(["unset", "present", "pool", *(["off"] if col["off"] else [])]))
        if choice == "present":
            given_hp[col["hyperparameter"]] = draw(st.sampled_from(columns))
        elif choice == "pool":
            given_hp[col["hyperparameter"]] = draw(st.sampled_from(POOL))
        elif choice == "off":
            given_hp[col["hyperparameter"]] = col["off"]
    return task, columns, given_hp


@given(cases())
def test_prepare_and_the_training_code_resolve_the_same_columns(case):
    task_name, columns, given_hp = case
    sample = Sample(uri="s3://b/train/a.jsonl", fmt="jsonl", columns=columns,
                                   rows=[dict.fromkeys(columns, "x")])
    channel = Channel("train", "s3://b/train/", [sample])
    resolved, problems = data_column_checks.resolve_columns(task_name, channel, given_hp, DEFAULTS)

    task = get_task(task_name, DataArguments(task=task_name, **given_hp))
    try:
        task.resolve_columns(datasets.Dataset.from_dict({c: ["x"] for c in columns}), "the training data")
    except DataError:
        assert problems, (task_name, columns, given_hp)
        return
    assert not problems, (task_name, columns, given_hp, problems)
    assert resolved == {hp: name for hp, name in task.resolved.items() if name}
