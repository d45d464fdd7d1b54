"""Reading the shard (text/jsonl/parquet, errors), word counting, and the counts files."""

from __future__ import annotations

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from testkit.tokenizer import corpus_lines

from tokenizer_mr.container import HostInfo, JobError
from tokenizer_mr.counts import (
    check_complete,
    count_words,
    count_words_python,
    find_counts_files,
    make_header,
    merge_counts,
    read_header,
    write_counts,
)
from tokenizer_mr.jobs import run_map
from tokenizer_mr.reader import ReadStats, iter_sequences, list_input_files
from tokenizer_mr.settings import TokenizerSettings


def _read(files, fmt="auto", field="text"):
    stats = ReadStats()
    return list(iter_sequences(files, fmt, field, stats, "test")), stats


def test_text_lines_keep_their_endings_like_tokenizers(tmp_path):
    p = tmp_path / "a.txt"
    p.write_bytes(b"one\r\ntwo\n\nthree")
    seqs, stats = _read([p])
    assert seqs == ["one\r\n", "two\n", "\n", "three"]
    assert stats.sequences == 4 and stats.bytes == p.stat().st_size


def test_gzip_jsonl_and_nulls(tmp_path):
    p = tmp_path / "a.jsonl.gz"
    with gzip.open(p, "wt", encoding="utf-8") as fh:
        fh.write(json.dumps({"t": "héllo"}) + "\n\n" + json.dumps({"t": None}) + "\n" + json.dumps({"t": "x"}) + "\n")
    seqs, stats = _read([p], field="t")
    assert seqs == ["héllo", "x"] and stats.skipped_nulls == 1


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"other": "x"}\n', "has no field 'text'"),
        ('{"text": 3}\n', "is int, not text"),
        ("not json\n", "is not JSON"),
    ],
)
def test_jsonl_errors_name_file_and_line(tmp_path, content, message):
    p = tmp_path / "bad.jsonl"
    p.write_text('{"text": "ok"}\n' + content)
    with pytest.raises(JobError, match=rf"bad.jsonl line 2 .*{message}|bad.jsonl line 2: .*{message}"):
        _read([p])


def test_parquet_column_checks(tmp_path):
    p = tmp_path / "a.parquet"
    pq.write_table(pa.table({"text": ["a b", None, "c"], "n": [1, 2, 3]}), p)
    assert _read([p])[0] == ["a b", "c"]
    with pytest.raises(JobError, match="no column 'body'"):
        _read([p], field="body")
    with pytest.raises(JobError, match="not a string column"):
        _read([p], field="n")


def test_invalid_utf8_and_unknown_extension(tmp_path):
    bad = tmp_path / "bad.txt"
    bad.write_bytes(b"ok\n\xff\xfe\n")
    with pytest.raises(JobError, match="bad.txt line 2 is not UTF-8"):
        _read([bad])
    odd = tmp_path / "data.bin"
    odd.write_text("x")
    with pytest.raises(JobError, match="--input-format"):
        _read([odd])
    assert _read([odd], fmt="text")[0] == ["x"]


def test_listing_skips_hidden_and_markers(tmp_path):
    (tmp_path / "sub").mkdir()
    for name in ["b.txt", ".hidden", "_SUCCESS", "sub/a.txt"]:
        (tmp_path / name).write_text("x")
    assert [p.relative_to(tmp_path).as_posix() for p in list_input_files(tmp_path)] == ["b.txt", "sub/a.txt"]
    assert list_input_files(tmp_path / "missing") == []


@pytest.mark.parametrize("kind", ["bpe", "wordpiece"])
@pytest.mark.parametrize("lowercase", [False, True])
def test_counting_in_rust_equals_counting_in_python(kind, lowercase):
    s = TokenizerSettings(tokenizer_type=kind, lowercase=lowercase)
    lines = corpus_lines("unicode") + corpus_lines("specials")
    assert count_words(s, lines) == count_words_python(s, lines)
    assert count_words(s, []) == {}


def test_counts_file_round_trip(tmp_path):
    s = TokenizerSettings(tokenizer_type="bpe")
    header = make_header(s, host="algo-1", hosts=["algo-1"], part=0, final_part=True)
    path = tmp_path / "counts-algo-1.part00000.parquet"
    write_counts(path, {"Ġb": 2, "a": 5, "日本": 1}, header)
    h = read_header(path)
    assert h["unique_words"] == 3 and h["words"] == 8 and h["pipeline"] == s.pipeline_fingerprint()
    table = pq.read_table(path)
    assert table.column("word").to_pylist() == sorted(["Ġb", "a", "日本"], key=lambda w: w.encode())
    merged = merge_counts([path, _copy_as(path, "algo-2", tmp_path)], s)
    assert dict(zip(merged.words.to_pylist(), merged.counts.tolist(), strict=True)) == {"Ġb": 4, "a": 10, "日本": 2}


def _copy_as(path, host, tmp_path):
    s = TokenizerSettings(tokenizer_type="bpe")
    out = tmp_path / f"counts-{host}.part00000.parquet"
    header = make_header(s, host=host, hosts=["algo-1", host], part=0, final_part=True)
    write_counts(out, dict(zip(*[pq.read_table(path).column(c).to_pylist() for c in ("word", "count")], strict=True)), header)
    # the first file says hosts=[algo-1]; the union of all headers is what must be present
    return out


def test_reduce_rejects_counts_from_other_settings(tmp_path):
    bpe = TokenizerSettings(tokenizer_type="bpe")
    path = tmp_path / "counts-algo-1.part00000.parquet"
    write_counts(path, {"a": 1}, make_header(bpe, host="algo-1", hosts=["algo-1"], part=0, final_part=True))
    with pytest.raises(JobError, match="--tokenizer-type bpe, this reduce has wordpiece"):
        merge_counts([path], TokenizerSettings(tokenizer_type="wordpiece"))
    with pytest.raises(JobError, match="--lowercase false, this reduce has true"):
        merge_counts([path], TokenizerSettings(tokenizer_type="bpe", lowercase=True))
    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"word": ["a"], "count": [1]}), other)
    with pytest.raises(JobError, match="no tokenizer_mr header"):
        read_header(other)


def test_incomplete_map_output_is_an_error():
    from pathlib import Path

    def h(host, part, final, hosts=("algo-1", "algo-2")):
        return {"host": host, "hosts": list(hosts), "part": part, "final_part": final}

    assert check_complete([(Path("x"), h("algo-1", 0, True)), (Path("y"), h("algo-2", 0, True))]) == ["algo-1", "algo-2"]
    with pytest.raises(JobError, match="no counts from host"):
        check_complete([(Path("x"), h("algo-1", 0, True))])
    with pytest.raises(JobError, match="incomplete"):
        check_complete([(Path("x"), h("algo-1", 1, True)), (Path("y"), h("algo-2", 0, True))])
    with pytest.raises(JobError, match="appears twice"):
        check_complete([(Path("x"), h("algo-1", 0, True)), (Path("y"), h("algo-1", 0, True))])


def test_map_of_an_empty_shard_writes_an_empty_counts_file(tmp_path):
    s = TokenizerSettings(tokenizer_type="wordpiece")
    summary = run_map(s, tmp_path / "no-such-dir", tmp_path / "out", host=HostInfo("algo-3", ("algo-1", "algo-2", "algo-3")))
    (f,) = find_counts_files(tmp_path / "out")
    assert f.name == "counts-algo-3.part00000.parquet"
    assert read_header(f)["unique_words"] == 0 and summary.files == 0 and summary.words == 0


def test_exit_message_is_the_first_kilobyte_in_utf8(tmp_path, monkeypatch):
    from tokenizer_mr import container

    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    container.write_exit_message("tokenizer-map failed: " + "é" * 2000)
    raw = (tmp_path / "output" / "message").read_bytes()
    assert len(raw) <= container.EXIT_MESSAGE_BYTES
    assert raw.decode("utf-8").startswith("tokenizer-map failed: éé")
