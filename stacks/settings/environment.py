"""One typed, validated configuration object per environment, read from `cdk.json` context.

`load_config(context, env_name)` is the only entry point: it rejects unknown environments, unknown keys and bad
values with a `ConfigError` naming the key, the value and what is allowed, so a bad config fails `cdk synth`
before anything is deployed. Each setting is declared once, as a field of `EnvironmentConfig` or `FsxConfig`
made with `setting(...)` (lambda/config_fields.py, the one dialect the Lambdas' settings are declared in too):
its name, type, default, constraints and doc; rules across settings are `RULES`.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hfsm_lambda.config_fields import (
    Constraint,
    all_match,
    entries,
    field_errors,
    in_range,
    matches,
    non_empty,
    one_of,
    parse_fields,
    setting,
)
from hfsm_lambda.naming import INSTANCE_TYPE_RE, PROJECT_NAME

# ml.<family>.<size>: the pattern the Lambdas check a spec's instance types with (lambda/naming.py).
INSTANCE_TYPE = INSTANCE_TYPE_RE

ACCOUNT = re.compile(r"^\d{12}$")
REGION = re.compile(r"^[a-z]{2}(-gov)?-[a-z]+-\d$")
# The project name: one pattern, lambda/naming.py's, which the Lambdas' settings check too.
PROJECT_NAME_RE = re.compile(PROJECT_NAME)
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


# --- constraints of single settings (the message ends with what is allowed) -----------------------------------
def _cidr_problem(value: str) -> str | None:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as exc:
        return f"not a CIDR block ({exc}); e.g. 10.20.0.0/16"
    return None if net.version == 4 and 16 <= net.prefixlen <= 24 else "an IPv4 CIDR with a /16 to /24 prefix"


def _tag_ok(key: Any, value: Any) -> bool:
    return isinstance(key, str) and isinstance(value, str) and 0 < len(key) <= 128 and len(value) <= 256


def _price_ok(instance_type: Any, price: Any) -> bool:
    return (bool(INSTANCE_TYPE.fullmatch(instance_type)) and isinstance(price, int | float)
            and not isinstance(price, bool) and price >= 0)


_CIDR = Constraint(lambda v: _cidr_problem(v) is None, lambda v: _cidr_problem(v) or "")
_BUCKET_PREFIX = Constraint(lambda p: p.endswith("/") and not p.startswith("/"),
                            "a bucket prefix like 'datasets/' (no leading /)")
_ABSOLUTE_PATH = Constraint(lambda p: p.startswith("/"), "an absolute path like /datasets")
_NOT_NONE_OR_ALL = Constraint(lambda services: "none" not in services and "all" not in services,
                              "service names, not none or all")
_INSTANCE_TYPES = matches(INSTANCE_TYPE, "SageMaker instance types of the form ml.<family>.<size>, e.g. ml.g5.2xlarge",
                          kind="each")
_NON_EMPTY = non_empty("a non-empty list")
_VERSION = matches(VERSION, "a version like 5.3.0")
_EXPIRY_DAYS = in_range(1, 3650, "1 to 3650 days")
_SERVICE_NAMES = all_match(HUB_ORG, "a list of names (letters, digits, _ . -)")


# --- the declarations: one field per setting -------------------------------------------------------------------
@dataclass(frozen=True)
class FsxConfig:
    enabled: bool = setting("FSx for Lustre linked to the data bucket", default=False)
    deployment_type: str = setting("the file system's deployment type", default="SCRATCH_2",
                                   checks=one_of(FSX_DEPLOYMENT_TYPES, f"one of {', '.join(FSX_DEPLOYMENT_TYPES)}"))
    storage_capacity_gib: int = setting("SSD capacity (GiB); its steps depend on deployment_type (_fsx_errors)",
                                        default=1200)
    per_unit_storage_throughput: int | None = setting(
        "MB/s/TiB; persistent types only, the values of FSX_THROUGHPUT (_fsx_errors)", default=None)
    import_prefix: str = setting("prefix of the data bucket that the file system mirrors (imported lazily, new "
                                 "objects auto-imported)", default="datasets/", checks=_BUCKET_PREFIX)
    file_system_path: str = setting("where that prefix appears inside the file system (data repository "
                                    "associations only)", default="/datasets", checks=_ABSOLUTE_PATH)


TRACKING_SERVER_SIZES = ("Small", "Medium", "Large")


@dataclass(frozen=True)
class TrackingConfig:
    enabled: bool = setting("a SageMaker managed MLflow tracking server (billed per hour while it exists: README "
                            "\"Tracking\"), reached by the jobs through the SageMaker Experiments VPC endpoint",
                            default=False)
    size: str = setting("the tracking server's size (AWS: Small for up to 25 users, Medium 50, Large 100)",
                        default="Small", checks=one_of(TRACKING_SERVER_SIZES,
                                                       f"one of {', '.join(TRACKING_SERVER_SIZES)}"))


@dataclass(frozen=True)
class EnvironmentConfig:
    name: str = setting("the environment: its key under context.environments", read=False)
    project: str = setting("context key `project`: every resource name starts with `<project>-<name>`",
                           read=False,
                           checks=matches(PROJECT_NAME_RE, "1-16 chars of a-z, 0-9 and '-', starting with a letter"))
    account: str = setting("AWS account of the environment", checks=matches(ACCOUNT, "a 12-digit AWS account id"))
    region: str = setting("AWS region of the environment", checks=matches(REGION, "a region name like us-east-1"))
    availability_zones: tuple[str, ...] = setting(
        "zones of the VPC's subnets, pinned: synth makes no AWS lookup (_zone_errors)")
    vpc_cidr: str = setting("the VPC's address range", default="10.20.0.0/16", checks=_CIDR)
    nat_gateway: bool = setting("NAT for Hub downloads; without it subnets are isolated", default=False)
    fsx: FsxConfig = setting("FSx for Lustre linked to the data bucket", default=FsxConfig)
    tracking: TrackingConfig = setting("MLflow tracking of every run (stacks/tracking_server.py)",
                                       default=TrackingConfig)
    training_instance_types: tuple[str, ...] = setting(
        "training instance types a spec may name", default=("ml.g5.xlarge", "ml.g5.2xlarge", "ml.g5.12xlarge"),
        checks=(_NON_EMPTY, _INSTANCE_TYPES))
    processing_instance_types: tuple[str, ...] = setting(
        "tokenizer-job instance types a spec may name", default=("ml.c5.2xlarge", "ml.m5.2xlarge"),
        checks=(_NON_EMPTY, _INSTANCE_TYPES))
    max_instance_count: int = setting("instances per job at most", default=2, checks=in_range(
        1, MAX_INSTANCE_COUNT, f"an integer from 1 to {MAX_INSTANCE_COUNT}"))
    spot_default: bool = setting("managed spot training unless the spec says otherwise", default=True)
    transformers_version: str = setting("HF training image's transformers", default="5.3.0", checks=_VERSION)
    pytorch_version: str = setting("HF training image's PyTorch", default="2.9.0", checks=_VERSION)
    processing_pytorch_version: str = setting("PyTorch CPU image of the processing jobs", default="2.8.0",
                                              checks=_VERSION)
    inference_transformers_version: str = setting(
        "HF inference image's transformers. 4.51.3: transformers 5 has no question-answering/summarization "
        "pipelines; the training code writes tokenizer files 4.x reads (hftrain/run/export.py), checked in "
        "stacks/assets/inference_compat.py", default="4.51.3", checks=_VERSION)
    inference_pytorch_version: str = setting("HF inference image's PyTorch", default="2.6.0", checks=_VERSION)
    log_retention_days: int = setting("retention of the project's log groups", default=30, checks=one_of(
        LOG_RETENTION_DAYS, f"one of CloudWatch's retention periods {list(LOG_RETENTION_DAYS)}"))
    removal_policy: str = setting("`retain` keeps buckets, key, logs and the model group on stack deletion",
                                  default="destroy", checks=one_of(("retain", "destroy"), "'retain' or 'destroy'"))
    notification_emails: tuple[str, ...] = setting("SNS e-mail subscriptions", default=(),
                                                   checks=matches(EMAIL, "an e-mail address", kind="each"))
    tags: dict[str, str] = setting("added to every resource (with project, environment)", default={},
                                   checks=entries(_tag_ok,
                                                  "string keys (1-128 chars) and string values (<= 256 chars)"))
    checkpoint_expiry_days: int = setting("lifecycle expiry of checkpoints", default=14, checks=_EXPIRY_DAYS)
    noncurrent_version_expiry_days: int = setting("lifecycle expiry of noncurrent object versions", default=30,
                                                  checks=_EXPIRY_DAYS)
    inter_container_encryption: bool = setting("encrypt traffic between a job's instances", default=False)
    default_max_runtime_seconds: int = setting("a job's MaxRuntimeInSeconds unless the spec sets one",
                                               default=86_400, checks=in_range(
                                                   60, 28 * 86_400, "60 s to 28 days (2419200 s), SageMaker's limit"))
    poll_seconds: int = setting("how often the state machines look at a running job", default=60,
                                checks=in_range(1, 3600, "1 to 3600 seconds"))
    instance_prices: dict[str, float] = setting(
        "on-demand USD per instance-hour, for the cost in run summaries (spot is billed from "
        "BillableTimeInSeconds); every training and processing type needs one (_price_errors)",
        default={}, checks=entries(
            _price_ok, "ml.<family>.<size> -> a non-negative USD price per instance-hour"))
    # --- security and spend (README "Security") ------------------------------------------------------------
    s3_prefix_list_id: str = setting(
        "the region's S3 managed prefix list (com.amazonaws.<region>.s3): jobs reach S3 only through it "
        "(pinned: synth makes no AWS lookup)", default="pl-63a5400a", checks=matches(
            PREFIX_LIST, "the region's S3 prefix list id, pl-... (aws ec2 describe-managed-prefix-lists "
            "--filters Name=prefix-list-name,Values=com.amazonaws.<region>.s3)"))
    max_run_cost_usd: float = setting(
        "worst-case USD one run may cost (every job of its fallback chain at on-demand price for its max runtime)",
        default=500.0, checks=in_range(0, 10_000_000, "a USD amount > 0", low_exclusive=True))
    max_concurrent_runs: int = setting("runs (running executions of the two state machines) at once", default=4,
                                       checks=in_range(1, 1000, "1 to 1000"))
    monthly_budget_usd: float = setting(
        "AWS Budgets monthly cost budget of the environment (tag project=<project>), alarms to the SNS topic",
        default=2000.0, checks=in_range(0, 100_000_000, "a USD amount > 0", low_exclusive=True))
    remote_code_hub_orgs: tuple[str, ...] = setting(
        "Hub organizations whose models may run their own code (trust_remote_code at a pinned commit); needs NAT "
        "(_internet_errors)", default=(), checks=_SERVICE_NAMES)
    allowed_report_to: tuple[str, ...] = setting(
        "report_to integrations beyond none/tensorboard that may receive metrics (e.g. mlflow); needs NAT "
        "(_internet_errors)", default=(), checks=(_SERVICE_NAMES, _NOT_NONE_OR_ALL))
    run_submitter_arns: tuple[str, ...] = setting(
        "principals besides the run-submitter role that may write run specs (runs/*.json), e.g. a CI role",
        default=(), checks=matches(PRINCIPAL_ARN, "IAM role or user ARNs", kind="each"))
    manage_sagemaker_log_groups: bool = setting(
        "create /aws/sagemaker/{Training,Processing}Jobs with the project key and retention (false if the account "
        "already has them: they are shared by every SageMaker job of the account and region)", default=True)

    @property
    def prefix(self) -> str:
        """Name prefix for every resource of this environment, e.g. `hfsm-dev`."""
        return f"{self.project}-{self.name}"

    @property
    def retain(self) -> bool:
        return self.removal_policy == "retain"


# --- rules across settings --------------------------------------------------------------------------------------
def _zone_errors(cfg: EnvironmentConfig, where: str) -> list[str]:
    azs = cfg.availability_zones
    ok = len(azs) >= 2 and len(set(azs)) == len(azs) and all(
        isinstance(az, str) and az.startswith(cfg.region) for az in azs)
    return [] if ok else [f"{where}.availability_zones={list(azs)!r}: at least 2 distinct zones of region {cfg.region}"]


def _fsx_errors(cfg: EnvironmentConfig, where: str) -> list[str]:
    """Capacity steps and throughput values depend on the deployment type."""
    fsx, errors = cfg.fsx, []
    if not _fsx_capacity_ok(fsx.deployment_type, fsx.storage_capacity_gib):
        step = 3600 if fsx.deployment_type == "SCRATCH_1" else 2400
        errors.append(f"{where}.fsx.storage_capacity_gib={fsx.storage_capacity_gib!r}: {fsx.deployment_type} takes "
                      f"1200, 2400, then multiples of {step} GiB")
    throughputs = FSX_THROUGHPUT.get(fsx.deployment_type)
    allowed = (f"{fsx.deployment_type} takes none (null)" if throughputs is None
               else f"{fsx.deployment_type} takes one of {list(throughputs)}")
    if fsx.per_unit_storage_throughput not in (throughputs or (None,)):
        errors.append(f"{where}.fsx.per_unit_storage_throughput={fsx.per_unit_storage_throughput!r}: {allowed}")
    return errors


def _price_errors(cfg: EnvironmentConfig, where: str) -> list[str]:
    """max_run_cost_usd bounds a run by the prices of the instance types it may use."""
    unpriced = sorted(t for t in (*cfg.training_instance_types, *cfg.processing_instance_types)
                      if t not in cfg.instance_prices)
    return [f"{where}.instance_prices={unpriced!r}: a price for every training and processing instance type "
            "(max_run_cost_usd bounds a run with them)"] if unpriced else []


def _internet_errors(cfg: EnvironmentConfig, where: str) -> list[str]:
    """Remote code and report_to services are reached over the internet: only through a NAT gateway."""
    return [f"{where}.{key}={list(getattr(cfg, key))!r}: empty unless nat_gateway is true (the jobs would need "
            "internet access)" for key in ("remote_code_hub_orgs", "allowed_report_to")
            if getattr(cfg, key) and not cfg.nat_gateway]


RULES: tuple[Callable[[EnvironmentConfig, str], list[str]], ...] = (
    _zone_errors, _fsx_errors, _price_errors, _internet_errors)


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
    values = parse_fields(EnvironmentConfig, raw, where, errors)
    if errors:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(errors))
    cfg = EnvironmentConfig(name=env_name, project=str(context.get("project", "hfsm")), **values)
    errors = field_errors(cfg, where)
    for rule in RULES:
        errors += rule(cfg, where)
    if errors:
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(errors))
    return cfg
