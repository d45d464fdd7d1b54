"""docs/run_spec.md and docs/run-spec.schema.json are generated from the declaration and show the examples as
they are; every example validates against the schema with a standard validator (jsonschema)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import jsonschema
import pytest

from hfsm_lambda import config_fields, settings
from hfsm_lambda.spec import run_spec
from tools import spec_docs

REPO = Path(__file__).resolve().parents[3]
DOC = (REPO / "docs" / "run_spec.md").read_text()
SCHEMA = json.loads((REPO / "docs" / "run-spec.schema.json").read_text())
EXAMPLES = sorted((REPO / "examples").glob("*.json"))
FULL = {"version": 1, "name": "x", "description": "d", "task": "summarization", "model": "t5-small",
        "data": {"train": {"s3": "datasets/a/", "distribution": "ShardedByS3Key", "input_mode": "File"},
                 "validation": {"fsx": "/val"}},
        "tokenizer": {"type": "bpe"}, "compute": {"instance_type": "ml.g5.12xlarge", "processes_per_host": 2},
        "distribution": {"strategy": "fsdp", "fsdp": {}}, "spot": {}, "max_runtime_seconds": 3600,
        "checkpoint": {}, "fallback": {"options": [{"instance_type": "ml.g5.12xlarge", "spot": False}]},
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


def test_generated_docs_and_schema_are_current():
    assert spec_docs.render_doc(DOC) == DOC, "stale: run make docs"
    assert spec_docs.json_schema() == SCHEMA, "stale: run make docs"


def test_contracts_settings_table_is_the_declaration(monkeypatch):
    text = (REPO / "CONTRACTS.md").read_text()
    assert spec_docs.render_contracts(text) == text, "stale: run make docs"
    table = spec_docs.settings_table()
    for f in dataclasses.fields(settings.Settings):
        assert f"| `{f.name}` |" in table, f.name

    @dataclasses.dataclass(frozen=True, kw_only=True)
    class WithNewSetting(settings.Settings):
        new_limit: int = config_fields.setting("a new setting", default=3, checks=config_fields.at_least(1))

    monkeypatch.setattr(settings, "Settings", WithNewSetting)
    assert spec_docs.render_contracts(text) != text  # a declared setting the table lacks makes it stale
    assert "| `new_limit` | integer | `3` | >= 1 | a new setting |" in spec_docs.settings_table()


def test_every_resolved_field_is_documented(fsx_settings):
    spec = run_spec.parse_spec(FULL, fsx_settings)
    documented = set(re.findall(r"^\| `([^`]+)` \|", DOC, flags=re.MULTILINE))
    assert sorted(set(_paths(spec)) - documented) == []


def test_examples_appear_verbatim():
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", DOC, flags=re.DOTALL)]
    for path in EXAMPLES:
        assert json.loads(path.read_text()) in blocks, path.name


def test_the_schema_is_json_schema_2020_12():
    assert SCHEMA["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    jsonschema.Draft202012Validator.check_schema(SCHEMA)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.stem)
def test_examples_validate_against_the_schema(example):
    spec = json.loads(example.read_text())
    assert spec["$schema"] == "../docs/run-spec.schema.json"  # editors find the schema from the file itself
    jsonschema.Draft202012Validator(SCHEMA).validate(spec)


def test_the_sample_problems_shown_in_the_doc_are_what_prepare_says(settings):
    """docs/run_spec.md's first sample output is produced by the spec parser, word for word (docs that run)."""
    from testkit.lambdas import MINIMAL

    from hfsm_lambda.errors import SpecError

    sample = re.search(r"```\n(invalid run spec \(.*?)\n```", DOC, re.S)
    assert sample, "docs/run_spec.md: the sample problems block"
    raw = {**MINIMAL, "task": "qa", "compute": {"instance_typ": "ml.g5.2xlarge"}}
    with pytest.raises(SpecError) as info:
        run_spec.parse_spec(raw, settings)
    assert str(info.value) == sample[1]
