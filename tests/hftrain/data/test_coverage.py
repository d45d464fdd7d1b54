"""Every object of a channel accounted for on a host (hftrain/data/coverage.py): what it received, read and skipped
with the reason; the message of a host that ends up with no readable rows names the host, the objects and the fix."""

from __future__ import annotations

from pathlib import Path

from hftrain.data import coverage, files


def _folder(tmp_path: Path, names: dict[str, str]) -> Path:
    for name, text in names.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return tmp_path


def test_every_object_is_read_or_skipped_with_its_reason(tmp_path):
    folder = _folder(tmp_path, {"part-0.jsonl": "{}\n", "sub/part-1.csv.gz": "", "notes.txt": "x",
                                "_SUCCESS": "", ".hidden/x.jsonl": "{}\n"})
    found, skipped = files.inventory(str(folder))
    assert {fmt: [Path(f).name for f in names] for fmt, names in found.items()} == {
        "jsonl": ["part-0.jsonl"], "csv": ["part-1.csv.gz"]}
    assert skipped == [(".hidden/x.jsonl", files.MARKER_REASON), ("_SUCCESS", files.MARKER_REASON),
                       ("notes.txt", files.UNKNOWN_REASON)]
    assert coverage.host_record(str(folder), "auto", rows=7) == {
        "objects": 5, "read": 2, "rows": 7, "skipped": [{"name": n, "reason": r} for n, r in skipped]}
    assert coverage.host_record(None, "auto", rows=0) == {"objects": 0, "read": 0, "rows": 0, "skipped": []}


def test_a_host_with_only_unreadable_objects_is_told_which_and_what_to_do(tmp_path):
    record = coverage.host_record(str(_folder(tmp_path, {"notes.txt": "x"})), "auto", rows=0)
    message = str(coverage.no_rows_error("train", "algo-2", record))
    assert message == (
        "this host (algo-2) has no readable rows of the ShardedByS3Key channel `train`: it received 1 object(s) and "
        "the reader takes none of them: notes.txt (an extension the reader does not take). SageMaker decides which "
        "instance receives which object, so every object under the channel's prefix must be a data file the reader "
        "takes (.jsonl, .ndjson, .json, .csv, .parquet, .pq (optionally .gz), or set data_format): convert the "
        "others, or move them to another prefix")


def test_a_host_that_received_nothing_or_only_empty_files(tmp_path):
    nothing = str(coverage.no_rows_error("train", "algo-3", coverage.host_record(None, "auto", rows=0)))
    assert "SageMaker gave it no object" in nothing and "at least one file per instance" in nothing
    empty = coverage.host_record(str(_folder(tmp_path, {"part-0.jsonl": ""})), "auto", rows=0)
    assert "the 1 data file(s) it received hold no rows" in str(coverage.no_rows_error("train", "algo-1", empty))


def test_many_skipped_objects_are_counted_beyond_those_named(tmp_path):
    folder = _folder(tmp_path, {f"n{i:02d}.txt": "x" for i in range(25)})
    record = coverage.host_record(str(folder), "auto", rows=0)
    assert len(record["skipped"]) == coverage.MAX_NAMED and record["more_skipped"] == 5 and record["objects"] == 25


def test_a_tab_separated_file_named_csv_is_said_to_be_tab_separated(tmp_path):
    import pytest

    folder = _folder(tmp_path, {"part-0.csv": "id\ttext\tlabel\n1\tgood, fine film\tpos\n"})
    with pytest.raises(files.DataError) as info:
        files.load_local(str(folder), cache_dir=str(tmp_path / "cache"))
    assert str(info.value) == (f"{folder / 'part-0.csv'}: this file is tab-separated, but its name ends in .csv and "
                               "the reader takes .csv files as comma-separated: save it with commas (or as JSON lines)")
    _folder(tmp_path, {"part-0.csv": "id,text,label\n1,good\tfilm,pos\n"})  # a tab inside a field: still CSV
    assert files.load_local(str(folder), cache_dir=str(tmp_path / "cache"))["text"] == ["good\tfilm"]
