"""docs/run_spec.md documents every spec field and shows the example files as they are."""

from __future__ import annotations

import json
import re
from pathlib import Path

import run_spec

REPO = Path(__file__).resolve().parents[2]
DOC = (REPO / "docs" / "run_spec.md").read_text()
FULL = {"version": 1, "name": "x", "description": "d", "task": "summarization", "model": "t5-small",
        "data": {"train": {"s3": "datasets/a/", "distribution": "ShardedByS3Key", "input_mode": "File"},
                 "validation": {"fsx": "/val"}},
        "tokenizer": {"type": "bpe"}, "compute": {"processes_per_host": 2},
        "distribution": {"strategy": "fsdp", "fsdp": {}}, "spot": {}, "max_runtime_seconds": 60,
        "checkpoint": {}, "fallback": {"options": [{"instance_type": "ml.g5.2xlarge", "spot": False}]},
        "hyperparameters": {}, "tags": {}, "local": {"interrupt_at_step": 1}}


def _paths(value, prefix=""):
    if not isinstance(value, dict) or prefix in ("hyperparameters", "tags"):
        yield prefix
        return
    if prefix:
        yield prefix
    for key, item in value.items():
        name = "<channel>" if prefix == "data" else key
        path = f"{prefix}.{name}" if prefix else name
        if isinstance(item, list) and item and isinstance(item[0], dict):
            yield path
            for sub in item[0]:
                yield f"{path}[i].{sub}"
        else:
            yield from _paths(item, path)


def test_every_field_is_documented(fsx_settings):
    spec = run_spec.parse_spec(FULL, fsx_settings)
    documented = set(re.findall(r"^\| `([^`]+)` \|", DOC, flags=re.MULTILINE))
    missing = sorted(set(_paths(spec)) - documented)
    assert missing == []


def test_examples_appear_verbatim():
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", DOC, flags=re.DOTALL)]
    for path in sorted((REPO / "examples").glob("*.json")):
        assert json.loads(path.read_text()) in blocks, path.name
