"""Environment settings: the JSON in env var PIPELINE_SETTINGS, declared once in `Settings`.

Each field's type and its constraints (field metadata: pattern, minimum, item counts, doc) drive `from_dict` (the
Lambdas' validation, every problem listed), `to_dict` (what stacks/pipeline_stack.py serializes: it builds a
`Settings` with `Settings.build`, which takes every field, so a field added here fails `cdk synth` until the
stack sets it) and the settings table in CONTRACTS.md (`make docs`). Rules across
fields: `RULES`. Pure: no AWS calls.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import types
from collections.abc import Callable
from dataclasses import dataclass, field, fields
from functools import cache, lru_cache
from typing import Any, get_args, get_origin, get_type_hints

from .errors import SettingsError
from .naming import PROJECT_NAME

ENV_VAR = "PIPELINE_SETTINGS"


def setting(doc: str, *, default: Any = dataclasses.MISSING, pattern: str | None = None, what: str | None = None,
            minimum: float | None = None, above: float | None = None, min_items: int | None = None,
            max_items: int | None = None, limit_by: str = "SageMaker") -> Any:
    """A field with its constraints as metadata. `pattern` is matched against the whole string (`what` names it
    in the problem); `minimum`/`above`: >= / > for numbers (for a map: its values); `min_items`/`max_items`: list
    length (`limit_by` says whose limit it is)."""
    meta = {"doc": doc, "pattern": pattern and re.compile(pattern), "what": what or pattern, "minimum": minimum,
            "above": above, "min_items": min_items, "max_items": max_items, "limit_by": limit_by}
    if isinstance(default, dict):
        return field(default_factory=lambda: dict(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class FsxSettings:
    file_system_id: str = setting("the FSx for Lustre file system")
    mount_name: str = setting("its Lustre mount name")
    subnet_id: str = setting("the subnet jobs that use FSx run in (the file system's)")


@dataclass(frozen=True, kw_only=True)
class Settings:
    project: str = setting("project name; every resource name starts with `<project>-<environment>`",
                           pattern=PROJECT_NAME)
    environment: str = setting("environment name (the cdk.json environment)", pattern=PROJECT_NAME)
    region: str = setting("AWS region of the deployment")
    account: str = setting("AWS account of the deployment")
    data_bucket: str = setting("bucket of run specs (`runs/`) and user data (`datasets/`, `base-models/`)")
    artifacts_bucket: str = setting("bucket of code, checkpoints, models, outputs, registry")
    kms_key_arn: str = setting("the project key (buckets, volumes, logs)")
    sagemaker_role_arn: str = setting("execution role passed to every job")
    training_image_uri: str = setting("Hugging Face PyTorch training image")
    processing_image_uri: str = setting("PyTorch CPU image of the tokenizer jobs")
    inference_image_uri: str = setting("Hugging Face PyTorch inference image of registered models")
    code_s3_prefix: str = setting("holds `sourcedir.tar.gz` and `runproc.sh` (see below)",
                                  pattern=r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/(.+/)?",
                                  what="s3://bucket/prefix/ (ending with '/')")
    subnet_ids: tuple[str, ...] = setting("jobs' VPC subnets; [] = no VPC", max_items=16)
    security_group_ids: tuple[str, ...] = setting("jobs' security groups", max_items=5)
    fsx: FsxSettings | None = setting("FSx for Lustre, when on (jobs that use FSx run in its subnet only)",
                                         default=None)
    allowed_instance_types: tuple[str, ...] = setting("training instance types a spec may name", min_items=1)
    tokenizer_instance_types: tuple[str, ...] = setting("processing instance types a spec may name", min_items=1)
    max_instance_count: int = setting("instances per job at most", minimum=1)
    spot_default: bool = setting("managed spot training unless the spec says otherwise")
    inter_container_encryption: bool = setting("encrypt traffic between a job's instances")
    default_max_runtime_seconds: int = setting("a job's MaxRuntimeInSeconds unless the spec sets one", minimum=1)
    default_max_wait_seconds: int = setting("a spot job's MaxWaitTimeInSeconds unless the spec sets one",
                                            minimum=1)
    poll_seconds: int = setting("how often the state machines poll a running job", minimum=1)
    model_package_group: str = setting("model registry group of the finished runs' models")
    topic_arn: str = setting("SNS topic of run notifications")
    instance_prices: dict[str, float] = setting(
        "on-demand USD per instance-hour, for cost figures (else instance-seconds only)", default={}, minimum=0)
    internet_access: bool = setting("jobs can reach the internet (NAT gateway); without it a Hub model id "
                                    "cannot download", default=True)
    # --- security and spend (hyperparameters.policy_problems, plan/spend.py, plan/request_guard.py) ---
    remote_code_hub_orgs: tuple[str, ...] = setting(
        "Hub organizations whose models may run their own code (trust_remote_code, pinned commit); [] = none",
        default=())
    allowed_report_to: tuple[str, ...] = setting(
        "report_to integrations beyond the local ones (none, tensorboard) that may receive metrics", default=())
    max_run_cost_usd: float | None = setting("worst-case USD a run may cost (every job of its fallback chain); "
                                             "null = no limit", default=None, above=0)
    max_concurrent_runs: int | None = setting("runs (running executions of `state_machine_arns`) at once; "
                                              "null = no limit", default=None, minimum=1)
    state_machine_arns: tuple[str, ...] = setting("the environment's state machines", default=())

    @property
    def project_buckets(self) -> tuple[str, str]:
        return (self.data_bucket, self.artifacts_bucket)

    @property
    def name_prefix(self) -> str:
        """`<project>-<environment>`: every job name starts with it (the Lambda roles are scoped to it)."""
        return f"{self.project}-{self.environment}"

    @classmethod
    def from_dict(cls, raw: Any, *, placeholder: Callable[[Any], bool] | None = None) -> Settings:
        """Parsed and checked; one SettingsError lists every problem. Keys not declared are ignored.
        `placeholder(value)` True: a string not known yet (a CDK token at synth), type-checked only."""
        values, problems = _parse_fields(cls, raw, placeholder or (lambda _: False))
        for rule in RULES:
            problems += rule(values)
        if problems:
            raise SettingsError(problems)
        return cls(**values)

    @classmethod
    def build(cls, **values: Any) -> Settings:
        """Every field given, none left to its default: how the pipeline stack makes the settings it serializes."""
        unset = [f.name for f in fields(cls) if f.name not in values]
        if unset:
            raise TypeError(f"Settings.build: not set: {', '.join(unset)} (each setting must be set by the stack)")
        return cls(**values)

    def to_dict(self) -> dict[str, Any]:
        """The JSON form `from_dict` reads (tuples as lists, FsxSettings as an object)."""
        return {f.name: _plain(getattr(self, f.name)) for f in fields(self)}


# --- rules across fields ---------------------------------------------------------------------------------
def _groups_with_subnets(v: dict[str, Any]) -> list[str]:
    """`security_group_ids` is required when `subnet_ids` are set (a job in a VPC needs a security group)."""
    return ["security_group_ids: required when subnet_ids are set"] if v.get("subnet_ids") and not v.get(
        "security_group_ids") else []


def _groups_with_fsx(v: dict[str, Any]) -> list[str]:
    """`security_group_ids` is required when `fsx` is set (jobs that use FSx run in its subnet)."""
    return ["security_group_ids: required when fsx is set"] if v.get("fsx") and not v.get(
        "security_group_ids") else []


RULES: tuple[Callable[[dict[str, Any]], list[str]], ...] = (_groups_with_subnets, _groups_with_fsx)


# --- the generic parser -------------------------------------------------------------------------------------
@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def _parse_fields(cls: type, raw: Any, placeholder: Callable[[Any], bool]) -> tuple[dict[str, Any], list[str]]:
    if not isinstance(raw, dict):
        raise SettingsError(["(root): expected a JSON object"])
    values: dict[str, Any] = {}
    problems: list[str] = []
    hints = _hints(cls)
    for f in fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if f.name not in raw:
            if required:
                problems.append(f"{f.name}: missing")
            continue
        kind, optional = _unwrap(hints[f.name])
        if raw[f.name] is None and optional:
            if required:
                values[f.name] = None
            continue  # null: the field's default
        value = _value(f.name, kind, raw[f.name], f.metadata, placeholder, problems)
        if value is not _BAD:
            values[f.name] = value
    return values, problems


_BAD = object()


def _unwrap(hint: Any) -> tuple[Any, bool]:
    """(the type, whether null is allowed) of `T | None` or `T`."""
    if isinstance(hint, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        return args[0], len(args) < len(get_args(hint))
    return hint, False


def _value(name: str, kind: Any, value: Any, meta: Any, placeholder: Callable[[Any], bool],
           problems: list[str]) -> Any:
    origin = get_origin(kind)
    if dataclasses.is_dataclass(kind):
        return _nested(name, kind, value, problems)
    want = {tuple: list, dict: dict}.get(origin, kind)
    if not _is(value, want):
        problems.append(f"{name}: expected {_type_name(want)}, got {value!r}")
        return _BAD
    if origin is tuple:
        return _items(name, value, meta, problems)
    if origin is dict:
        return _map(name, value, meta, problems)
    if isinstance(value, str) and placeholder(value):
        return value
    problem = _check(value, meta)
    if problem:
        problems.append(f"{name}: {problem}")
        return _BAD
    return float(value) if kind is float else value


def _is(value: Any, kind: type) -> bool:
    """JSON types: bool is not a number; an int is a float."""
    if isinstance(value, bool) and kind is not bool:
        return False
    return isinstance(value, (int, float) if kind is float else kind)


def _type_name(kind: type) -> str:
    return "number" if kind is float else kind.__name__


def _check(value: Any, meta: Any) -> str | None:
    if meta["pattern"] is not None and not meta["pattern"].fullmatch(value):
        return f"expected {meta['what']}"
    if meta["minimum"] is not None and value < meta["minimum"]:
        return f"must be >= {meta['minimum']}"
    if meta["above"] is not None and value <= meta["above"]:
        return f"must be > {meta['above']}"
    return None


def _items(name: str, value: list[Any], meta: Any, problems: list[str]) -> Any:
    before = len(problems)
    if not all(isinstance(v, str) and v for v in value):
        problems.append(f"{name}: expected a list of non-empty strings")
    if meta["min_items"] and len(value) < meta["min_items"]:
        problems.append(f"{name}: must not be empty" if meta["min_items"] == 1
                        else f"{name}: at least {meta['min_items']} items")
    if meta["max_items"] is not None and len(value) > meta["max_items"]:
        problems.append(f"{name}: {meta['limit_by']} allows at most {meta['max_items']}")
    return tuple(value) if len(problems) == before else _BAD


def _map(name: str, value: dict[str, Any], meta: Any, problems: list[str]) -> Any:
    out: dict[str, float] = {}
    floor = meta["minimum"]
    for key, item in value.items():
        if not _is(item, float) or (floor is not None and item < floor):
            rule = "a non-negative number" if floor == 0 else "a number" if floor is None else f"a number >= {floor}"
            problems.append(f"{name}.{key}: expected {rule}")
        else:
            out[key] = float(item)
    return out if len(out) == len(value) else _BAD


def _nested(name: str, cls: Any, value: Any, problems: list[str]) -> Any:
    if not isinstance(value, dict):
        problems.append(f"{name}: expected dict, got {value!r}")
        return _BAD
    bad = [f.name for f in fields(cls) if not isinstance(value.get(f.name), str)]
    if bad:
        problems.append(f"{name}: missing or non-string {', '.join(bad)}")
        return _BAD
    return cls(**{f.name: value[f.name] for f in fields(cls)})


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value):
        return {f.name: _plain(getattr(value, f.name)) for f in fields(value)}
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# --- the environment -------------------------------------------------------------------------------------
def parse_settings(text: str | None) -> Settings:
    if not text:
        raise SettingsError([f"{ENV_VAR}: environment variable is not set"])
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as err:
        raise SettingsError([f"{ENV_VAR}: not valid JSON ({err})"]) from None
    return Settings.from_dict(raw)


@lru_cache(maxsize=4)
def _cached(text: str | None) -> Settings:
    return parse_settings(text)


def load_settings() -> Settings:
    """Settings from the environment, parsed once per distinct value (cheap on warm invocations)."""
    return _cached(os.environ.get(ENV_VAR))
