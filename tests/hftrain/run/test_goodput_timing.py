"""The training code's goodput parts: the clock (hftrain/run/goodput.py), the auto checkpoint interval
(hftrain/checkpoint/interval.py), the tokenized data set kept with the run (hftrain/data/tokenized_cache.py) and the
interruption record when no progress beat reached the checkpoint dir (hftrain/checkpoint/history.py)."""

from __future__ import annotations

import io
import json
import math
import os
from pathlib import Path

import datasets
import pytest

from contract import goodput_line
from hftrain.args import DataArguments
from hftrain.checkpoint import history as run_history
from hftrain.checkpoint import interval as save_interval
from hftrain.data import tokenized_cache
from hftrain.run import goodput
from hftrain.tasks import get_task
from local_mode import synthetic


class FakeClock:
    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


# --- the clock -------------------------------------------------------------------------------------------------
def test_the_clock_splits_time_into_startup_steps_evaluation_and_saves():
    clock, out = FakeClock(), io.StringIO()
    timer = goodput.GoodputClock(job="j", host="algo-1", clock=clock, stream=out, started_at=990.0, beat_seconds=5)
    timer.mark_imports_done()  # 10 s since the process started
    with timer.phase("tokenize"):
        clock.now += 3
    timer.restore_started()
    clock.now += 2
    timer.first_step_begins()
    for step in range(1, 5):  # 4 steps of 1.5 s
        clock.now += 1.5
        timer.step_ends(step)
    timer.eval_begins()
    clock.now += 4
    timer.eval_ends()
    timer.save_begins(4)
    clock.now += 2.5
    timer.save_ends(4)
    clock.now += 1  # a step after the save
    timer.step_ends(5)
    with timer.final("save"):
        clock.now += 0.5
    timer.end()
    records = [goodput_line.parse_line(line) for line in out.getvalue().splitlines()
               if line.startswith(goodput_line.PREFIX)]
    assert [r["event"] for r in records] == ["startup", "beat", "eval_begin", "eval", "save_begin", "save", "beat",
                                            "end"]
    last = records[-1]
    assert last["startup"] == {"imports": 10.0, "tokenize": 3.0, "restore": 2.0}
    assert last["step_seconds"] == pytest.approx(7.0) and last["steps"] == 5
    assert last["eval_seconds"] == pytest.approx(4.0) and last["save_seconds"] == pytest.approx(3.0)
    assert last["final_seconds"] == pytest.approx(0.5) and last["first_step_at"] == pytest.approx(1005.0)
    assert records[5]["saved_step"] == 4 and records[5]["step_seconds"] == pytest.approx(6.0)
    metrics = [line for line in out.getvalue().splitlines() if line.startswith("METRIC ")]
    assert "METRIC startup_seconds=15.0" in metrics and "METRIC startup_tokenize_seconds=3.0" in metrics
    assert "METRIC step_seconds=1.5" in metrics  # the beat after step 4 (6 s of training, beats every 5 s)


def test_other_ranks_measure_without_writing_lines():
    out = io.StringIO()
    timer = goodput.GoodputClock(enabled=False, stream=out, clock=FakeClock())
    timer.first_step_begins()
    timer.step_ends(1)
    timer.end()
    assert out.getvalue() == "" and timer.steps == 1


# --- the auto interval -------------------------------------------------------------------------------------------
def test_young_daly_interval_and_its_clamps():
    assert save_interval.young_daly_seconds(30, 6 * 3600) == pytest.approx(math.sqrt(2 * 30 * 6 * 3600))
    assert save_interval.interval_minutes(30, 6 * 3600) == pytest.approx(math.sqrt(2 * 30 * 21600) / 60)  # 18 min
    assert save_interval.interval_minutes(0.5, 3600) == 5.0  # sqrt(2 x 0.5 s x 1 h) = 1 min: the lower bound
    assert save_interval.interval_minutes(600, 24 * 3600) == 60.0  # 170 min: the upper bound
    assert save_interval.interval_minutes(None, 24 * 3600) == 5.0  # C not measured yet


def test_auto_interval_follows_the_measured_saves_and_logs_each_change():
    said: list[str] = []
    interval = save_interval.AutoInterval(prior_hours=6, log=lambda fmt, *a: said.append(fmt % a))
    assert interval.minutes == 5.0 and "lower bound until this run's first save" in said[0]
    interval.record_save(30.0)
    assert interval.minutes == pytest.approx(math.sqrt(2 * 30 * 6 * 3600) / 60)
    assert "sqrt(2 x C 30.000 s x M 6.00 h)" in said[-1] and "pipeline's prior" in said[-1]
    interval.record_save(60.0)
    interval.record_save(31.0)  # the running median: 31
    assert interval.save_seconds == 31.0 and len(said) == 4
    interval.record_save(31.0)  # the median stays: nothing new to log
    assert len(said) == 4


def test_auto_interval_uses_the_runs_interruptions_and_earlier_saves():
    now = 1_800_000_000.0
    history = {"starts": [{"at": run_history.utc_iso(now - 7200)}, {"at": run_history.utc_iso(now - 3600)}],
               "interruptions": [{"step_reached": 10}, {"step_reached": 20}]}
    interval = save_interval.AutoInterval(prior_hours=6, history=history, previous_saves=[20.0, 40.0],
                                          clock=lambda: now, log=lambda *a: None)
    assert interval.mtbi_seconds == pytest.approx(3600) and interval.save_seconds == 30.0
    assert interval.minutes == pytest.approx(math.sqrt(2 * 30 * 3600) / 60)  # 7.7 min


# --- the interruption record without a progress beat -------------------------------------------------------------
def test_an_attempt_lost_before_its_first_progress_beat_reports_the_step_reached_as_unknown(tmp_path):
    clock = FakeClock(1_800_000_000.0)
    first = run_history.RunHistory(str(tmp_path), job="job-a", host="algo-1", every_seconds=30, clock=clock)
    first.record_start({"resumed_from_step": None}, resumed_step=None)
    clock.now += 10  # 13 steps in 10 s: no beat (every 30 s), then lost
    second = run_history.RunHistory(str(tmp_path), job="job-a", host="algo-1", every_seconds=30, clock=clock)
    record = second.record_start({"resumed_from_step": None}, resumed_step=None)
    assert record["step_reached"] is None and record["lost_steps"] is None and "before its first progress" in \
        record["unknown"]
    clock.now += 40
    second.beat(25)  # a beat: the next interruption's step reached is known (at least 25)
    third = run_history.RunHistory(str(tmp_path), job="job-a", host="algo-1", every_seconds=30, clock=clock)
    assert third.record_start({}, resumed_step=20)["step_reached"] == 25


# --- the tokenized data set kept with the run ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def tokenizer():
    return synthetic.build_tokenizer("bert")


def make_cache(root: Path, tokenizer, data_dir: Path, **args) -> tuple[tokenized_cache.TokenizedCache, object]:
    data_args = DataArguments(task="text-classification", **args)
    task = get_task("text-classification", data_args)
    task.text_column, task.labels = "text", ["0", "1"]
    files = tokenized_cache.data_files_fingerprint([("train", str(data_dir))])
    digest, inputs = tokenized_cache.fingerprint(data_files=files, tokenizer=tokenizer,
                                                 model_identity={"model_fingerprint": "m1"}, task=task,
                                                 data_args=data_args)
    return tokenized_cache.TokenizedCache(str(root), digest, inputs), task


def build(tokenizer, rows: int = 50):
    def run():
        data = datasets.Dataset.from_list(synthetic.cls_examples(rows, seed=1))
        return data.map(lambda b: tokenizer(b["text"], truncation=True), batched=True), None
    return run


def test_the_cache_is_written_then_loaded_and_verified(tmp_path, tokenizer):
    data = tmp_path / "data"
    synthetic.write_jsonl(data / "train.jsonl", synthetic.cls_examples(50, seed=1))
    cache, _ = make_cache(tmp_path / "ckpt", tokenizer, data)
    first = cache.load_or_build(build(tokenizer))
    assert first.status == "miss" and Path(first.path, tokenized_cache.MARKER).is_file()
    second = cache.load_or_build(lambda: pytest.fail("a verified cache must not be rebuilt"))
    assert second.status == "hit" and second.train["input_ids"] == first.train["input_ids"]
    assert second.eval is None and Path(first.path).parent.name == tokenized_cache.CACHE_DIR


def test_a_corrupt_cache_file_is_refused_by_name_kept_aside_and_rebuilt(tmp_path, tokenizer, caplog):
    data = tmp_path / "data"
    synthetic.write_jsonl(data / "train.jsonl", synthetic.cls_examples(50, seed=1))
    cache, _ = make_cache(tmp_path / "ckpt", tokenizer, data)
    cache.load_or_build(build(tokenizer))
    arrow = next(Path(cache.path, "train").glob("*.arrow"))
    blob = bytearray(arrow.read_bytes())
    blob[-20] ^= 0xFF  # same size, other content
    arrow.write_bytes(bytes(blob))
    with caplog.at_level("WARNING", logger="hftrain"):
        result = cache.load_or_build(build(tokenizer))
    assert result.status == "rebuilt" and f"file train/{arrow.name} does not match its content hash" in result.refused
    assert cache.path in result.refused and any("refused; rebuilding" in r.getMessage() for r in caplog.records)
    aside = Path(f"{cache.path}{tokenized_cache.REFUSED_TAG}1")
    assert aside.is_dir() and (aside / "train" / arrow.name).read_bytes() == bytes(blob)  # kept, not deleted
    assert cache.load_or_build(build(tokenizer)).status == "hit"
    os.remove(Path(cache.path, tokenized_cache.MARKER))  # an interrupted write
    assert "no completion marker" in cache.load_or_build(build(tokenizer)).refused


def test_a_changed_tokenizer_data_object_or_argument_is_another_cache(tmp_path, tokenizer):
    data = tmp_path / "data"
    synthetic.write_jsonl(data / "train.jsonl", synthetic.cls_examples(50, seed=1))
    root = tmp_path / "ckpt"
    cache, _ = make_cache(root, tokenizer, data)
    cache.load_or_build(build(tokenizer))
    other_tokenizer = synthetic.build_tokenizer("roberta")
    for changed, _ in (make_cache(root, other_tokenizer, data), make_cache(root, tokenizer, data, max_seq_length=64)):
        assert changed.digest != cache.digest
        assert changed.load_or_build(build(tokenizer)).status == "miss"  # rebuilt under its own fingerprint
    synthetic.write_jsonl(data / "train.jsonl", synthetic.cls_examples(50, seed=2))  # the data object changed
    changed, _ = make_cache(root, tokenizer, data)
    assert changed.digest != cache.digest and changed.load_or_build(build(tokenizer)).status == "miss"
    same, _ = make_cache(root, tokenizer, data, preprocessing_num_workers=2)  # a speed setting only
    assert same.digest == changed.digest


def test_a_marker_written_for_other_inputs_is_refused_as_foreign(tmp_path, tokenizer):
    data = tmp_path / "data"
    synthetic.write_jsonl(data / "train.jsonl", synthetic.cls_examples(50, seed=1))
    cache, _ = make_cache(tmp_path / "ckpt", tokenizer, data)
    cache.load_or_build(build(tokenizer))
    marker_path = Path(cache.path, tokenized_cache.MARKER)
    marker = json.loads(marker_path.read_text())
    marker["fingerprint"] = "f" * 64  # e.g. copied from another run's checkpoint prefix
    marker_path.write_text(json.dumps(marker))
    result = cache.load_or_build(build(tokenizer))
    assert result.status == "rebuilt" and "made for other inputs" in result.refused


def test_a_reading_host_does_not_write_or_move_anything(tmp_path, tokenizer):
    data = tmp_path / "data"
    synthetic.write_jsonl(data / "train.jsonl", synthetic.cls_examples(50, seed=1))
    cache, _ = make_cache(tmp_path / "ckpt", tokenizer, data)
    reader = tokenized_cache.TokenizedCache(str(tmp_path / "ckpt"), cache.digest, cache.inputs, writer=False)
    assert reader.load_or_build(build(tokenizer)).status == "skipped" and not Path(reader.path).exists()


def test_this_runs_superseded_caches_are_deleted_and_nothing_else(tmp_path, tokenizer, monkeypatch, caplog):
    """Once this attempt's cache is in place, this run's own caches for other inputs are deleted (their markers name
    the run); another run's, a refused one, another host's, user files and files a marker does not list are kept."""
    from contract import stall_board

    data, root = tmp_path / "data", tmp_path / "ckpt"
    synthetic.write_jsonl(data / "train.jsonl", synthetic.cls_examples(50, seed=1))
    monkeypatch.setenv(stall_board.VARIABLE, "b" * 32)  # another run's cache, in this prefix (copied by someone)
    foreign, _ = make_cache(root, tokenizer, data, max_seq_length=32)
    foreign.load_or_build(build(tokenizer))
    monkeypatch.setenv(stall_board.VARIABLE, "a" * 32)
    old, _ = make_cache(root, tokenizer, data, max_seq_length=64)
    assert old.load_or_build(build(tokenizer)).deleted == []  # the foreign one is not this run's
    older, _ = make_cache(root, tokenizer, data, max_seq_length=96)
    older.load_or_build(build(tokenizer))  # deletes `old`, this run's
    assert not Path(old.path).exists() and Path(foreign.path).is_dir()
    Path(older.path, "notes.txt").write_text("mine")  # a user's file inside this run's cache
    refused = Path(f"{older.path}{tokenized_cache.REFUSED_TAG}1")
    refused.mkdir()
    (refused / tokenized_cache.MARKER).write_text(Path(older.path, tokenized_cache.MARKER).read_text())
    other_host = tokenized_cache.TokenizedCache(str(root), "c" * 64, {}, host="algo-2")
    Path(other_host.path).mkdir()
    (root / tokenized_cache.CACHE_DIR / "user-dir").mkdir()
    current, _ = make_cache(root, tokenizer, data)
    with caplog.at_level("INFO", logger="hftrain"):
        result = current.load_or_build(build(tokenizer))
    assert result.status == "miss" and result.deleted == [older.path]
    assert sorted(p.name for p in Path(older.path).rglob("*")) == ["notes.txt"]  # only what the marker did not list
    assert any("kept 1 file(s) its marker does not list: notes.txt" in r.getMessage() for r in caplog.records)
    assert refused.is_dir() and Path(other_host.path).is_dir() and Path(foreign.path).is_dir()
    assert (root / tokenized_cache.CACHE_DIR / "user-dir").is_dir()
    assert current.load_or_build(lambda: pytest.fail("rebuilt")).status == "hit"  # its own cache: never deleted
    # without the run's token nothing is proved: nothing is deleted
    monkeypatch.delenv(stall_board.VARIABLE)
    again, _ = make_cache(root, tokenizer, data, max_seq_length=48)
    assert again.load_or_build(build(tokenizer)).deleted == [] and Path(current.path).is_dir()
    # a reading host deletes nothing
    monkeypatch.setenv(stall_board.VARIABLE, "a" * 32)
    reader = tokenized_cache.TokenizedCache(str(root), again.digest, again.inputs, writer=False)
    assert reader.load_or_build(lambda: pytest.fail("rebuilt")).deleted == []
