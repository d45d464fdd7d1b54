"""train.py's first-line watch (hftrain/stall/import_watch.py): a hang in the imports, before the stall watchdog
exists, is named and ends the process within stall_startup_minutes."""

from __future__ import annotations

import json
import time

import pytest

from contract import failure_causes as causes
from contract import stall_records
from hftrain.stall import import_watch


@pytest.mark.parametrize(("argv", "seconds"), [([], 30 * 60.0), (["--stall_startup_minutes", "0.5"], 30.0),
                                               (["--stall_startup_minutes=2"], 120.0),
                                               (["--stall_startup_minutes", '"auto"'], 30 * 60.0),
                                               (["--stall_minutes", "off"], None),
                                               (["--stall_minutes", '"off"', "--stall_startup_minutes", "3"], None),
                                               (["--stall_startup_minutes", "x"], 30 * 60.0)])
def test_the_limit_comes_from_the_toolkits_arguments(argv, seconds, tmp_path, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))  # no progress file: auto is the prior
    limit = import_watch.limit_from_argv(argv)
    assert (limit[0] if limit else None) == seconds


def test_auto_follows_the_longest_start_up_this_run_measured(tmp_path, monkeypatch):
    """A restart's import watch reads the start-ups earlier attempts measured from the restored progress file:
    3 x the longest (400 s -> 20 min), at least 10 min."""
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path / "elsewhere"))
    checkpoints = tmp_path / "ckpt"
    checkpoints.mkdir()
    (checkpoints / "_progress.json").write_text(json.dumps({"step": 40, "startup_seconds": [120.5, 400.0, 90]}))
    seconds, name = import_watch.limit_from_argv(["--checkpoint_dir", str(checkpoints)])
    assert seconds == 1200.0 and "3 x the longest start-up this run measured, 400 s" in name
    (checkpoints / "_progress.json").write_text(json.dumps({"step": 40, "startup_seconds": [20.0]}))
    assert import_watch.limit_from_argv(["--checkpoint_dir", str(checkpoints)])[0] == 600.0  # the floor
    (checkpoints / "_progress.json").write_text("{not json")
    assert import_watch.limit_from_argv(["--checkpoint_dir", str(checkpoints)])[0] == 1800.0  # the prior
    # a number in the spec wins over what was measured
    assert import_watch.limit_from_argv(["--checkpoint_dir", str(checkpoints), "--stall_startup_minutes", "2"]) == \
        (120.0, "stall.startup_minutes=2")


def test_the_text_names_the_rank_host_and_phase_as_a_stall():
    text = import_watch.message(30, "imports", "stall.startup_minutes=0.5",
                                {"RANK": "3", "LOCAL_RANK": "1", "SM_CURRENT_HOST": "algo-2"})
    assert text.startswith("stall watchdog: rank 3 (algo-2, local rank 1) made no progress for 0.5 min in start-up "
                           "phase imports")
    assert text.endswith("limit stall.startup_minutes=0.5")
    assert causes.classify(text) == causes.STALLED and causes.named_rank(text) == (3, "algo-2")


def test_a_hang_ends_the_process_and_a_stop_in_time_does_not(tmp_path, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    exits: list[int] = []
    import_watch._STOP.clear()
    thread = import_watch.start(["--stall_startup_minutes", "0.005"], exit=exits.append)  # 0.3 s
    thread.join(5)
    assert exits == [import_watch.EXIT_CODE]
    assert "in start-up phase imports" in (tmp_path / "output" / "failure").read_text()
    # the stall record the goodput ledger counts as `stalled` (an attempt that printed nothing else)
    (record,) = stall_records.parse_records((tmp_path / "checkpoints" / "_stalls.json").read_text())
    assert record["phase"] == "imports" and record["step"] is None and record["rank"] == 0
    assert 0.25 <= record["detected_at"] - record["last_progress_at"] < 3
    assert record["reason"].startswith("stall watchdog: rank 0 (algo-1, local rank 0) made no progress")
    exits.clear()
    thread = import_watch.start(["--stall_startup_minutes", "0.005"], exit=exits.append)
    import_watch.stop()
    thread.join(5)
    time.sleep(0.1)
    assert exits == [] and not thread.is_alive()
