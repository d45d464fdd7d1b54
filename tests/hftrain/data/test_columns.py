"""The columns a task reads come from its declaration (Task.columns); num_labels sets the classes."""

from __future__ import annotations

import datasets
import pytest

from hftrain.args import DataArguments
from hftrain.data.files import DataError
from hftrain.tasks import get_task
from hftrain.tasks.classification import labels_for_count


def _resolve(task: str, rows: list[dict], **hp):
    t = get_task(task, DataArguments(task=task, **hp))
    t.resolve_columns(datasets.Dataset.from_list(rows), "the training data")
    return t


def test_candidates_defaults_and_off():
    t = _resolve("text-classification", [{"sentence1": "a", "hypothesis": "b", "label": 1}])
    assert t.resolved == {"text_column": "sentence1", "text_pair_column": "hypothesis", "label_column": "label"}
    t = _resolve("text-classification", [{"sentence1": "a", "hypothesis": "b", "label": 1}], text_pair_column="none")
    assert t.column("text_pair_column") is None
    with pytest.raises(DataError, match=r"missing column\(s\) \['sentiment'\]"):
        _resolve("text-classification", [{"text": "a", "label": 1}], label_column="sentiment")
    with pytest.raises(DataError, match="cannot find the document column in the training data: tried"):
        _resolve("summarization", [{"body": "a", "summary": "b"}])


def test_an_id_column_is_used_where_present_unless_named():
    rows = [{"question": "q", "context": "c", "answers": {"text": [], "answer_start": []}}]
    assert _resolve("question-answering", rows).column("id_column") is None
    with pytest.raises(DataError, match=r"missing column\(s\) \['qid'\]"):
        _resolve("question-answering", rows, id_column="qid")


def test_num_labels():
    assert labels_for_count(["0", "2"], 4) == ["0", "1", "2", "3"]  # the head gets every class
    assert labels_for_count(["neg", "pos"], 2) == ["neg", "pos"]
    with pytest.raises(DataError, match=r"label value\(s\) \[5\] are outside 0..3"):
        labels_for_count(["0", "5"], 4)
    with pytest.raises(DataError, match="3 distinct named labels"):
        labels_for_count(["a", "b", "c"], 2)
