"""The progress lines the docs show (README.md's local run, docs/training.md's entry point) are what the training
code writes: each sample, read back into its values, is written again by contract/progress_lines.py character for
character (docs that run)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from contract.progress_lines import eval_line, train_line

REPO = Path(__file__).resolve().parents[2]
TRAIN = re.compile(r"\[train\] step (\d+)/(\d+) \(\d+%\) loss=(\S+) lr=(\S+) samples/s=(\S+) elapsed=(\S+) eta=(\S+)")
EVAL = re.compile(r"\[eval\] step (\d+)/(\d+) (.*)")


def seconds(clock: str) -> int:
    h, m, s = (int(x) for x in clock.split(":"))
    return 3600 * h + 60 * m + s


def samples(pattern: re.Pattern[str]) -> list[tuple[str, re.Match[str]]]:
    found = []
    for doc in ("README.md", "docs/training.md"):
        for line in (REPO / doc).read_text().splitlines():
            match = pattern.search(line)
            if match and line.lstrip().startswith(("[", match[0][:6])):
                found.append((doc, match))
    return found


def test_the_train_lines_shown_are_written_so() -> None:
    shown = samples(TRAIN)
    assert {doc for doc, _ in shown} == {"README.md", "docs/training.md"}
    for doc, m in shown:
        written = train_line(step=int(m[1]), max_steps=int(m[2]), loss=float(m[3]), lr=float(m[4]),
                             samples_per_second=float(m[5]), elapsed=seconds(m[6]), eta=seconds(m[7]))
        assert written == m[0], doc


def test_the_eval_lines_shown_are_written_so() -> None:
    shown = samples(EVAL)
    assert shown
    for doc, m in shown:
        metrics = {k: float(v) for k, v in (pair.split("=") for pair in m[3].split())}
        assert eval_line(step=int(m[1]), max_steps=int(m[2]), metrics=metrics) == m[0], doc


@pytest.mark.parametrize("text, source", [
    ("Training job interrupted: spot capacity reclaimed (injected locally)", "local_mode/sagemaker/training_job.py")])
def test_the_local_run_lines_shown_come_from_the_code(text: str, source: str) -> None:
    assert text in (REPO / "README.md").read_text() and text in (REPO / source).read_text()
