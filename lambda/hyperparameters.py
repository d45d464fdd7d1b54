"""The training script's hyperparameters as Prepare checks them, before any job starts. Pure.

Everything here comes from their owner, training_code: names, types, choices and defaults from its exported
schema (`training_hyperparameters.json`, a copy of training_code/hyperparameters.json), bounds and the rules
across hyperparameters from `hp_rules` (a copy of training_code/hftrain/hp_rules.py). What this module adds is
the pipeline's side: the names it sets from other spec fields, and how values travel through SageMaker and the
toolkit's `--name value` arguments so that the script's argparse reads them as given.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

import hp_rules
import strict_json
from charsets import LINE_TERMINATORS
from spec_schema import INVALID, Context, Kind, describe

SCHEMA_FILE = Path(__file__).with_name("training_hyperparameters.json")
# Hyperparameters the pipeline sets -> the spec field they come from (the spec's `hyperparameters` may not set them).
PIPELINE = {
    "task": "task",
    "model_name_or_path": "model",
    "save_steps": "checkpoint.every_steps",
    "save_every_minutes": "checkpoint.every_minutes",
    "fsdp": "distribution.fsdp.sharding",
    "fsdp_config": "distribution.fsdp.config",
    "ddp_backend": "distribution.strategy",
    "checkpoint_dir": "the checkpoint LocalPath (/opt/ml/checkpoints)",
    "output_dir": "the checkpoint LocalPath (/opt/ml/checkpoints); the training code manages it",
}
# Never as hyperparameters: they are visible to anyone who can call DescribeTrainingJob.
SECRETS = ("hub_token",)
# Instance families whose GPUs have no bf16/TF32 (before NVIDIA Ampere): the `bf16_gpu` fact of hp_rules.
NO_BF16_FAMILIES = ("ml.p2", "ml.p3", "ml.p3dn", "ml.g3", "ml.g3s", "ml.g4dn", "ml.g4ad")
# argparse takes an argument starting with '-' as a value only when it looks like a negative number.
_NEGATIVE_NUMBER = re.compile(r"-\d+|-\d*\.\d+")
# A string value as the JSON Schema states it (ASCII digits: stricter than argparse's \d, never looser).
STRING_VALUE = r"(?!-)[^\n\r\u0085\u2028\u2029]*|-[0-9]+|-[0-9]*\.[0-9]+"


@lru_cache(maxsize=1)
def schema() -> dict[str, dict[str, Any]]:
    """name -> {"type", "help", "choices"?, "default"?, "keys"?}: what the training script accepts."""
    return json.loads(SCHEMA_FILE.read_text())


def settable() -> list[str]:
    blocked = set(PIPELINE) | set(SECRETS) | set(hp_rules.UNSETTABLE)
    return sorted(set(schema()) - blocked)


def pipeline_values(spec: dict[str, Any]) -> dict[str, Any]:
    """The hyperparameters the pipeline derives from the spec (unencoded)."""
    values: dict[str, Any] = {"task": spec["task"]}
    if not spec["model"].startswith("s3://"):
        values["model_name_or_path"] = spec["model"]
    values["save_steps"] = spec["checkpoint"]["every_steps"]
    if spec["checkpoint"].get("every_minutes"):
        values["save_every_minutes"] = spec["checkpoint"]["every_minutes"]
    distribution = spec["distribution"]
    if distribution["strategy"] == "fsdp":
        values["fsdp"] = distribution["fsdp"]["sharding"]
        values["fsdp_config"] = json.dumps(distribution["fsdp"]["config"], sort_keys=True, separators=(",", ":"))
    elif distribution["strategy"] == "smddp":
        values["ddp_backend"] = "smddp"
    return values


def argument(name: str, value: Any) -> Any:
    """The value to JSON-encode for SageMaker so the script's parser receives exactly it.

    Objects travel as compact JSON text (the toolkit would render a dict as `k=v,k=v`), a one-element array as
    its element, and a negative number in exponent form (`-1e-05`, which argparse would take for an option) as
    plain decimal text (`"-0.00001"`).
    """
    kind = schema().get(name, {}).get("type")
    if kind == "object" and isinstance(value, dict):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    if kind == "array" and isinstance(value, list) and len(value) == 1:
        value = value[0]
    if isinstance(value, float) and value < 0 and not _NEGATIVE_NUMBER.fullmatch(str(value)):
        from decimal import Decimal  # rare: only negative numbers in exponent form

        return format(Decimal(repr(value)), "f")
    return value


def _string_problem(value: str) -> str | None:
    if LINE_TERMINATORS & set(value):
        return "holds a line break, which SageMaker refuses in hyperparameter values (its pattern `.*` stops there)"
    if value.startswith("-") and not _NEGATIVE_NUMBER.fullmatch(value):
        return ("starts with '-': the training script's argument parser would read it as an option name, not a "
                "value (negative numbers are fine); rejected")
    return None


def _object_problem(value: Any, meta: dict[str, Any], path: str) -> str | None:
    if isinstance(value, str):
        value, problems = strict_json.loads(value, path)
        if problems:
            where, why = problems[0]
            return f"expected a JSON object, or JSON text of one; {why}" + (f" (at {where})" if where != path else "")
    if not isinstance(value, dict):
        return f"expected a JSON object (or its JSON text), got {describe(value)}"
    unknown = sorted(set(value) - set(meta.get("keys", value)))
    if unknown:
        return f"unknown key(s) {', '.join(map(repr, unknown[:5]))}; allowed: {', '.join(meta['keys'])}"
    return None


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


# schema type -> (accepts the JSON value, what to say otherwise)
_TYPES: dict[str, tuple[Any, str]] = {
    "integer": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "number": (lambda v: _is_scalar(v) and not isinstance(v, str), "a number"),
    "boolean": (lambda v: isinstance(v, bool), "true or false"),
    "string": (lambda v: isinstance(v, str), "a string"),
    "array": (_is_scalar, "one value (the SageMaker toolkit passes a single argument per hyperparameter)"),
}
_ANY_SCALAR = (lambda v: _is_scalar(v) or isinstance(v, bool), "a string, number or boolean")


def value_problem(name: str, value: Any, path: str) -> str | None:
    """Why the script (or SageMaker) would refuse `value` for hyperparameter `name`, or None."""
    meta = schema()[name]
    if meta["type"] == "object":
        return _object_problem(value, meta, path)
    if meta["type"] == "array" and isinstance(value, list) and len(value) == 1:
        value = value[0]
    accepts, what = _TYPES.get(meta["type"], _ANY_SCALAR)
    if not accepts(value):
        return f"expected {what}, got {describe(value)}"
    if isinstance(value, str) and (problem := _string_problem(value)):
        return problem
    choices = meta.get("choices")
    if choices and str(value) not in choices:
        return f"{describe(value)} is not allowed; allowed: {', '.join(choices)}"
    return hp_rules.bound_problem(name, value)


def _name_problem(name: str) -> str | None:
    if name.startswith("sagemaker_"):
        return "names starting with 'sagemaker_' are reserved for SageMaker"
    if name in SECRETS:
        return "secrets must not be hyperparameters (DescribeTrainingJob shows them); stage the model in S3 instead"
    if name in PIPELINE:
        return f"set by the pipeline from {PIPELINE[name]}; remove it here"
    if name in hp_rules.UNSETTABLE:
        return f"cannot be set as a hyperparameter: {hp_rules.UNSETTABLE[name]}"
    if name not in schema():
        return (f"unknown hyperparameter: the training script accepts the names in training_code/hyperparameters.json "
                f"({len(settable())} settable here)")
    return None


def _hints(name: str) -> str:
    import difflib  # only for unknown names

    close = difflib.get_close_matches(name[:100], settable(), n=3)
    return f"; did you mean {' or '.join(map(repr, close))}?" if close else ""


class Hyperparameters(Kind):
    """The `hyperparameters` object: name -> value, checked against the training script's schema."""

    def check(self, value: Any, path: str, ctx: Context) -> Any:
        if not isinstance(value, dict):
            ctx.problems.add(path, f"expected an object of name -> value, got {describe(value)}")
            return INVALID
        ok = True
        for name, item in value.items():
            where = strict_json.join(path, name)
            problem = _name_problem(name)
            if problem and problem.startswith("unknown") and not ctx.problems.full:
                problem += _hints(name)
            problem = problem or value_problem(name, item, where)
            if problem:
                ctx.problems.add(where, problem)
                ok = False
        return dict(value) if ok else INVALID

    def schema(self) -> dict[str, Any]:
        return self.annotate({"type": "object", "additionalProperties": False,
                              "properties": {n: value_schema(n) for n in settable()}})

    def type_doc(self) -> str:
        return "object"

    def allowed_doc(self) -> str:
        return "name -> value, passed to `training_code/train.py` as `--name value`; see below"


def value_schema(name: str) -> dict[str, Any]:
    meta = schema()[name]
    string = {"type": "string", "pattern": f"^(?:{STRING_VALUE})(?![\\s\\S])"}
    numeric = {k: v for k, v in hp_rules.BOUNDS.get(name, {}).items()}
    kind = meta["type"]
    if kind == "object":
        obj: dict[str, Any] = {"type": "object"}
        if "keys" in meta:
            obj["propertyNames"] = {"enum": meta["keys"]}
        out: dict[str, Any] = {"anyOf": [obj, {"type": "string", "pattern": "^[ \\t\\n\\r]*\\{"}]}
    elif kind in ("integer", "number"):
        out = {"type": kind, **numeric}
    elif kind == "boolean":
        out = {"type": "boolean"}
    else:
        one: dict[str, Any] = string if kind == "string" else {"anyOf": [string, {"type": "number"}]}
        if meta.get("choices"):
            one = {**one, "enum": meta["choices"]}
        out = one if kind == "string" else {"anyOf": [one, {"type": "array", "items": one, "minItems": 1,
                                                             "maxItems": 1}]}
    out["description"] = meta.get("help", "")
    return out


def _facts(spec: dict[str, Any], values: dict[str, Any]) -> tuple[dict[str, bool], list[str]]:
    """hp_rules.FACTS as the spec tells them, and the instance types without bf16 (for the message)."""
    types = [spec["compute"]["instance_type"]] + [o["instance_type"] for o in spec["fallback"]["options"]
                                                  if "instance_type" in o]
    old_gpus = sorted({t for t in types if t.startswith(tuple(f + "." for f in NO_BF16_FAMILIES))})
    validation = "validation" in spec["data"] or values.get("validation_path") or (
        values.get("dataset_name") and values.get("validation_split"))
    return {"validation_data": bool(validation), "bf16_gpu": not old_gpus}, old_gpus


def rule_problems(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """(path, message) for each hp_rules rule the run's hyperparameters break, the pipeline's own included.

    The path is the first of the rule's fields the spec sets, else the spec field a pipeline value comes from."""
    given = spec["hyperparameters"]
    values = {n: m["default"] for n, m in schema().items() if "default" in m}
    values.update(pipeline_values(spec))
    values.update({n: v[0] if isinstance(v, list) and len(v) == 1 else v for n, v in given.items()})
    facts, old_gpus = _facts(spec, values)
    problems = []
    for rule, message in hp_rules.broken_rules(values, facts):
        paths = [f"hyperparameters.{f}" for f in rule["fields"] if f in given]
        paths += [PIPELINE[f] for f in rule["fields"] if f in PIPELINE] + ["hyperparameters"]
        if old_gpus and any("@bf16_gpu" in c for c in rule["then"]):
            message += f" ({', '.join(old_gpus)}: no bf16 or TF32)"
        problems.append((paths[0], message))
    return problems
