"""Prepare's data check (lambda/data/preflight.py) against moto: a bounded sample of every channel, checked with
the task registry's column declaration, before any job starts; every problem names the field and the fix."""

from __future__ import annotations

import gzip
import io
import json
from pathlib import Path
from typing import Any

import pytest
from testkit.lambdas import SETTINGS

from hfsm_lambda import aws
from hfsm_lambda.data import preflight as data_preflight
from hfsm_lambda.data.sample_parsing import SAMPLE_BYTES
from hfsm_lambda.errors import PreflightError
from hfsm_lambda.runs.prepare import prepare_run

BUCKET = SETTINGS["data_bucket"]
CLS_ROWS = [{"id": str(i), "text": f"words {i}", "label": ["neg", "pos"][i % 2]} for i in range(40)]
QA_ROWS = [{"id": str(i), "question": "which?", "context": "the blue one", "answers": {"text": ["blue"],
                                                                                        "answer_start": [4]}}
           for i in range(20)]


def jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r) + "\n" for r in rows).encode()


def put(key: str, body: bytes) -> None:
    aws.client("s3").put_object(Bucket=BUCKET, Key=key, Body=body)


def spec(task: str = "text-classification", **hp: Any) -> dict[str, Any]:
    return {"version": 1, "name": "d", "task": task, "model": f"s3://{BUCKET}/base-models/m/",
            "data": {"train": {"s3": "datasets/d/train/"}, "validation": {"s3": "datasets/d/val/"}},
            "compute": {"instance_type": "ml.g5.2xlarge"}, "hyperparameters": hp}


def problems(raw: dict[str, Any], settings) -> list[str]:
    put("base-models/m/config.json", b"{}")
    with pytest.raises(PreflightError) as info:
        prepare_run(raw, settings, s3=aws.client("s3"))
    return info.value.problems


@pytest.fixture
def cls_data(aws_account):
    put("datasets/d/train/part-0.jsonl", jsonl(CLS_ROWS[:20]))
    put("datasets/d/train/part-1.jsonl", jsonl(CLS_ROWS[20:]))
    put("datasets/d/val/v.jsonl", jsonl(CLS_ROWS[:5]))
    put("base-models/m/config.json", b"{}")
    return aws_account


def test_good_data_passes(cls_data, settings):
    run = prepare_run(spec(label_column="label"), settings, s3=aws.client("s3"))
    assert run.spec.hyperparameters == {"label_column": "label"}


def test_a_wrong_label_column_names_the_hyperparameter_and_the_columns(cls_data, settings):
    (problem,) = problems(spec(label_column="sentiment"), settings)
    assert problem == ("hyperparameters.label_column: 'sentiment' is not a column of data.train. Set "
                       "hyperparameters.label_column to the column that holds the label; "
                       f"s3://{BUCKET}/datasets/d/train/part-0.jsonl has 'id', 'text', 'label'")


def test_the_readme_shows_this_message_as_it_is(cls_data, settings):
    """The README's sample of a failed local run's reason is this check's message, word for word (docs that run)."""
    (problem,) = problems(spec(label_column="sentiment"), settings)
    shown = problem.replace(f"s3://{BUCKET}/datasets/d/train/", "s3://.../")
    readme = " ".join((Path(__file__).resolve().parents[3] / "README.md").read_text().split())
    assert f"`{shown}`" in readme


def test_a_wrong_text_column_gets_a_did_you_mean(cls_data, settings):
    (problem,) = problems(spec(text_column="txt"), settings)
    assert problem.startswith("hyperparameters.text_column: 'txt' is not a column of data.train")
    assert "(did you mean 'text'?). Set hyperparameters.text_column to the column that holds the text; s3://" \
        in problem


def test_a_missing_answers_column_by_default_names_the_channel_and_the_hyperparameter(aws_account, settings):
    rows = [{k: v for k, v in r.items() if k != "answers"} for r in QA_ROWS]
    put("datasets/d/train/a.jsonl", jsonl(rows))
    put("datasets/d/val/a.jsonl", jsonl(QA_ROWS))
    (problem,) = problems(spec("question-answering"), settings)
    assert problem.startswith("data.train: no answers column 'answers' (the default of answers_column). Set "
                              "hyperparameters.answers_column to the column that holds the answers; s3://")
    assert problem.endswith("/datasets/d/train/a.jsonl has 'id', 'question', 'context'")


def test_validation_must_have_the_columns_resolved_on_train(aws_account, settings):
    put("datasets/d/train/a.jsonl", jsonl(CLS_ROWS))
    put("datasets/d/val/a.csv", b"id,sentence,label\n1,hello,pos\n")
    (problem,) = problems(spec(), settings)
    assert problem.startswith("data.validation: no column 'text' (text_column) in ")
    assert "data.train has it: give both channels the same columns" in problem


def _parquet(rows: list[dict[str, Any]]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    out = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), out)
    return out.getvalue()


def test_parquet_columns_come_from_the_footer(aws_account, settings):
    put("datasets/d/train/a.parquet", _parquet([{"id": r["id"], "text": r["text"]} for r in CLS_ROWS]))
    put("datasets/d/val/a.parquet", _parquet(CLS_ROWS))
    (problem,) = problems(spec(), settings)
    assert problem == ("data.train: no label column 'label' (the default of label_column). Set "
                       "hyperparameters.label_column to the column that holds the label; "
                       f"s3://{BUCKET}/datasets/d/train/a.parquet has 'id', 'text'")
    put("datasets/d/train/a.parquet", _parquet(CLS_ROWS))
    assert prepare_run(spec(), settings, s3=aws.client("s3"))


def test_empty_objects_rows_and_channels(aws_account, settings):
    put("datasets/d/train/a.jsonl", jsonl(CLS_ROWS))
    put("datasets/d/train/b.jsonl", b"")
    put("datasets/d/train/c.parquet", _parquet([]))  # a Parquet file of 0 rows
    put("datasets/d/val/_SUCCESS", b"")  # skipped like the job skips it
    put("datasets/d/val/notes.txt", b"hello")
    found = problems(spec(), settings)
    assert f"data.train: 1 empty object(s) (0 bytes) under s3://{BUCKET}/datasets/d/train/: b.jsonl; remove them " \
           "or upload their content" in found
    assert f"data.train: s3://{BUCKET}/datasets/d/train/c.parquet has no rows; remove it or upload its content" \
           in found
    (channel,) = [p for p in found if p.startswith("data.validation")]
    assert "none of the 2 object(s) under" in channel and "is a data file the training code reads" in channel


def test_a_line_that_is_not_json_is_named(aws_account, settings):
    put("datasets/d/train/a.jsonl", jsonl(CLS_ROWS[:3]) + b'{"id": 9, "text": "x" "label": 1}\n')
    put("datasets/d/val/a.jsonl", jsonl(CLS_ROWS))
    (problem,) = problems(spec(), settings)
    assert problem.startswith(f"data.train: s3://{BUCKET}/datasets/d/train/a.jsonl line 4 is not JSON (Expecting")


def test_num_labels_against_the_sampled_labels(aws_account, settings):
    numbered = [{**r, "label": i % 3} for i, r in enumerate(CLS_ROWS)]
    put("datasets/d/train/a.jsonl", jsonl(numbered))
    put("datasets/d/val/a.jsonl", jsonl(numbered))
    (problem,) = problems(spec(num_labels=2), settings)[:1]
    assert problem.startswith(f"data.train: label value(s) [2] in s3://{BUCKET}/datasets/d/train/a.jsonl ")
    assert "are outside 0..1 (hyperparameters.num_labels=2); fix num_labels or the labels" in problem
    assert prepare_run(spec(num_labels=3), settings, s3=aws.client("s3"))
    named = [{**r, "label": ["a", "b", "c"][i % 3]} for i, r in enumerate(CLS_ROWS)]
    put("datasets/d/train/a.jsonl", jsonl(named))
    put("datasets/d/val/a.jsonl", jsonl(named))
    assert any("already has 3 distinct named labels ('a', 'b', 'c') but hyperparameters.num_labels=2" in p
               for p in problems(spec(num_labels=2), settings))


def test_answers_of_the_wrong_shape_and_csv_answers(aws_account, settings):
    bad = [{**r, "answers": "blue"} for r in QA_ROWS]
    put("datasets/d/train/a.jsonl", jsonl(bad))
    put("datasets/d/val/a.jsonl", jsonl(QA_ROWS))
    (problem,) = problems(spec("question-answering"), settings)
    assert "column 'answers' should hold SQuAD answers" in problem and "row 1 of" in problem
    csv_rows = "id,question,context,answers\n" + "".join(
        f'{i},which?,the blue one,"{json.dumps(r["answers"]).replace(chr(34), chr(34) * 2)}"\n'
        for i, r in enumerate(QA_ROWS))
    put("datasets/d/train/a.jsonl", jsonl(QA_ROWS))
    put("datasets/d/val/a.csv", csv_rows.encode())
    assert prepare_run(spec("question-answering"), settings, s3=aws.client("s3"))


def test_json_documents_gzip_and_squad_nested(aws_account, settings):
    put("base-models/m/config.json", b"{}")
    put("datasets/d/train/a.json", json.dumps(QA_ROWS).encode())  # a list of records
    squad = {"version": "v2.0", "data": [{"title": "t", "paragraphs": [{"context": "the blue one", "qas": [
        {"id": "q", "question": "which?", "answers": [{"text": "blue", "answer_start": 4}]}]}]}]}
    put("datasets/d/val/a.json", json.dumps(squad).encode())
    assert prepare_run(spec("question-answering"), settings, s3=aws.client("s3"))
    aws.client("s3").delete_object(Bucket=BUCKET, Key="datasets/d/train/a.json")
    put("datasets/d/train/b.jsonl.gz", gzip.compress(jsonl([{**r, "context": None} for r in QA_ROWS][:1] + [
        {"id": "x", "question": 3, "context": "c", "answers": {"text": [], "answer_start": []}}])))
    (problem,) = problems(spec("question-answering"), settings)
    assert problem.startswith("data.train: the question column 'question' should hold text, but row 2 of ")


def test_the_tokenizer_text_field(aws_account, settings):
    put("datasets/d/train/a.jsonl", jsonl(CLS_ROWS))
    put("datasets/d/val/a.jsonl", jsonl(CLS_ROWS))
    raw = {**spec(), "tokenizer": {"type": "bpe", "text_field": "body"}}
    (problem,) = problems(raw, settings)
    assert problem.startswith("tokenizer.text_field: 'body' is not a field of data.train. Set tokenizer.text_field "
                              "to the column that holds the text; s3://")


def test_a_channel_the_job_does_not_read_is_not_checked(aws_account, settings):
    put("datasets/d/train/a.jsonl", jsonl([{"x": 1}]))
    put("datasets/d/val/a.jsonl", jsonl(CLS_ROWS))
    put("base-models/m/config.json", b"{}")
    raw = spec(train_path="/opt/ml/input/data/test/train")  # the job reads train_path instead of the channel
    assert prepare_run(raw, settings, s3=aws.client("s3"))


def test_the_sample_is_bounded(aws_account, settings, monkeypatch):
    """Only ranged GETs of the first objects, at most SAMPLE_BYTES each, whatever the channel holds."""
    big = jsonl(CLS_ROWS) * 2000  # ~2 MB an object
    for i in range(6):
        put(f"datasets/d/train/part-{i}.jsonl", big)
    put("datasets/d/val/a.jsonl", big)
    put("base-models/m/config.json", b"{}")
    s3 = aws.client("s3")
    ranges: list[str] = []
    original = s3.get_object

    def recording(**kwargs):
        ranges.append(kwargs.get("Range", "whole object"))
        return original(**kwargs)

    monkeypatch.setattr(s3, "get_object", recording)
    assert prepare_run(spec(), settings, s3=s3)
    assert len(ranges) == data_preflight.SAMPLE_OBJECTS + 1 and "whole object" not in ranges
    assert all(r == f"bytes=0-{SAMPLE_BYTES - 1}" for r in ranges)


def test_without_an_s3_client_nothing_is_read(settings):
    assert prepare_run(spec(label_column="sentiment"), settings)  # pure use (runctl plan from cdk.out)


# --- every object accounted for: a ShardedByS3Key channel holding an object the training code does not read is
# refused, naming it and the fix; for a channel every instance reads whole, the run lists what the job will skip
def _two_hosts(raw: dict, distribution: str) -> dict:
    return {**raw, "compute": {"instance_type": "ml.g5.2xlarge", "instance_count": 2},
            "data": {**raw["data"], "train": {"s3": "datasets/d/train/", "distribution": distribution}}}


@pytest.fixture
def mixed(cls_data):
    put("datasets/d/train/notes.txt", b"how it was made\n")
    put("datasets/d/train/_SUCCESS", b"")
    return cls_data


def test_a_sharded_channel_with_objects_the_reader_does_not_take_is_refused(mixed, settings):
    (problem,) = problems(_two_hosts(spec(label_column="label"), "ShardedByS3Key"), settings)
    assert problem == (
        "data.train: ShardedByS3Key, and SageMaker decides which instance gets which object, so one may get only "
        "objects the job cannot read and train on nothing: keep only .csv, .json, .jsonl, .ndjson, .parquet, .pq "
        f"files (.gz too) under s3://{BUCKET}/datasets/d/train/, moving the rest to another prefix, or use "
        "FullyReplicated. Not read: 2 object(s): _SUCCESS, notes.txt")


def test_the_same_objects_every_instance_reads_whole_are_listed_as_skipped(mixed, settings):
    run = prepare_run(_two_hosts(spec(label_column="label"), "FullyReplicated"), settings, s3=aws.client("s3"))
    assert run.data_skipped == (
        f"data.train: 2 object(s) under s3://{BUCKET}/datasets/d/train/ will be skipped: _SUCCESS (a name "
        "starting with . or _ (never read)), notes.txt (an extension the reader does not take)",)


def test_one_instance_shards_nothing_and_clean_data_skips_nothing(cls_data, settings):
    put("datasets/d/train/part-2.jsonl", jsonl(CLS_ROWS[:3]))
    run = prepare_run(_two_hosts(spec(label_column="label"), "ShardedByS3Key"), settings, s3=aws.client("s3"))
    assert run.data_skipped == ()
    put("datasets/d/train/notes.txt", b"x\n")
    single = {**spec(label_column="label"), "data": {"train": {"s3": "datasets/d/train/",
                                                               "distribution": "ShardedByS3Key"}}}
    assert len(prepare_run(single, settings, s3=aws.client("s3")).data_skipped) == 1


def test_a_tab_separated_file_named_csv_is_said_to_be_tab_separated(cls_data, settings):
    aws.client("s3").delete_object(Bucket=BUCKET, Key="datasets/d/train/part-1.jsonl")
    aws.client("s3").delete_object(Bucket=BUCKET, Key="datasets/d/train/part-0.jsonl")
    put("datasets/d/train/part-0.csv", b"id\ttext\tlabel\n1\tgood film\tpos\n2\tbad, sad film\tneg\n")
    found = problems(spec(label_column="label"), settings)
    assert found[0] == (f"data.train: s3://{BUCKET}/datasets/d/train/part-0.csv this file is tab-separated, but its "
                        "name ends in .csv and the reader takes .csv files as comma-separated: save it with commas "
                        "(or as JSON lines)")
    assert not any("not a column" in p for p in found), found  # not a CSV parsing message about one long column
