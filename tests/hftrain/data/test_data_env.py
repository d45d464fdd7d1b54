"""The container contract (SM_* variables, config files) and reading channel data."""

from __future__ import annotations

import gzip
import json

import pytest

from hftrain import smenv
from hftrain.data import files as data
from local_mode import synthetic as synth


def test_env_from_config_files_and_variables(tmp_path):
    config = tmp_path / "input" / "config"
    config.mkdir(parents=True)
    (config / "resourceconfig.json").write_text(json.dumps({"current_host": "algo-2", "hosts": ["algo-2", "algo-1"]}))
    (config / "inputdataconfig.json").write_text(json.dumps({
        "train": {"S3DistributionType": "ShardedByS3Key"}, "validation": {"S3DistributionType": "FullyReplicated"}}))
    (tmp_path / "input" / "data" / "tokenizer").mkdir(parents=True)
    env = smenv.SageMakerEnv.from_environ({"SAGEMAKER_BASE_DIR": str(tmp_path), "SM_MODEL_DIR": "/m"})
    assert env.hosts == ["algo-1", "algo-2"] and env.current_host == "algo-2" and env.host_index == 1
    assert env.is_sharded("train") and not env.is_sharded("validation")
    assert env.channels["train"] == str(tmp_path / "input" / "data" / "train")
    assert env.channels["tokenizer"].endswith("tokenizer")
    assert env.model_dir == "/m" and env.output_data_dir == str(tmp_path / "output" / "data")
    single = smenv.SageMakerEnv.from_environ({"SAGEMAKER_BASE_DIR": str(tmp_path), "SM_HOSTS": '["algo-1"]',
                                              "SM_CURRENT_HOST": "algo-1", "SM_CHANNEL_TRAIN": "/data/x"})
    assert not single.is_sharded("train")  # one host: sharding changes nothing
    assert single.channels["train"] == "/data/x"
    assert smenv.default_checkpoint_dir().endswith("checkpoints")


def test_formats_nested_dirs_gzip_and_ignored_files(tmp_path):
    rows = synth.cls_examples(6, 1)
    synth.write_jsonl(tmp_path / "a" / "part-0.jsonl", rows[:3])
    (tmp_path / "a" / "b").mkdir()
    with gzip.open(tmp_path / "a" / "b" / "part-1.jsonl.gz", "wt") as f:
        for row in rows[3:]:
            f.write(json.dumps(row) + "\n")
    (tmp_path / "a" / "_manifest.json").write_text("{}")
    (tmp_path / "a" / "README").write_text("x")
    found = data.find_data_files(str(tmp_path / "a"))
    assert list(found) == ["jsonl"] and len(found["jsonl"]) == 2
    ds = data.load_local(str(tmp_path / "a"), cache_dir=str(tmp_path / "cache"))
    assert len(ds) == 6 and set(ds.column_names) == {"id", "text", "label"}


def test_csv_and_parquet(tmp_path):
    import pandas as pd

    rows = [{"text": f"t {i}", "label": i % 2} for i in range(5)]
    pd.DataFrame(rows).to_csv(tmp_path / "d.csv", index=False)
    pd.DataFrame(rows).to_parquet(tmp_path / "d.parquet")
    assert len(data.load_local(str(tmp_path / "d.csv"), cache_dir=str(tmp_path / "c"))) == 5
    assert len(data.load_local(str(tmp_path / "d.parquet"), cache_dir=str(tmp_path / "c"))) == 5


def test_nested_squad_json_is_flattened(tmp_path):
    doc = {"version": "v2.0", "data": [{"title": "T", "paragraphs": [{"context": "a b c", "qas": [
        {"id": "1", "question": "q?", "answers": [{"text": "b", "answer_start": 2}]},
        {"id": "2", "question": "r?", "answers": [], "is_impossible": True},
    ]}]}]}
    (tmp_path / "dev.json").write_text(json.dumps(doc))
    ds = data.load_local(str(tmp_path / "dev.json"), cache_dir=str(tmp_path / "c"))
    assert ds["id"] == ["1", "2"]
    assert ds["answers"][0] == {"text": ["b"], "answer_start": [2]}
    assert ds["answers"][1]["text"] == []


def test_clear_errors(tmp_path):
    with pytest.raises(data.DataError, match="does not exist"):
        data.find_data_files(str(tmp_path / "missing"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(data.DataError, match="no data files"):
        data.load_local(str(tmp_path / "empty"))
    assert data.load_local(str(tmp_path / "empty"), allow_empty=True) is None
    synth.write_jsonl(tmp_path / "x.jsonl", [{"foo": 1}])
    ds = data.load_local(str(tmp_path / "x.jsonl"), cache_dir=str(tmp_path / "c"))
    with pytest.raises(data.DataError, match=r"missing column\(s\) \['question'\]"):
        data.require_columns(ds, ["question", "foo"], "the training data")
    with pytest.raises(data.DataError, match="cannot find the text column"):
        data.pick_column(ds, None, ("text", "sentence"), "text")
    with pytest.raises(data.DataError, match="offline"):
        data.load_hub("squad", None, "train")
