"""train.py's first-line watch (hftrain/stall/import_watch.py): a hang in the imports, before the stall watchdog
exists, is named and ends the process within stall_startup_minutes."""

from __future__ import annotations

import time

import pytest

from contract import failure_causes as causes
from hftrain.stall import import_watch


@pytest.mark.parametrize(("argv", "minutes"), [([], 60.0), (["--stall_startup_minutes", "0.5"], 0.5),
                                               (["--stall_startup_minutes=2"], 2.0),
                                               (["--stall_minutes", "off"], None),
                                               (["--stall_minutes", '"off"', "--stall_startup_minutes", "3"], None),
                                               (["--stall_startup_minutes", "x"], 60.0)])
def test_the_limit_comes_from_the_toolkits_arguments(argv, minutes):
    assert import_watch.minutes_from_argv(argv) == minutes


def test_the_text_names_the_rank_host_and_phase_as_a_stall():
    text = import_watch.message(0.5, "imports", {"RANK": "3", "LOCAL_RANK": "1", "SM_CURRENT_HOST": "algo-2"})
    assert text.startswith("stall watchdog: rank 3 (algo-2, local rank 1) made no progress for 0.5 min in start-up "
                           "phase imports")
    assert causes.classify(text) == causes.STALLED and causes.named_rank(text) == (3, "algo-2")


def test_a_hang_ends_the_process_and_a_stop_in_time_does_not(tmp_path, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    exits: list[int] = []
    import_watch._STOP.clear()
    thread = import_watch.start(["--stall_startup_minutes", "0.005"], exit=exits.append)  # 0.3 s
    thread.join(5)
    assert exits == [import_watch.EXIT_CODE]
    assert "in start-up phase imports" in (tmp_path / "output" / "failure").read_text()
    exits.clear()
    thread = import_watch.start(["--stall_startup_minutes", "0.005"], exit=exits.append)
    import_watch.stop()
    thread.join(5)
    time.sleep(0.1)
    assert exits == [] and not thread.is_alive()
