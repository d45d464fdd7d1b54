"""docs/training.md's hyperparameter tables are generated from the argument dataclasses (tools/hp_docs.py):
the test fails when the committed tables differ from what the dataclasses say."""

from __future__ import annotations

import dataclasses
import inspect
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from hftrain import args as hp
from tools import hp_docs

DOC = Path(__file__).resolve().parents[2] / "docs" / "training.md"
STALE = "stale: run make docs"


def test_the_docs_tables_are_the_generated_ones():
    text = DOC.read_text()
    assert hp_docs.render_doc(text) == text, STALE
    assert text.count(hp_docs.BEGIN) == text.count(hp_docs.END) == 1


def test_every_hyperparameter_hftrain_declares_has_a_row():
    text = DOC.read_text()
    own = [f.name for f in dataclasses.fields(hp.ModelArguments)] + [f.name for f in dataclasses.fields(hp.DataArguments)]
    own += list(inspect.get_annotations(hp.SageMakerTrainingArguments))
    assert own and [name for name in own if f"| `{name}` |" not in text] == []
    assert "| `learning_rate` |" not in text  # the Trainer's own fields are in hyperparameters.json only


def test_a_new_field_makes_the_tables_stale(monkeypatch):
    @dataclass
    class WithNewKnob(hp.SageMakerTrainingArguments):
        new_knob: int = field(default=3, metadata={"help": "A new knob | with a pipe.", "choices": [3, 4]})

    text = DOC.read_text()
    monkeypatch.setattr(hp, "training_args_class", lambda: WithNewKnob)
    assert hp_docs.render_doc(text) != text
    assert "| `new_knob` | integer: `3`, `4` | `3` | A new knob \\| with a pipe. |" in hp_docs.render_table()


def test_missing_markers_are_an_error():
    with pytest.raises(SystemExit, match="markers"):
        hp_docs.render_doc("# no table here\n")


@pytest.mark.parametrize(("cpus", "local", "workers"), [(8, 1, 4), (4, 1, 3), (8, 4, 1), (2, 2, 0)])
def test_auto_dataloader_workers_are_what_the_documented_help_says(cpus, local, workers, monkeypatch):
    """-1 = auto: min(4, CPUs per local process - 1) on GPU machines (the '- 1' the hand-written table had and
    the help text lacked), 0 on CPU-only machines."""
    monkeypatch.setattr(hp.os, "cpu_count", lambda: cpus)
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local))
    assert hp._auto_workers(True) == workers == max(0, min(4, cpus // local - 1))
    assert hp._auto_workers(False) == 0
    assert "min(4, CPUs per local process - 1) on GPU machines" in DOC.read_text()
