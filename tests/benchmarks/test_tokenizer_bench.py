"""benchmarks/bench_tokenizer.py: its corpus is valid UTF-8 at any size, the cost curve's generator parameter sets
the distinct words, the model of N instances never goes past the map processes it measured, and the whole
benchmark runs from the command line on tiny settings."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "benchmarks" / "bench_tokenizer.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_tokenizer", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# 150 MB in 32 files was `--size-gb 0.15`, which failed before: a file's last chunk was cut at a byte count, in the
# middle of a line and sometimes of a character. The same geometry at 1/1000 of the size, and other sizes.
@pytest.mark.parametrize("size", [150_000, 150_001, 1_000_003, 2_345_678])
def test_corpus_is_valid_utf8_and_whole_lines_at_any_size(bench, tmp_path, size):
    files = bench.generate_corpus(tmp_path / "c", size, n_files=32, n_types=5_000)
    total = 0
    for f in files:
        data = f.read_bytes()
        data.decode("utf-8")  # strict: raises on a cut character
        assert not data or data.endswith(b"\n"), f"{f.name} ends in the middle of a line"
        total += len(data)
    assert size - 32 * 400 <= total <= size  # each file within a line (~150 bytes) of its share, never over


def test_every_type_puts_each_lexicon_word_in_the_corpus(bench, tmp_path):
    n_types = 3_000
    files = bench.generate_corpus(tmp_path / "c", 20_000, n_files=4, n_types=n_types, every_type=True)
    words = {w for f in files for w in f.read_text(encoding="utf-8").split()}
    assert len(words) >= n_types  # all lexicon words (distinct by construction) are there
    few = {w for f in bench.generate_corpus(tmp_path / "d", 20_000, n_files=4, n_types=n_types)
           for w in f.read_text(encoding="utf-8").split()}
    assert len(few) < n_types  # without it, a small sample misses part of the lexicon


def test_lexicon_has_as_many_words_as_asked(bench):
    import numpy as np

    for n in (10, 50_000):
        lex = bench._lexicon(n, np.random.default_rng(0))
        assert len(lex) == n == len(set(lex))


def test_the_model_never_reports_more_instances_than_measured(bench):
    maps = [{"wall": 10.0, "cpu": 8.0} for _ in range(4)]
    reduce = {"wall": 5.0, "cpu": 4.0}
    shown, note = bench.modeled_instances(len(maps))
    assert shown == [1, 4]
    assert note == "not modeled: 16 instances (only 4 map process(es) measured; run with --hosts 16)"
    assert bench.modeled_instances(16) == ([1, 4, 16], "")
    assert bench.modeled_instances(2)[0] == [1, 2] and "4, 16 instances" in bench.modeled_instances(2)[1]
    assert bench.modeled_wall(maps, 1.0, reduce, 4, 2) == pytest.approx(9.0 + 1.0 + 5.0)
    assert bench.modeled_wall(maps, 1.0, reduce, 1, 2) == pytest.approx(4 * 9.0 + 1.0 + 5.0)
    with pytest.raises(ValueError, match="16 instances: only 4 map process"):
        bench.modeled_wall(maps, 1.0, reduce, 16, 2)


def _curve_row(words: int, cpu: float, rss: float) -> dict:
    return {"bytes": 10**8, "reduce": {"wall": cpu, "cpu": cpu, "rss": rss},
            "stats": {"unique_words": words, "merges": 31739, "learning": {"characters": 9 * words}}}


def test_curve_table_per_million_words_and_growth(bench):
    linear = [_curve_row(10**6, 2.0, 4e8), _curve_row(8 * 10**6, 15.0, 3.1e9)]
    lines = bench.curve_table(linear, 2)
    assert lines[2].startswith("| 1.00 M | 9.0 M | 100 MB | 31,739 | 2.0 s | 2.0 s | 400 MB | 2.00 | 400 |")
    assert "not run" in lines[2]
    assert lines[-1].endswith("(no faster than linear)")
    steep = [_curve_row(10**6, 2.0, 4e8), _curve_row(8 * 10**6, 40.0, 3.1e9)]
    assert bench.curve_table(steep, 2)[-1].endswith("(FASTER than linear)")


@pytest.mark.slow
def test_benchmark_runs_on_tiny_settings_from_the_command_line(tmp_path):
    """The script as `make bench` runs it (its own process, no PYTHONPATH), on 2 simulated hosts and one curve
    point with the single-node trainer beside it: identical results, the table, the curve (about 20 s)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--size-gb", "0.001", "--hosts", "2", "--files", "4", "--vocab-size", "400",
         "--distinct-words", "0.01", "--curve", "0.004", "--curve-baseline-max", "1", "--curve-body-mb", "0.2",
         "--workdir", str(tmp_path / "work")],
        env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path,
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-3000:] + proc.stderr[-3000:]
    assert "| identical vocab + merges " in out and "| yes |" in out.split("identical vocab + merges")[1][:60]
    assert "modeled wall, 2 instance(s)" in out and "modeled wall, 16 instance(s)" not in out
    assert "not modeled: 4, 16 instances (only 2 map process(es) measured" in out
    assert "learning: native" in out
    results = json.loads((tmp_path / "work" / "results.json").read_text())
    (point,) = results["raw"]["curve"]
    assert point["exact"] and point["stats"]["unique_words"] >= 4_000
    assert any(line.startswith("| distinct words |") for line in results["curve"])
