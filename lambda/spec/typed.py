"""The resolved run spec as frozen dataclasses: what every step after Prepare reads.

Prepare validates the JSON against the declaration (run_spec.SPEC, which also writes the docs and the JSON Schema)
and parses the resolved dict once: `from_json(run_spec.parse_spec(raw, settings))`. `to_json` writes the same dict
back (the run travels between the state machine's states as JSON): `to_json(from_json(x)) == x`, keys in the
declaration's order. One dataclass per object of the declaration, one field per declared field, in declaration
order (tests/lambda/test_lambda_typed_spec.py keeps them in step). A field the resolved spec may lack is None
(`absent()`); free-form objects (`hyperparameters`, `tags`, `distribution.fsdp.config`) stay mappings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hfsm_lambda.spec.json_dataclass import absent, decode, encode

S3_PREFIX = "s3://"


@dataclass(frozen=True, kw_only=True)
class Channel:
    """A `data` channel: exactly one of `s3` (a folder URI, '/' ended) or `fsx` (a path under the mount)."""

    s3: str | None = absent()
    fsx: str | None = absent()
    distribution: str
    input_mode: str


@dataclass(frozen=True, kw_only=True)
class Data:
    train: Channel
    validation: Channel | None = absent()
    test: Channel | None = absent()

    def channels(self) -> dict[str, Channel]:
        """name -> channel of the channels the spec has, in declaration order."""
        return {name: channel for name in ("train", "validation", "test")
                if (channel := getattr(self, name)) is not None}

    def get(self, name: str) -> Channel | None:
        return self.channels().get(name)


@dataclass(frozen=True, kw_only=True)
class Tokenizer:
    type: str
    vocab_size: int
    min_frequency: int
    special_tokens: tuple[str, ...]
    text_field: str
    lowercase: bool
    model_max_length: int
    channel: str
    instance_type: str
    instance_count: int
    volume_size_gb: int
    max_runtime_seconds: int


@dataclass(frozen=True, kw_only=True)
class Compute:
    instance_type: str
    instance_count: int
    volume_size_gb: int
    processes_per_host: int | None = absent()


@dataclass(frozen=True, kw_only=True)
class Fsdp:
    sharding: str
    config: Mapping[str, Any]


@dataclass(frozen=True, kw_only=True)
class Distribution:
    strategy: str
    fsdp: Fsdp | None = absent()


@dataclass(frozen=True, kw_only=True)
class Spot:
    enabled: bool
    max_wait_seconds: int


@dataclass(frozen=True, kw_only=True)
class Watchdog:
    intervals: float
    action: str


@dataclass(frozen=True, kw_only=True)
class Checkpoint:
    every_steps: int
    every_minutes: int | str  # minutes, or "auto"
    watchdog: Watchdog


@dataclass(frozen=True, kw_only=True)
class Stall:
    minutes: float | str  # minutes, or "auto"
    startup_minutes: float | str  # minutes, or "auto"
    stragglers: str = "warn"
    straggler_minutes: float = 5.0
    action: str


@dataclass(frozen=True, kw_only=True)
class Recovery:
    in_job_restarts: int


@dataclass(frozen=True, kw_only=True)
class Network:
    require_efa: bool


@dataclass(frozen=True, kw_only=True)
class FallbackOption:
    """Applied over the first attempt's settings: a None field keeps the first attempt's value."""

    instance_type: str | None = absent()
    spot: bool | None = absent()


@dataclass(frozen=True, kw_only=True)
class Fallback:
    options: tuple[FallbackOption, ...]
    max_attempts: int


@dataclass(frozen=True, kw_only=True)
class Tracking:
    enabled: bool
    experiment: str
    tensorboard: bool


@dataclass(frozen=True, kw_only=True)
class Local:
    interrupt_at_step: int | None = absent()


@dataclass(frozen=True, kw_only=True)
class RunSpec:
    """The resolved run spec (docs/run_spec.md). `stall` and `network` are None only in a run planned before those
    fields existed (an execution in flight across a deploy): their readers treat None as "off" / the default."""

    version: int
    name: str
    description: str | None = absent()
    task: str
    model: str  # a Hub id or an s3:// URI
    data: Data
    tokenizer: Tokenizer | None = absent()
    compute: Compute
    distribution: Distribution
    max_runtime_seconds: int
    spot: Spot
    checkpoint: Checkpoint
    stall: Stall | None = absent()
    recovery: Recovery | None = absent()
    network: Network | None = absent()
    fallback: Fallback
    hyperparameters: Mapping[str, Any]
    tags: Mapping[str, str]
    tracking: Tracking | None = absent()  # None: a run planned before tracking existed (off)
    local: Local | None = absent()

    @property
    def model_in_s3(self) -> bool:
        return self.model.startswith(S3_PREFIX)

    @property
    def distributed(self) -> bool:
        return self.distribution.strategy != "none"


def from_json(value: Any) -> RunSpec:
    """The typed spec of a resolved spec (run_spec.parse_spec's result); ValueError names what does not fit."""
    return decode(RunSpec, value)


def to_json(spec: RunSpec) -> dict[str, Any]:
    """The resolved spec again, as parse_spec returned it (keys in the declaration's order: the fields' order)."""
    return encode(spec)
