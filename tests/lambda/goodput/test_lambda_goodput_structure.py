"""The goodput ledger's modules (lambda/goodput/ledger.py and the modules it is built from): that the parts do not
import it back, the shared value readers, and that every ledger adds up over many generated runs of interrupted,
killed and stalled attempts."""

from __future__ import annotations

import ast
import random
from datetime import UTC, datetime
from pathlib import Path

import pytest
from testkit.goodput_lines import JOB, T, assert_adds_up, attempt_lines, describe, stream

from hfsm_lambda.goodput import ledger as goodput
from hfsm_lambda.goodput import values as goodput_values
from hfsm_lambda.goodput.text import interruption_line, summary_lines

LAMBDA = Path(__file__).resolve().parents[3] / "lambda"


def test_the_ledgers_parts_do_not_import_the_ledger():
    """ledger.py imports its parts; a part importing the ledger back would be a cycle (sources.py, which reads AWS
    for the ledger, is the one module that may). tests/test_import_graph.py checks every module for cycles."""
    parts = sorted(path for path in (LAMBDA / "goodput").glob("*.py") if path.stem not in ("sources", "ledger"))
    assert len(parts) >= 6
    for path in parts:
        tree = ast.parse(path.read_text())
        imported = {(node.module or "") + "." + alias.name for node in ast.walk(tree)
                    if isinstance(node, ast.ImportFrom) for alias in node.names}
        imported |= {(node.module or "") for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        assert not any(name.endswith("goodput.ledger") or name.startswith("hfsm_lambda.goodput.ledger")
                       for name in imported), path.name


def test_values_are_read_leniently():
    moment = datetime.fromtimestamp(T, UTC)
    assert goodput_values.epoch(moment) == goodput_values.epoch(moment.replace(tzinfo=None)) == T
    assert goodput_values.epoch(moment.isoformat().replace("+00:00", "Z")) == T
    assert [goodput_values.epoch(v) for v in (True, "", "soon", None)] == [None] * 4
    assert [goodput_values.number(v) for v in (3, 2.5, True, None, "4")] == [3.0, 2.5, 0.0, 0.0, 0.0]
    assert goodput_values.iso(T + 0.25) == "2027-01-15T08:00:00.250Z"


def _run(rng: random.Random) -> tuple[dict, dict, list]:
    """A job of one to three attempts: each killed at a random step (some during a save, some stalled before
    the kill), the last one completed; 1 or 2 instances, some streams missing."""
    transitions, lines, stalls = [], [], []
    t, start_step, count = 0.0, 0, rng.choice([1, 2])
    attempts = rng.randint(1, 3)
    for i in range(attempts):
        final = i == attempts - 1
        steps = rng.randint(1, 30)
        saves = tuple(sorted(rng.sample(range(start_step + 1, start_step + steps + 1), k=min(steps, 2))))
        killed_in_save = None if final or rng.random() < 0.5 else start_step + steps
        mine = attempt_lines(t0=t + 2, start_step=start_step, steps=steps, saves=saves, end=final,
                             killed_in_save=killed_in_save)
        stop = mine[-1][0] - T + (1.0 if final else rng.uniform(0.1, 200))
        transitions += [("Starting", t, t + 1), ("Downloading", t + 1, t + 2), ("Training", t + 2, stop)]
        if rng.random() < 0.9:
            lines.append(stream(str(i + 1), mine))
        if not final and rng.random() < 0.3:
            stalls.append({"job": JOB, "last_progress_at": mine[-1][0], "detected_at": T + stop - 1})
        if not final:
            transitions.append(("Interrupted", stop, stop + 3))
            t = stop + 3
            start_step = max([s for s in saves if s != killed_in_save] or [0])
        else:
            transitions += [("Uploading", stop, stop + 1), ("Completed", stop + 1, stop + 1)]
    return describe(transitions, count=count), {JOB: lines}, stalls


@pytest.mark.parametrize("seed", range(60))
def test_every_generated_ledger_adds_up_and_its_text_reads(seed):
    desc, streams, stalls = _run(random.Random(seed))
    ledger = goodput.ledger([desc], streams, stalls)
    assert_adds_up(ledger)
    assert ledger["billed_seconds"] == ledger["reported_billed_seconds"]
    assert len(ledger["interruptions"]) == len(ledger["attempts"]) - 1
    assert ledger["parts"]["stalled"] >= 0
    if not stalls:  # (a stall whose window overlaps a save it was killed in is counted twice: unaccounted < 0)
        assert all(part >= -0.01 for part in ledger["parts"].values())  # -0.001: rounding against whole seconds
    assert summary_lines(ledger)[0].startswith("Goodput: ")
    for record in ledger["interruptions"]:
        assert interruption_line(record).startswith(f"{record['how']} of {JOB}: ")
        assert record["lost_steps"] is None or record["lost_steps"] >= 0
