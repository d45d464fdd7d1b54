"""docs/run-spec.schema.json (what editors check) and Prepare agree on every rule about a single field.

A corpus of bad values, made for each field from its declared kind, goes through both: whatever Prepare rejects
at that field, a standard JSON Schema validator (jsonschema, Draft 2020-12) rejects too; and every spec Prepare
accepts validates. Known limits of JSON Schema, left out on purpose: `2.0` is an integer there (Prepare wants
`2`), JSON *text* in a string-valued object hyperparameter is not parsed, and the rules across fields
(docs/run_spec.md, "Rules across fields") are Prepare's alone.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from hypothesis import find, given
from testkit.lambdas import FSX, declared, declared_numbers, settings_dict, valid_specs

from hfsm_lambda.errors import SpecError
from hfsm_lambda.settings import Settings
from hfsm_lambda.spec import run_spec
from hfsm_lambda.spec import schema as k
from hfsm_lambda.spec.hyperparameters import Hyperparameters

REPO = Path(__file__).resolve().parents[3]
VALIDATOR = jsonschema.Draft202012Validator(json.loads((REPO / "docs" / "run-spec.schema.json").read_text()))
SETTINGS = Settings.from_dict(settings_dict(fsx=FSX))
FULL = {"$schema": "../docs/run-spec.schema.json", "version": 1, "name": "full", "description": "Tout, 100 %",
        "task": "question-answering", "model": "org/model-1",
        "data": {"train": {"s3": "datasets/a/", "distribution": "ShardedByS3Key", "input_mode": "FastFile"},
                 "validation": {"fsx": "/val/a"}, "test": {"s3": "s3://hfsm-dev-data/test/"}},
        "tokenizer": {"type": "bpe", "vocab_size": 1000, "min_frequency": 2, "special_tokens": ["<s>", "<pad>"],
                      "text_field": "text", "lowercase": True, "model_max_length": 128, "channel": "train",
                      "instance_type": "ml.c5.2xlarge", "instance_count": 1, "volume_size_gb": 30,
                      "max_runtime_seconds": 3600},
        "compute": {"instance_type": "ml.g5.2xlarge", "instance_count": 2, "volume_size_gb": 100,
                    "processes_per_host": 1},
        "distribution": {"strategy": "fsdp", "fsdp": {"sharding": "full_shard auto_wrap", "config": {"a": [1]}}},
        "max_runtime_seconds": 3600, "spot": {"enabled": True, "max_wait_seconds": 7200},
        "checkpoint": {"every_steps": 100, "every_minutes": 20, "watchdog": {"intervals": 2.5, "action": "stop"}}, "fallback": {"max_attempts": 2, "options": [{"instance_type":
                                                                                         "ml.g6.2xlarge",
                                                                                         "spot": False}]},
        "hyperparameters": {"learning_rate": 3e-05, "text_column": "context", "bf16": True},
        "tags": {"team": "nlp", "équipe": "données 1"}, "local": {"interrupt_at_step": 3}}
BASES = [FULL] + [json.loads(p.read_text()) for p in sorted((REPO / "examples").glob("*.json"))]
BAD_HYPERPARAMETERS = [
    {"unknown_hp": 1}, {"sagemaker_program": "x"}, {"task": "summarization"}, {"hub_token": "x"}, {"deepspeed": {}},
    {"text_column": "-x"}, {"text_column": "--x"}, {"text_column": "a\nb"}, {"text_column": "a\u2028"},
    {"text_column": 5}, {"per_device_train_batch_size": 0}, {"per_device_train_batch_size": "8"},
    {"lr_scheduler_type": "warm"}, {"learning_rate": "3e-5"}, {"learning_rate": -1}, {"bf16": "true"},
    {"label_names": ["a", "b"]}, {"label_names": "-a"}, {"debug": "everything"}, {"accelerator_config": {"nope": 1}},
    {"lr_scheduler_kwargs": 5}, {"seed": 2**32}, {"max_seq_length": 7}, "not an object",
]


def _bad_values(kind: k.Kind, sample: Any) -> list[Any]:
    """Values that break `kind` on its own (never 2.0 for an integer: JSON Schema takes that as 2)."""
    values: list[Any] = [None, [sample]]
    if isinstance(kind, k.Int):
        values += [kind.low - 1, kind.high + 1, str(kind.low), kind.low + 0.5, True]
    elif isinstance(kind, k.Const):
        values += [kind.value + 1, str(kind.value), True]
    elif isinstance(kind, k.Bool):
        values += ["true", 1, 0]
    elif isinstance(kind, k.Enum):
        values += ["x", kind.values[0].upper(), kind.values[0] + "\n", 1]
    elif isinstance(kind, k.Str | k.Either):
        text = sample if isinstance(sample, str) else "x"
        values += [5, text + "\n", "\n" + text, text + "\r", text + "\x85", text + "\u200d", text + "\ufeff",
                   text + "\u202e", text + "\x00", text + " ", text + "\\", text + "(1)", text.upper(), "", "-" + text,
                   text + "--", text + "..", text + ".git", text * 50, "x" * 2049, "s3:/" + text,
                   "s3://Bad_Bucket/" + text, "s3://xn--bucket/k", "s3://192.168.1.1/k", "s3://a..b/k",
                   "ml.g5.2xlarge\n", "project", "aws:x", "AWS:x", "/a/../b", "full_shard no_shard",
                   "auto_wrap", "full_shard full_shard", "org/a--b", "bert-", "café"]
    elif isinstance(kind, k.List):
        values += [{}, "x", [], [sample[0]] * (kind.max_items + 1) if sample else [1] * (kind.max_items + 1)]
        if kind.unique and sample:
            values.append([sample[0], sample[0]])
    elif isinstance(kind, Hyperparameters):
        values += BAD_HYPERPARAMETERS
    elif isinstance(kind, k.Map):
        values += ["x", {"": "v"}, {"k\n": "v"}, {"k": "v\n"}, {"k": 1}, {f"k{i}": "v" for i in range(41)},
                   {"run": "x"}, {"aws:k": "v"}, {"k": "\u200d"}]
    elif isinstance(kind, k.Obj | k.JsonObject):
        values += ["x", 1, [], {"unknown_field": 1}]
    return values


def _fields(kind: k.Kind, path: tuple[str, ...]) -> list[tuple[tuple[str, ...], k.Kind]]:
    out = [(path, kind)] if path else []
    if isinstance(kind, k.Obj):
        for name, child in kind.fields.items():
            out += _fields(child, (*path, name))
    elif isinstance(kind, k.List) and isinstance(kind.item, k.Obj):
        for name, child in kind.item.fields.items():
            out += _fields(child, (*path, "0", name))
    return out


def _get(spec: Any, path: tuple[str, ...]) -> Any:
    for part in path:
        spec = spec[int(part)] if isinstance(spec, list) else spec[part]
    return spec


def _set(spec: dict[str, Any], path: tuple[str, ...], value: Any) -> dict[str, Any]:
    spec = copy.deepcopy(spec)
    target = spec
    for part in path[:-1]:
        target = target[int(part)] if isinstance(target, list) else target[part]
    target[int(path[-1]) if isinstance(target, list) else path[-1]] = value
    return spec


def _dotted(path: tuple[str, ...]) -> str:
    out = ""
    for part in path:
        out = f"{out}[{part}]" if part.isdigit() else (f"{out}.{part}" if out else part)
    return '["$schema"]' if out == "$schema" else out


def corpus() -> list[tuple[str, dict[str, Any], str]]:
    cases = []
    for index, base in enumerate(BASES):
        for path, kind in _fields(run_spec.SPEC, ()):
            try:
                sample = _get(base, path)
            except (KeyError, IndexError, TypeError):
                continue
            for value in _bad_values(kind, sample):
                cases.append((f"{index}:{_dotted(path)}={json.dumps(value)[:40]}", _set(base, path, value),
                              _dotted(path)))
    return cases


CORPUS = corpus()


def test_the_schema_rejects_what_prepare_rejects_for_each_field():
    checked = 0
    for case, spec, field in CORPUS:
        try:
            run_spec.parse_spec(spec, SETTINGS)
        except SpecError as err:
            if any(p.startswith((f"{field}: ", f"{field}.", f"{field}[")) for p in err.problems):
                assert not VALIDATOR.is_valid(spec), f"{case}: Prepare says {err.problems[0]!r}, the schema accepts"
                checked += 1
            continue
        errors = [e.message[:120] for e in VALIDATOR.iter_errors(spec)]
        assert errors == [], f"{case}: Prepare accepts, the schema says {errors}"
    assert checked > 1500  # the corpus has teeth: this many single-field rejections were compared


@pytest.mark.parametrize("base", BASES, ids=lambda b: b["name"])
def test_the_bases_are_valid_for_both(base):
    run_spec.parse_spec(base, SETTINGS)
    VALIDATOR.validate(base)


@given(valid_specs(with_fsx=True))
def test_every_spec_prepare_accepts_validates_against_the_schema(raw):
    run_spec.parse_spec(raw, SETTINGS)
    errors = [f"{list(e.absolute_path)}: {e.message[:150]}" for e in VALIDATOR.iter_errors(raw)]
    assert errors == []


@pytest.mark.parametrize("path", ["compute.volume_size_gb", "fallback.max_attempts", "checkpoint.every_steps",
                                  "spot.max_wait_seconds", "checkpoint.watchdog.intervals"])
def test_the_spec_generators_take_their_bounds_from_the_declaration(path):
    """valid_specs draws each number from run_spec.SPEC's own bounds (no copy to drift: it held volume <= 2000
    while the spec allows 16384)."""
    kind = declared(path)
    assert find(declared_numbers(path), lambda v: v >= kind.high) == kind.high
    assert find(declared_numbers(path), lambda v: v <= kind.low) == kind.low
