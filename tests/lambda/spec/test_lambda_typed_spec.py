"""The typed run spec (spec/typed.py) and planned run (plan/run.py): the dataclasses cover the declaration
(run_spec.SPEC) field for field, and `to_json(from_json(x)) == x` for every resolved spec and planned run."""

from __future__ import annotations

import dataclasses
import json
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from testkit.lambdas import FSX, settings_dict, valid_specs

from hfsm_lambda.plan import run as planned
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.settings import Settings
from hfsm_lambda.spec import hyperparameters, run_spec, typed
from hfsm_lambda.spec.json_dataclass import omitted_when_none
from hfsm_lambda.spec.schema import JsonObject, List, Map, Obj

EXAMPLES = sorted((Path(__file__).resolve().parents[3] / "examples").glob("*.json"))
PLAIN = Settings.from_dict(settings_dict())
WITH_FSX = Settings.from_dict(settings_dict(fsx=FSX))


def _unwrap(hint: Any) -> Any:
    """`X | None` -> X; `tuple[X, ...]` -> X."""
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) in (typing.Union, type(int | None)) and len(args) == 1:
        return _unwrap(args[0])
    if typing.get_origin(hint) is tuple:
        return _unwrap(args[0])
    return hint


def _covers(kind: Obj, cls: type, path: str) -> None:
    declared = [name for name, child in kind.fields.items() if child.keep]
    assert [f.name for f in dataclasses.fields(cls)] == declared, f"{path or 'RunSpec'}: {cls.__name__}"
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        child, where = kind.fields[f.name], f"{path}.{f.name}" if path else f.name
        assert not (child.required and omitted_when_none(f)), f"{where} is required: not absent()"
        hint = _unwrap(hints[f.name])
        item = child.item if isinstance(child, List) else child
        if isinstance(item, Obj):
            assert dataclasses.is_dataclass(hint), where
            _covers(item, hint, where)
        elif isinstance(item, JsonObject | Map | hyperparameters.Hyperparameters):
            assert typing.get_origin(hint) is Mapping, where  # free-form: stays a mapping
        else:
            assert not dataclasses.is_dataclass(hint) and typing.get_origin(hint) is not Mapping, where


def test_the_dataclasses_cover_the_declaration_field_for_field() -> None:
    _covers(run_spec.SPEC, typed.RunSpec, "")


def _round_trip(run: dict[str, Any]) -> None:
    spec = run["spec"]
    typed_spec = typed.from_json(spec)
    assert json.dumps(typed.to_json(typed_spec)) == json.dumps(spec)  # same keys, same order, same values
    typed_run = planned.from_json(run)
    assert typed_run.spec == typed_spec
    assert json.dumps(planned.to_json(typed_run)) == json.dumps(run)


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_the_examples_round_trip(example: Path) -> None:
    _round_trip(planned.to_json(prepare_run(json.loads(example.read_text()), PLAIN)))


@given(raw=valid_specs())
def test_valid_specs_round_trip(raw: dict[str, Any]) -> None:
    _round_trip(planned.to_json(prepare_run(raw, PLAIN)))


@given(raw=valid_specs(with_fsx=True))
def test_valid_specs_with_fsx_round_trip(raw: dict[str, Any]) -> None:
    _round_trip(planned.to_json(prepare_run(raw, WITH_FSX)))


def test_a_mistyped_field_is_an_error_not_a_none() -> None:
    run = prepare_run(json.loads(EXAMPLES[0].read_text()), PLAIN)
    with pytest.raises(AttributeError):
        run.spec.spot.max_wait  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(dataclasses.FrozenInstanceError):
        run.spec.spot.enabled = False  # type: ignore[misc]
    data = planned.to_json(run)
    for change, fragment in (
        (lambda d: d["spec"]["spot"].update(max_wait=1), "spec.spot.max_wait: not a field of Spot"),
        (lambda d: d["spec"]["compute"].pop("instance_type"), "spec.compute.instance_type: missing"),
        (lambda d: d["attempts"][0].update(instance_count="2"), "attempts[0].instance_count: expected int"),
        (lambda d: d.update(spec={}), "spec.version: missing"),
    ):
        bad = json.loads(json.dumps(data))
        change(bad)
        with pytest.raises(ValueError, match=fragment.replace("[", r"\[").replace("]", r"\]")):
            planned.from_json(bad)


def test_a_run_planned_before_stall_and_network_existed_still_parses() -> None:
    data = planned.to_json(prepare_run(json.loads(EXAMPLES[0].read_text()), PLAIN))
    del data["spec"]["stall"], data["spec"]["network"]
    run = planned.from_json(data)
    assert run.spec.stall is None and run.spec.network is None
    assert planned.to_json(run) == data
