"""The planned run as frozen dataclasses: the typed `$.run` of the execution state (runs/state.py).

planning.plan_run builds it in Prepare; `to_json` is what the state carries between the states, and every handler
after Prepare parses `$.run` back with `from_json` at its edge (`to_json(from_json(x)) == x`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from hfsm_lambda.spec.json_dataclass import decode, encode
from hfsm_lambda.spec.typed import RunSpec


@dataclass(frozen=True, kw_only=True)
class RunUris:
    checkpoint: str
    model_output: str
    outputs: str
    tokenizer_counts: str
    tokenizer: str
    summary: str
    metrics: str


@dataclass(frozen=True, kw_only=True)
class JobNames:
    tokenizer_map: str
    tokenizer_reduce: str
    train: tuple[str, ...]  # one per attempt

    def processing(self, stage: str) -> str:
        """The name of the tokenizer job of `stage` (tokenizer_map / tokenizer_reduce)."""
        return {"tokenizer_map": self.tokenizer_map, "tokenizer_reduce": self.tokenizer_reduce}[stage]


@dataclass(frozen=True, kw_only=True)
class Attempt:
    """The compute settings of one training attempt (the first attempt's, a fallback option applied)."""

    attempt: int
    job_name: str
    instance_type: str
    instance_count: int
    spot: bool


@dataclass(frozen=True, kw_only=True)
class Run:
    run_id: str
    spec: RunSpec
    source: Mapping[str, Any] | None  # {bucket, key, version_id} of a spec uploaded to runs/
    execution_arn: str | None
    created_at: str
    tokenizer_stage: bool
    max_attempts: int
    uris: RunUris
    job_names: JobNames
    attempts: tuple[Attempt, ...]
    # The stall board's key prefix in the job's TCPStore (training_code/hftrain/stall/watchdog.py), random per
    # run and given to its training jobs only (efa.STALL_BOARD_TOKEN_VARIABLE): another job that can reach the
    # store cannot name its keys. "" (a state planned before the token existed): the fixed prefix.
    stall_board_token: str = ""
    # Objects of channels every instance reads whole that the jobs will skip, one line per channel naming them and
    # why (lambda/data/preflight.py `skipped`; a ShardedByS3Key channel holding any is refused instead). Finish
    # puts them in the summary's data coverage.
    data_skipped: tuple[str, ...] = ()
    # The run's MLflow run (contract/tracking.py), opened by Prepare when tracking is on: every attempt logs to it
    # (RUN_ID_VARIABLE) and Finish completes it. "" (tracking off, or the server did not answer Prepare): the jobs
    # and Finish find the run by its pipeline run tag instead.
    mlflow_run_id: str = ""


def from_json(value: Any) -> Run:
    """The typed run of `$.run`; ValueError names the path of what is missing, unknown or mistyped."""
    return decode(Run, value)


def to_json(run: Run) -> dict[str, Any]:
    """`$.run` as the state carries it (planning's keys and order)."""
    return encode(run)
