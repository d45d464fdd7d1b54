"""Environment settings: the JSON in env var PIPELINE_SETTINGS, declared once in `Settings`.

Each field is a `setting(...)` of lambda/config_fields.py (the one dialect cdk.json's settings are declared in
too): its type and its constraints drive `from_dict` (the Lambdas' validation, every problem listed), `to_dict`
(what stacks/pipeline_stack.py serializes: it builds a `Settings` with `Settings.build`, which takes every field, so
a field added here fails `cdk synth` until the stack sets it) and the settings table in CONTRACTS.md (`make docs`,
from each constraint's `doc`). Rules across fields: `RULES`. Pure: no AWS calls.
"""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, fields
from functools import lru_cache
from typing import Any, get_origin

from .config_fields import (
    Constraint,
    above,
    at_least,
    at_most_items,
    constraints,
    hints,
    matches,
    non_empty,
    number_entries,
    required,
    setting,
    unwrap,
)
from .errors import SettingsError
from .naming import PROJECT_NAME

ENV_VAR = "PIPELINE_SETTINGS"


def _matches(pattern: str, what: str | None = None) -> Constraint:
    """The whole string matches `pattern`; `what` names it in the problem and the docs (else the pattern)."""
    return matches(pattern, f"expected {what or pattern}", f"`{what or pattern}`")


@dataclass(frozen=True)
class FsxSettings:
    file_system_id: str = setting("the FSx for Lustre file system")
    mount_name: str = setting("its Lustre mount name")
    subnet_id: str = setting("the subnet jobs that use FSx run in (the file system's)")


@dataclass(frozen=True, kw_only=True)
class Settings:
    project: str = setting("project name; every resource name starts with `<project>-<environment>`",
                           checks=_matches(PROJECT_NAME))
    environment: str = setting("environment name (the cdk.json environment)", checks=_matches(PROJECT_NAME))
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
                                  checks=_matches(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/(.+/)?",
                                                  "s3://bucket/prefix/ (ending with '/')"))
    subnet_ids: tuple[str, ...] = setting("jobs' VPC subnets; [] = no VPC", checks=at_most_items(16))
    security_group_ids: tuple[str, ...] = setting("jobs' security groups", checks=at_most_items(5))
    fsx: FsxSettings | None = setting("FSx for Lustre, when on (jobs that use FSx run in its subnet only)",
                                         default=None)
    allowed_instance_types: tuple[str, ...] = setting("training instance types a spec may name", checks=non_empty())
    tokenizer_instance_types: tuple[str, ...] = setting("processing instance types a spec may name",
                                                        checks=non_empty())
    max_instance_count: int = setting("instances per job at most", checks=at_least(1))
    spot_default: bool = setting("managed spot training unless the spec says otherwise")
    inter_container_encryption: bool = setting("encrypt traffic between a job's instances")
    default_max_runtime_seconds: int = setting("a job's MaxRuntimeInSeconds unless the spec sets one",
                                               checks=at_least(1))
    default_max_wait_seconds: int = setting("a spot job's MaxWaitTimeInSeconds unless the spec sets one",
                                            checks=at_least(1))
    poll_seconds: int = setting("how often the state machines poll a running job", checks=at_least(1))
    model_package_group: str = setting("model registry group of the finished runs' models")
    topic_arn: str = setting("SNS topic of run notifications")
    instance_prices: dict[str, float] = setting(
        "on-demand USD per instance-hour, for cost figures (else instance-seconds only)", default={},
        checks=number_entries(0))
    internet_access: bool = setting("jobs can reach the internet (NAT gateway); without it a Hub model id "
                                    "cannot download", default=True)
    # --- security and spend (hyperparameters.policy_problems, plan/spend.py, plan/request_guard.py) ---
    remote_code_hub_orgs: tuple[str, ...] = setting(
        "Hub organizations whose models may run their own code (trust_remote_code, pinned commit); [] = none",
        default=())
    allowed_report_to: tuple[str, ...] = setting(
        "report_to integrations beyond the local ones (none, tensorboard) that may receive metrics", default=())
    tracking_uri: str = setting(
        "MLflow tracking URI the training jobs and Finish log to: the environment's tracking server ARN (cdk.json "
        "`tracking`), local mode's server's http://127.0.0.1 URL; \"\" = no tracking", default="")
    max_run_cost_usd: float | None = setting("worst-case USD a run may cost (every job of its fallback chain); "
                                             "null = no limit", default=None, checks=above(0))
    max_concurrent_runs: int | None = setting("runs (running executions of `state_machine_arns`) at once; "
                                              "null = no limit", default=None, checks=at_least(1))
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


# --- the reader of PIPELINE_SETTINGS: keys not declared ignored, `<key>: <problem>` ------------------------------
def _parse_fields(cls: type, raw: Any, placeholder: Callable[[Any], bool]) -> tuple[dict[str, Any], list[str]]:
    if not isinstance(raw, dict):
        raise SettingsError(["(root): expected a JSON object"])
    values: dict[str, Any] = {}
    problems: list[str] = []
    for f in fields(cls):
        if f.name not in raw:
            if required(f):
                problems.append(f"{f.name}: missing")
            continue
        kind, optional = unwrap(hints(cls)[f.name])
        if raw[f.name] is None and optional:
            if required(f):
                values[f.name] = None
            continue  # null: the field's default
        value = _value(f.name, kind, raw[f.name], constraints(f.metadata), placeholder, problems)
        if value is not _BAD:
            values[f.name] = value
    return values, problems


_BAD = object()


def _value(name: str, kind: Any, value: Any, cons: tuple[Constraint, ...], placeholder: Callable[[Any], bool],
           problems: list[str]) -> Any:
    origin = get_origin(kind)
    if dataclasses.is_dataclass(kind):
        return _nested(name, kind, value, problems)
    want = {tuple: list, dict: dict}.get(origin, kind)
    if not _is(value, want):
        problems.append(f"{name}: expected {_type_name(want)}, got {value!r}")
        return _BAD
    if origin is tuple:
        return _items(name, value, cons, problems)
    if origin is dict:
        return _map(name, value, cons, problems)
    if isinstance(value, str) and placeholder(value):
        return value
    failed = [c.text(value) for c in cons if not c.check(value)]
    if failed:
        problems.append(f"{name}: {failed[0]}")
        return _BAD
    return float(value) if kind is float else value


def _is(value: Any, kind: type) -> bool:
    """JSON types: bool is not a number; an int is a float."""
    if isinstance(value, bool) and kind is not bool:
        return False
    return isinstance(value, (int, float) if kind is float else kind)


def _type_name(kind: type) -> str:
    return "number" if kind is float else kind.__name__


def _items(name: str, value: list[Any], cons: tuple[Constraint, ...], problems: list[str]) -> Any:
    before = len(problems)
    if not all(isinstance(v, str) and v for v in value):
        problems.append(f"{name}: expected a list of non-empty strings")
    problems += [f"{name}: {c.text(value)}" for c in cons if not c.check(value)]
    return tuple(value) if len(problems) == before else _BAD


def _map(name: str, value: dict[str, Any], cons: tuple[Constraint, ...], problems: list[str]) -> Any:
    """A map of strings to numbers: every value a number, and every entry passes the entry constraints."""
    out: dict[str, float] = {}
    rules = [c for c in cons if c.kind == "entry"] or [number_entries()]
    for key, item in value.items():
        failed = [c.text((key, item)) for c in rules if not c.check(key, item)]
        if failed or not _is(item, float):
            problems.append(f"{name}.{key}: {failed[0] if failed else number_entries().problem}")
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
