"""benchmarks/bench_faults.py: each fault through `python -m local_mode run` on 2 hosts (issue 34): the verdict, the
rank named, retried or not; the slow-but-alive rank must not end the run."""

from __future__ import annotations

import pytest

from benchmarks import bench_faults


def row(case: str, **changes) -> dict:
    fault, verdict, rank, action, status = bench_faults.CASES[case]
    return {"case": case, "verdict": verdict, "rank": rank, "action": action, "status": status, "straggler": False,
            "straggler_windows": 3, "straggler_rank": None, "straggler_in_summary": [],
            "fault_to_straggler_seconds": None,
            "fault_to_action_seconds": 33.0 if verdict else None,
            "stalled_share": 0.4 if verdict == "stalled" else 0.0, "recovering_share": 0.02,
            "unaccounted_share": 0.01, **changes}


def test_a_row_is_correct_only_with_the_expected_verdict_rank_and_action():
    assert bench_faults.expected(row("sigkill"))
    assert not bench_faults.expected(row("sigkill", verdict="exception"))  # the peer's error taken for the cause
    assert not bench_faults.expected(row("sigkill", action="new-attempt"))  # a new job where one in place would do
    assert not bench_faults.expected(row("slow", verdict="stalled", rank=1, action="in-place"))  # a false positive
    assert not bench_faults.expected(row("sigstop", rank=0))
    assert not bench_faults.expected(row("raise", action="in-place", status="SUCCEEDED"))  # a bug looped over
    summary = bench_faults.summarize("sigstop", [row("sigstop"), row("sigstop"), row("sigstop", rank=0)])
    assert summary["ok"] == "2/3" and summary["verdict"] == "stalled 3/3" and summary["rank"] == "1 2/3"
    # a straggler named on a healthy run is a false positive; on a slowed rank it is the point
    assert not bench_faults.expected(row("healthy-uneven", straggler=True))
    assert not bench_faults.expected(row("healthy", straggler=True))
    assert bench_faults.expected(row("slow", straggler=True))
    assert not bench_faults.expected(row("healthy", straggler_windows=0))  # no window looked: nothing shown
    assert bench_faults.summarize("healthy", [row("healthy"), row("healthy", straggler=True)])["stragglers"] == "1/2"
    # the straggler case: its rank named in the log and in the summary, and no verdict
    named = {"straggler": True, "straggler_rank": 1, "straggler_in_summary": [1], "fault_to_straggler_seconds": 5.0}
    assert bench_faults.expected(row("straggler", **named))
    assert not bench_faults.expected(row("straggler"))  # not named: a straggler missed
    assert not bench_faults.expected(row("straggler", **{**named, "straggler_in_summary": []}))  # the summary lies
    assert not bench_faults.expected(row("straggler", **{**named, "straggler_rank": 0}))  # the wrong rank
    assert not bench_faults.expected(row("straggler", **named, verdict="stalled", rank=1, action="in-place"))


def test_uneven_shards_deal_the_same_rows_unevenly(tmp_path):
    train = tmp_path / "data" / "datasets" / "x" / "train"
    train.mkdir(parents=True)
    rows = [f'{{"text": "row {i}", "label": "a"}}' for i in range(1200)]
    for i in range(4):
        (train / f"part-{i}.jsonl").write_text("".join(r + "\n" for r in rows[i::4]))
    copy = bench_faults.uneven(tmp_path / "data", tmp_path)
    counts = [len((copy / "datasets/x/train" / f"part-{i}.jsonl").read_text().splitlines()) for i in range(4)]
    assert counts == list(bench_faults.UNEVEN_ROWS)
    dealt = sorted(line for i in range(4) for line in (copy / "datasets/x/train" / f"part-{i}.jsonl").read_text()
                   .splitlines())
    assert set(dealt) <= set(rows) and len(set(dealt)) == sum(bench_faults.UNEVEN_ROWS)  # no row twice


@pytest.mark.slow
def test_each_fault_case_once_through_the_local_mode(capsys):
    """A SIGKILLed rank is named with its signal and recovered in place; a slow but alive rank is not ended; a
    SIGSTOPped rank is found stalled and recovered in place; a background checkpoint write that hangs is found when
    the next save waits for it, and recovered in place; a rank whose compute is 1.5x as slow is named a straggler
    in the log and the summary, and not ended (one run each, as `bench_faults.py --repeat 1` runs them)."""
    code = bench_faults.main(["--repeat", "1", "--case", "sigkill", "--case", "slow", "--case", "sigstop",
                              "--case", "upload", "--case", "straggler"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "case=sigkill | runs=1 | ok=1/1 | verdict=signal 1/1 | rank=1 1/1" in out
    assert "action=in-place 1/1" in out
    assert "case=slow | runs=1 | ok=1/1 | verdict=None 1/1" in out
    assert "case=straggler | runs=1 | ok=1/1 | verdict=None 1/1 | rank=None 1/1 | stragglers=1/1" in out
    assert "case=sigstop | runs=1 | ok=1/1 | verdict=stalled 1/1 | rank=1 1/1" in out
    assert "case=upload | runs=1 | ok=1/1 | verdict=stalled 1/1 | rank=1 1/1" in out


@pytest.mark.slow
def test_start_up_and_save_hangs_once_through_the_local_mode(capsys):
    """A hang in train.py's imports (before the watchdog: the first-line watch names it; a new attempt), in a
    start-up phase (data_load) and inside a checkpoint save: each found stalled, rank 1 named, and the run completes
    (the other start-up phases share the data_load path: bench_faults.py --case startup-setup ... runs them)."""
    code = bench_faults.main(["--repeat", "1", "--case", "startup-imports", "--case", "startup-data",
                              "--case", "save"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "case=startup-imports | runs=1 | ok=1/1 | verdict=stalled 1/1 | rank=1 1/1" in out
    assert "action=new-attempt 1/1" in out
    assert "case=startup-data | runs=1 | ok=1/1 | verdict=stalled 1/1 | rank=1 1/1" in out
    assert "case=save | runs=1 | ok=1/1 | verdict=stalled 1/1 | rank=1 1/1" in out
