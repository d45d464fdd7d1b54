"""benchmarks/bench_recovery.py: a recovery in place against a new attempt, fault to first step (issue 33 point 4)."""

from __future__ import annotations

import re

import pytest

from benchmarks import bench_recovery


@pytest.mark.slow
def test_a_recovery_in_place_costs_at_least_3x_less_than_a_new_attempts_start(capsys):
    code = bench_recovery.main(["--repeat", "1"])
    out = capsys.readouterr().out
    assert code == 0, out
    found = re.search(r"recovery in place ([0-9.]+) s, new attempt's download and start-up ([0-9.]+) s: ([0-9.]+)x",
                      out)
    assert found, out
    in_place, new, ratio = map(float, found.groups())
    assert in_place > 0 and new / in_place >= 3 and ratio >= 3
