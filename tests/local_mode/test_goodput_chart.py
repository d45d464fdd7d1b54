"""The report's goodput section: its messages without a ledger, and the chart and table of one."""

from __future__ import annotations

from pathlib import Path

from local_mode.goodput_chart import goodput_section


def test_no_ledger_an_error_or_no_attempts_is_one_sentence(tmp_path: Path) -> None:
    assert goodput_section(tmp_path, None) == [
        "No goodput ledger: the run did not reach its summary (see the failure above)."]
    assert goodput_section(tmp_path, {"error": "no logs"}) == ["The goodput ledger could not be computed: no logs"]
    assert goodput_section(tmp_path, {"attempts": []}) == ["No training attempt was billed."]
    assert not (tmp_path / "goodput.png").exists()


def test_a_ledger_draws_the_chart_and_tables_the_parts_any_attempt_has(tmp_path: Path) -> None:
    ledger = {"ratio": 0.5, "billed_seconds": 300, "attempts": [
        {"attempt": 0, "job_name": "hfsm-dev-demo-train0", "restart": "fresh", "billed_seconds": 200, "ratio": 0.6,
         "parts": {"startup": 20, "productive": 120, "replayed": 0, "unaccounted": 60}},
        {"attempt": 1, "job_name": "hfsm-dev-demo-train1", "restart": "checkpoint-100", "billed_seconds": 100,
         "ratio": None, "parts": {"startup": 10.25, "productive": 30, "replayed": 60}},
    ]}
    lines = goodput_section(tmp_path, ledger)
    assert (tmp_path / "goodput.png").stat().st_size > 0
    assert lines == [
        "![goodput per attempt](goodput.png)", "", "Instance-seconds per part:", "",
        "| attempt | billed | goodput | startup | productive | replayed | unaccounted |",
        "|---|---|---|---|---|---|---|",
        "| #0 train0 start fresh | 200.0 | 60.0% | 20.0 | 120.0 | 0.0 | 60.0 |",
        "| #1 train1 start checkpoint-100 | 100.0 | 0.0% | 10.2 | 30.0 | 60.0 | 0.0 |",
    ]
