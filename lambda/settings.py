"""Environment settings: the JSON in env var PIPELINE_SETTINGS (see CONTRACTS.md), validated once."""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from errors import SettingsError

ENV_VAR = "PIPELINE_SETTINGS"
_PROJECT_RE = re.compile(r"[a-z][a-z0-9-]{0,15}")  # fullmatch
_S3_PREFIX_RE = re.compile(r"s3://[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]/(.+/)?")  # fullmatch


@dataclass(frozen=True)
class FsxSettings:
    file_system_id: str
    mount_name: str
    subnet_id: str


@dataclass(frozen=True)
class Settings:
    project: str
    environment: str
    region: str
    account: str
    data_bucket: str
    artifacts_bucket: str
    kms_key_arn: str
    sagemaker_role_arn: str
    training_image_uri: str
    processing_image_uri: str
    inference_image_uri: str
    code_s3_prefix: str
    subnet_ids: tuple[str, ...]
    security_group_ids: tuple[str, ...]
    fsx: FsxSettings | None
    allowed_instance_types: tuple[str, ...]
    tokenizer_instance_types: tuple[str, ...]
    max_instance_count: int
    spot_default: bool
    inter_container_encryption: bool
    default_max_runtime_seconds: int
    default_max_wait_seconds: int
    poll_seconds: int
    model_package_group: str
    topic_arn: str
    # Optional: on-demand USD per instance-hour, used for cost figures (else instance-seconds only).
    instance_prices: dict[str, float] = field(default_factory=dict)
    # Optional: whether jobs can reach the internet (NAT gateway); without it a Hub model id cannot download.
    internet_access: bool = True
    # --- security and spend (hyperparameters.policy_problems, spend.py, request_guard.py); all optional ---
    # Hub organizations whose models may run their own code (trust_remote_code, pinned commit); () = none.
    remote_code_hub_orgs: tuple[str, ...] = ()
    # report_to integrations beyond the local ones (none, tensorboard) that may receive metrics.
    allowed_report_to: tuple[str, ...] = ()
    # Worst-case USD a run may cost (every job of its fallback chain); None = no limit.
    max_run_cost_usd: float | None = None
    # Runs (running executions of `state_machine_arns`) the environment may have at once; None = no limit.
    max_concurrent_runs: int | None = None
    state_machine_arns: tuple[str, ...] = ()

    @property
    def project_buckets(self) -> tuple[str, str]:
        return (self.data_bucket, self.artifacts_bucket)

    @classmethod
    def from_dict(cls, raw: Any) -> Settings:
        if not isinstance(raw, dict):
            raise SettingsError(["(root): expected a JSON object"])
        problems: list[str] = []

        def get(name: str, kind: type | tuple[type, ...], *, optional: bool = False) -> Any:
            if name not in raw:
                if not optional:
                    problems.append(f"{name}: missing")
                return None
            value = raw[name]
            if value is None and optional:
                return None
            if isinstance(value, bool) and kind in (int, (int, float)) or not isinstance(value, kind):
                problems.append(f"{name}: expected {getattr(kind, '__name__', kind)}, got {value!r}")
                return None
            return value

        strings = {
            n: get(n, str)
            for n in (
                "project", "environment", "region", "account", "data_bucket", "artifacts_bucket",
                "kms_key_arn", "sagemaker_role_arn", "training_image_uri", "processing_image_uri",
                "inference_image_uri", "code_s3_prefix", "model_package_group", "topic_arn",
            )
        }
        lists = {n: get(n, list) for n in ("subnet_ids", "security_group_ids", "allowed_instance_types",
                                           "tokenizer_instance_types")}
        ints = {n: get(n, int) for n in ("max_instance_count", "default_max_runtime_seconds",
                                         "default_max_wait_seconds", "poll_seconds")}
        bools = {n: get(n, bool) for n in ("spot_default", "inter_container_encryption")}
        fsx_raw = get("fsx", dict, optional=True)
        prices_raw = get("instance_prices", dict, optional=True) or {}
        internet = get("internet_access", bool, optional=True)
        guard = _security_settings(raw, get, problems)

        for name, value in lists.items():
            if value is not None and not all(isinstance(v, str) and v for v in value):
                problems.append(f"{name}: expected a list of non-empty strings")
        for name in ("allowed_instance_types", "tokenizer_instance_types"):
            if lists[name] == []:
                problems.append(f"{name}: must not be empty")
        if strings["project"] is not None and not _PROJECT_RE.fullmatch(strings["project"]):
            problems.append("project: expected [a-z][a-z0-9-]{0,15}")
        if strings["environment"] is not None and not _PROJECT_RE.fullmatch(strings["environment"]):
            problems.append("environment: expected [a-z][a-z0-9-]{0,15}")
        if strings["code_s3_prefix"] is not None and not _S3_PREFIX_RE.fullmatch(strings["code_s3_prefix"]):
            problems.append("code_s3_prefix: expected s3://bucket/prefix/ (ending with '/')")
        sgs, subnets = lists["security_group_ids"], lists["subnet_ids"]
        if sgs is not None and len(sgs) > 5:
            problems.append("security_group_ids: SageMaker allows at most 5")
        if subnets is not None and len(subnets) > 16:
            problems.append("subnet_ids: SageMaker allows at most 16")
        if subnets and not sgs:
            problems.append("security_group_ids: required when subnet_ids are set")
        for name, value in ints.items():
            if value is not None and value < 1:
                problems.append(f"{name}: must be >= 1")
        fsx = None
        if fsx_raw is not None:
            missing = [k for k in ("file_system_id", "mount_name", "subnet_id") if not isinstance(fsx_raw.get(k), str)]
            if missing:
                problems.append(f"fsx: missing or non-string {', '.join(missing)}")
            else:
                fsx = FsxSettings(fsx_raw["file_system_id"], fsx_raw["mount_name"], fsx_raw["subnet_id"])
                if not sgs:
                    problems.append("security_group_ids: required when fsx is set")
        prices: dict[str, float] = {}
        for key, value in prices_raw.items():
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
                problems.append(f"instance_prices.{key}: expected a non-negative number")
            else:
                prices[key] = float(value)
        if problems:
            raise SettingsError(problems)
        return cls(
            **strings,
            subnet_ids=tuple(lists["subnet_ids"]),
            security_group_ids=tuple(lists["security_group_ids"]),
            fsx=fsx,
            allowed_instance_types=tuple(lists["allowed_instance_types"]),
            tokenizer_instance_types=tuple(lists["tokenizer_instance_types"]),
            **ints,
            **bools,
            instance_prices=prices,
            internet_access=True if internet is None else internet,
            **guard,
        )

    @property
    def name_prefix(self) -> str:
        """`<project>-<environment>`: every job name starts with it (the Lambda roles are scoped to it)."""
        return f"{self.project}-{self.environment}"


def _security_settings(raw: dict[str, Any], get: Any, problems: list[str]) -> dict[str, Any]:
    """The optional security and spend keys (see the block in Settings)."""
    out: dict[str, Any] = {}
    for name in ("remote_code_hub_orgs", "allowed_report_to", "state_machine_arns"):
        value = get(name, list, optional=True)
        if value is not None:
            if not all(isinstance(v, str) and v for v in value):
                problems.append(f"{name}: expected a list of non-empty strings")
            else:
                out[name] = tuple(value)
    cost = get("max_run_cost_usd", (int, float), optional=True)
    if cost is not None:
        if cost <= 0:
            problems.append("max_run_cost_usd: must be > 0")
        else:
            out["max_run_cost_usd"] = float(cost)
    runs = get("max_concurrent_runs", int, optional=True)
    if runs is not None:
        if runs < 1:
            problems.append("max_concurrent_runs: must be >= 1")
        else:
            out["max_concurrent_runs"] = runs
    return out


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
