"""One typed, validated configuration object per environment, read from `cdk.json` context.

`load_config(context, env_name)` is the only entry point: it rejects unknown environments, unknown keys and bad
values with a `ConfigError` naming the key, the value and what is allowed, so a bad config fails `cdk synth`
before anything is deployed.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field, fields
from typing import Any

from hfsm_lambda.naming import INSTANCE_TYPE_RE

# ml.<family>.<size>: the pattern the Lambdas check a spec's instance types with (lambda/naming.py).
INSTANCE_TYPE = INSTANCE_TYPE_RE

ACCOUNT = re.compile(r"^\d{12}$")
REGION = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
PROJECT = re.compile(r"^[a-z][a-z0-9-]{1,15}$")
VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")
EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
PREFIX_LIST = re.compile(r"^pl-[0-9a-f]{8,17}$")
HUB_ORG = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}$")
PRINCIPAL_ARN = re.compile(r"^arn:aws[a-z-]*:iam::\d{12}:(role|user)/[\w+=,.@/-]+$")
# CloudWatch Logs accepts only these retention periods (days).
LOG_RETENTION_DAYS = (1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557,
                      2922, 3288, 3653)
FSX_DEPLOYMENT_TYPES = ("SCRATCH_1", "SCRATCH_2", "PERSISTENT_1", "PERSISTENT_2")
# Per-unit storage throughput (MB/s/TiB) that SSD file systems of each type accept; scratch types take none.
FSX_THROUGHPUT = {"PERSISTENT_1": (50, 100, 200), "PERSISTENT_2": (125, 250, 500, 1000)}
# Only these types link to S3 through a data repository association; the older ones use an import path.
FSX_DRA_TYPES = ("PERSISTENT_2",)
MAX_INSTANCE_COUNT = 100


class ConfigError(ValueError):
    """A bad value in cdk.json context: the message names the key, the value and what is allowed."""


def _fsx_capacity_ok(deployment_type: str, gib: int) -> bool:
    """FSx for Lustre SSD capacity rules: 1200, 2400, then steps of 3600 (SCRATCH_1) or 2400 (the others)."""
    step = 3600 if deployment_type == "SCRATCH_1" else 2400
    return gib in (1200, 2400) or (gib > 0 and gib % step == 0)


@dataclass(frozen=True)
class FsxConfig:
    enabled: bool = False
    deployment_type: str = "SCRATCH_2"
    storage_capacity_gib: int = 1200
    per_unit_storage_throughput: int | None = None
    # Prefix of the data bucket that the file system mirrors (imported lazily, new objects auto-imported).
    import_prefix: str = "datasets/"
    # Where that prefix appears inside the file system (data repository associations only).
    file_system_path: str = "/datasets"


@dataclass(frozen=True)
class EnvironmentConfig:
    name: str
    project: str
    account: str
    region: str
    availability_zones: tuple[str, ...]
    vpc_cidr: str = "10.20.0.0/16"
    nat_gateway: bool = False
    fsx: FsxConfig = field(default_factory=FsxConfig)
    training_instance_types: tuple[str, ...] = ("ml.g5.xlarge", "ml.g5.2xlarge", "ml.g5.12xlarge")
    processing_instance_types: tuple[str, ...] = ("ml.c5.2xlarge", "ml.m5.2xlarge")
    max_instance_count: int = 2
    spot_default: bool = True
    transformers_version: str = "5.3.0"
    pytorch_version: str = "2.9.0"
    processing_pytorch_version: str = "2.8.0"
    # 4.51.3: transformers 5 has no question-answering/summarization pipelines; the training code writes tokenizer
    # files 4.x reads (hftrain/export.py), checked in stacks/inference_compat.py
    inference_transformers_version: str = "4.51.3"
    inference_pytorch_version: str = "2.6.0"
    log_retention_days: int = 30
    removal_policy: str = "destroy"
    notification_emails: tuple[str, ...] = ()
    tags: dict[str, str] = field(default_factory=dict)
    checkpoint_expiry_days: int = 14
    noncurrent_version_expiry_days: int = 30
    inter_container_encryption: bool = False
    default_max_runtime_seconds: int = 86_400
    poll_seconds: int = 60
    # On-demand USD per instance-hour, for the cost in run summaries (spot is billed from BillableTimeInSeconds).
    instance_prices: dict[str, float] = field(default_factory=dict)
    # --- security and spend (README "Security") ------------------------------------------------------------
    # The region's S3 managed prefix list (com.amazonaws.<region>.s3): jobs reach S3 only through it (pinned:
    # synth makes no AWS lookup).
    s3_prefix_list_id: str = "pl-63a5400a"
    # Worst-case USD one run may cost (every job of its fallback chain at on-demand price for its max runtime).
    max_run_cost_usd: float = 500.0
    # Runs (running executions of the two state machines) at once.
    max_concurrent_runs: int = 4
    # AWS Budgets monthly cost budget of the environment (tag project=<project>), alarms to the SNS topic.
    monthly_budget_usd: float = 2000.0
    # Hub organizations whose models may run their own code (trust_remote_code at a pinned commit); needs NAT.
    remote_code_hub_orgs: tuple[str, ...] = ()
    # report_to integrations beyond none/tensorboard that may receive metrics (e.g. mlflow); needs NAT.
    allowed_report_to: tuple[str, ...] = ()
    # Principals besides the run-submitter role that may write run specs (runs/*.json), e.g. a CI role.
    run_submitter_arns: tuple[str, ...] = ()
    # Create /aws/sagemaker/{Training,Processing}Jobs with the project key and retention (false if the account
    # already has them: they are shared by every SageMaker job of the account and region).
    manage_sagemaker_log_groups: bool = True

    @property
    def prefix(self) -> str:
        """Name prefix for every resource of this environment, e.g. `hfsm-dev`."""
        return f"{self.project}-{self.name}"

    @property
    def retain(self) -> bool:
        return self.removal_policy == "retain"


def _check(errors: list[str], ok: bool, key: str, value: Any, allowed: str) -> None:
    if not ok:
        errors.append(f"{key}={value!r}: {allowed}")


def _known_keys(errors: list[str], where: str, raw: dict[str, Any], cls: type) -> None:
    allowed = sorted(f.name for f in fields(cls) if f.name not in ("name", "project"))
    for key in sorted(set(raw) - set(allowed)):
        errors.append(f"{where}.{key}: unknown key; allowed keys are {', '.join(allowed)}")


def _validate(cfg: EnvironmentConfig, where: str) -> list[str]:
    errors: list[str] = []
    _check(errors, bool(PROJECT.match(cfg.project)), "project", cfg.project,
           "2-16 chars of a-z, 0-9 and '-', starting with a letter")
    _check(errors, bool(ACCOUNT.match(cfg.account)), f"{where}.account", cfg.account, "a 12-digit AWS account id")
    _check(errors, bool(REGION.match(cfg.region)), f"{where}.region", cfg.region, "a region name like us-east-1")
    azs = cfg.availability_zones
    _check(errors, len(azs) >= 2 and len(set(azs)) == len(azs) and all(az.startswith(cfg.region) for az in azs),
           f"{where}.availability_zones", list(azs), f"at least 2 distinct zones of region {cfg.region}")
    try:
        net = ipaddress.ip_network(cfg.vpc_cidr, strict=True)
        _check(errors, net.version == 4 and 16 <= net.prefixlen <= 24, f"{where}.vpc_cidr", cfg.vpc_cidr,
               "an IPv4 CIDR with a /16 to /24 prefix")
    except ValueError as exc:
        errors.append(f"{where}.vpc_cidr={cfg.vpc_cidr!r}: not a CIDR block ({exc}); e.g. 10.20.0.0/16")
    fsx = cfg.fsx
    _check(errors, fsx.deployment_type in FSX_DEPLOYMENT_TYPES, f"{where}.fsx.deployment_type",
           fsx.deployment_type, f"one of {', '.join(FSX_DEPLOYMENT_TYPES)}")
    _check(errors, _fsx_capacity_ok(fsx.deployment_type, fsx.storage_capacity_gib),
           f"{where}.fsx.storage_capacity_gib", fsx.storage_capacity_gib,
           f"{fsx.deployment_type} takes 1200, 2400, then multiples of "
           f"{3600 if fsx.deployment_type == 'SCRATCH_1' else 2400} GiB")
    throughputs = FSX_THROUGHPUT.get(fsx.deployment_type)
    if throughputs is None:
        _check(errors, fsx.per_unit_storage_throughput is None, f"{where}.fsx.per_unit_storage_throughput",
               fsx.per_unit_storage_throughput, f"{fsx.deployment_type} takes none (null)")
    else:
        _check(errors, fsx.per_unit_storage_throughput in throughputs, f"{where}.fsx.per_unit_storage_throughput",
               fsx.per_unit_storage_throughput, f"{fsx.deployment_type} takes one of {list(throughputs)}")
    _check(errors, fsx.import_prefix.endswith("/") and not fsx.import_prefix.startswith("/"),
           f"{where}.fsx.import_prefix", fsx.import_prefix, "a bucket prefix like 'datasets/' (no leading /)")
    _check(errors, fsx.file_system_path.startswith("/"), f"{where}.fsx.file_system_path",
           fsx.file_system_path, "an absolute path like /datasets")
    for key in ("training_instance_types", "processing_instance_types"):
        types = getattr(cfg, key)
        _check(errors, len(types) > 0, f"{where}.{key}", list(types), "a non-empty list")
        for t in types:
            _check(errors, bool(INSTANCE_TYPE.fullmatch(t)), f"{where}.{key}", t,
                   "SageMaker instance types of the form ml.<family>.<size>, e.g. ml.g5.2xlarge")
    _check(errors, 1 <= cfg.max_instance_count <= MAX_INSTANCE_COUNT, f"{where}.max_instance_count",
           cfg.max_instance_count, f"an integer from 1 to {MAX_INSTANCE_COUNT}")
    for key in ("transformers_version", "pytorch_version", "processing_pytorch_version",
                "inference_transformers_version", "inference_pytorch_version"):
        _check(errors, bool(VERSION.match(getattr(cfg, key))), f"{where}.{key}", getattr(cfg, key),
               "a version like 5.3.0")
    _check(errors, cfg.log_retention_days in LOG_RETENTION_DAYS, f"{where}.log_retention_days",
           cfg.log_retention_days, f"one of CloudWatch's retention periods {list(LOG_RETENTION_DAYS)}")
    _check(errors, cfg.removal_policy in ("retain", "destroy"), f"{where}.removal_policy", cfg.removal_policy,
           "'retain' or 'destroy'")
    for email in cfg.notification_emails:
        _check(errors, bool(EMAIL.match(email)), f"{where}.notification_emails", email, "an e-mail address")
    for k, v in cfg.tags.items():
        _check(errors, isinstance(k, str) and isinstance(v, str) and 0 < len(k) <= 128 and len(v) <= 256,
               f"{where}.tags", {k: v}, "string keys (1-128 chars) and string values (<= 256 chars)")
    _check(errors, 1 <= cfg.checkpoint_expiry_days <= 3650, f"{where}.checkpoint_expiry_days",
           cfg.checkpoint_expiry_days, "1 to 3650 days")
    _check(errors, 1 <= cfg.noncurrent_version_expiry_days <= 3650, f"{where}.noncurrent_version_expiry_days",
           cfg.noncurrent_version_expiry_days, "1 to 3650 days")
    _check(errors, 60 <= cfg.default_max_runtime_seconds <= 28 * 86_400, f"{where}.default_max_runtime_seconds",
           cfg.default_max_runtime_seconds, "60 s to 28 days (2419200 s), SageMaker's limit")
    _check(errors, 1 <= cfg.poll_seconds <= 3600, f"{where}.poll_seconds", cfg.poll_seconds, "1 to 3600 seconds")
    errors += _security_errors(cfg, where)
    for t, price in cfg.instance_prices.items():
        _check(errors, bool(INSTANCE_TYPE.fullmatch(t)) and isinstance(price, int | float) and not isinstance(price, bool)
               and price >= 0, f"{where}.instance_prices", {t: price},
               "ml.<family>.<size> -> a non-negative USD price per instance-hour")
    return errors


def _security_errors(cfg: EnvironmentConfig, where: str) -> list[str]:
    errors: list[str] = []
    _check(errors, bool(PREFIX_LIST.match(cfg.s3_prefix_list_id)), f"{where}.s3_prefix_list_id",
           cfg.s3_prefix_list_id, "the region's S3 prefix list id, pl-... (aws ec2 describe-managed-prefix-lists "
           "--filters Name=prefix-list-name,Values=com.amazonaws.<region>.s3)")
    _check(errors, 0 < cfg.max_run_cost_usd <= 10_000_000, f"{where}.max_run_cost_usd", cfg.max_run_cost_usd,
           "a USD amount > 0")
    _check(errors, 1 <= cfg.max_concurrent_runs <= 1000, f"{where}.max_concurrent_runs", cfg.max_concurrent_runs,
           "1 to 1000")
    _check(errors, 0 < cfg.monthly_budget_usd <= 100_000_000, f"{where}.monthly_budget_usd", cfg.monthly_budget_usd,
           "a USD amount > 0")
    unpriced = sorted(t for t in (*cfg.training_instance_types, *cfg.processing_instance_types)
                      if t not in cfg.instance_prices)
    _check(errors, not unpriced, f"{where}.instance_prices", unpriced,
           "a price for every training and processing instance type (max_run_cost_usd bounds a run with them)")
    for key in ("remote_code_hub_orgs", "allowed_report_to"):
        values = getattr(cfg, key)
        _check(errors, all(isinstance(v, str) and HUB_ORG.match(v) for v in values), f"{where}.{key}", list(values),
               "a list of names (letters, digits, _ . -)")
        _check(errors, not values or cfg.nat_gateway, f"{where}.{key}", list(values),
               "empty unless nat_gateway is true (the jobs would need internet access)")
    _check(errors, "none" not in cfg.allowed_report_to and "all" not in cfg.allowed_report_to,
           f"{where}.allowed_report_to", list(cfg.allowed_report_to), "service names, not none or all")
    for arn in cfg.run_submitter_arns:
        _check(errors, isinstance(arn, str) and bool(PRINCIPAL_ARN.match(arn)), f"{where}.run_submitter_arns", arn,
               "IAM role or user ARNs")
    return errors


_TYPES: dict[str, type | tuple[type, ...]] = {
    "account": str, "region": str, "vpc_cidr": str, "nat_gateway": bool, "max_instance_count": int,
    "spot_default": bool, "log_retention_days": int, "removal_policy": str, "checkpoint_expiry_days": int,
    "noncurrent_version_expiry_days": int, "inter_container_encryption": bool,
    "default_max_runtime_seconds": int, "poll_seconds": int, "tags": dict, "instance_prices": dict,
    "availability_zones": list, "training_instance_types": list, "processing_instance_types": list,
    "notification_emails": list, "fsx": dict,
    "transformers_version": str, "pytorch_version": str, "processing_pytorch_version": str,
    "inference_transformers_version": str, "inference_pytorch_version": str,
    "s3_prefix_list_id": str, "max_run_cost_usd": (int, float), "max_concurrent_runs": int,
    "monthly_budget_usd": (int, float), "remote_code_hub_orgs": list, "allowed_report_to": list,
    "run_submitter_arns": list, "manage_sagemaker_log_groups": bool,
}
_FSX_TYPES: dict[str, type | tuple[type, ...]] = {
    "enabled": bool, "deployment_type": str, "storage_capacity_gib": int,
    "per_unit_storage_throughput": (int, type(None)), "import_prefix": str, "file_system_path": str,
}


def _typed(errors: list[str], where: str, raw: dict[str, Any], types: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in raw.items():
        want = types.get(key)
        if want is None:
            continue  # reported as an unknown key
        # bool is an int subclass: a `true` where a number belongs is a mistake, not 1.
        bad_bool = isinstance(value, bool) and want is not bool and bool not in (want if isinstance(want, tuple)
                                                                                 else (want,))
        if not isinstance(value, want) or bad_bool:
            names = " or ".join(t.__name__ for t in (want if isinstance(want, tuple) else (want,)))
            errors.append(f"{where}.{key}={value!r}: must be {names.replace('NoneType', 'null')}")
            continue
        out[key] = tuple(value) if isinstance(value, list) else value
    return out


def load_config(context: dict[str, Any], env_name: str) -> EnvironmentConfig:
    """Builds the validated config of `env_name` from the `project` and `environments` context keys."""
    environments = context.get("environments")
    if not isinstance(environments, dict) or not environments:
        raise ConfigError("cdk.json context.environments: missing; it maps environment names to settings")
    if env_name not in environments:
        raise ConfigError(f"env={env_name!r}: unknown environment; choose one of {', '.join(sorted(environments))}"
                          " with -c env=NAME")
    raw = environments[env_name]
    where = f"environments.{env_name}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: must be an object of settings")
    errors: list[str] = []
    _known_keys(errors, where, raw, EnvironmentConfig)
    for required in ("account", "region", "availability_zones"):
        if required not in raw:
            errors.append(f"{where}.{required}: missing; it is required")
    values = _typed(errors, where, raw, _TYPES)
    fsx_raw = values.pop("fsx", {})
    _known_keys(errors, f"{where}.fsx", fsx_raw, FsxConfig)
    fsx = FsxConfig(**_typed(errors, f"{where}.fsx", fsx_raw, _FSX_TYPES))
    if errors:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(errors))
    cfg = EnvironmentConfig(name=env_name, project=str(context.get("project", "hfsm")), fsx=fsx, **values)
    errors = _validate(cfg, where)
    if errors:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(errors))
    return cfg
