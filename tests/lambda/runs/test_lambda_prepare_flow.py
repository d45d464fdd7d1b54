"""Prepare reads one way: parse -> plan -> build every request once -> check, each module entered once."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from hfsm_lambda.plan import job_requests
from hfsm_lambda.runs import prepare as runs

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples").glob("*.json"))
STAGES = {"spec.run_spec", "plan.planning", "plan.job_requests", "plan.preflight"}


def _entered_modules(call) -> list[str]:
    """The order in which the stage modules' functions are entered (consecutive calls in one module merged)."""
    order: list[str] = []

    def profile(frame, event, arg):
        if event == "call":
            module = str(frame.f_globals.get("__name__")).removeprefix("hfsm_lambda.")
            if module in STAGES and (not order or order[-1] != module):
                order.append(module)

    sys.setprofile(profile)
    try:
        call()
    finally:
        sys.setprofile(None)
    return order


def test_each_stage_module_is_entered_once_in_order(settings):
    for example in EXAMPLES:
        spec = json.loads(example.read_text())
        order = _entered_modules(lambda spec=spec: runs.prepare_run(spec, settings))
        assert order == ["spec.run_spec", "plan.planning", "plan.job_requests", "plan.preflight"], (example.name, order)


def test_every_request_is_built_once(settings, monkeypatch):
    tokenizer_example = next(p for p in EXAMPLES if p.name == "tokenizer-text-classification.json")
    spec = json.loads(tokenizer_example.read_text())  # training attempts and both stages
    built: list[str] = []
    for name in ("training_request", "processing_request"):
        original = getattr(job_requests, name)

        def counting(*args, _original=original, _name=name, **kwargs):
            built.append(f"{_name}:{args[2] if len(args) > 2 else kwargs}")
            return _original(*args, **kwargs)

        monkeypatch.setattr(job_requests, name, counting)
    run = runs.prepare_run(spec, settings)
    expected = [f"training_request:{a}" for a in range(run.max_attempts)]
    expected += ["processing_request:map", "processing_request:reduce"]
    assert built == expected
