"""The execution state the state machines carry between the functions: one JSON object with snake_case keys.

Declared once, here: each key's type and what it holds (`Annotated` with a `Key`), the objects under `job` and
`status`, and the inputs each handler gets. stacks/state_machines.py builds its JSONPaths with `path()` (an
undeclared key fails synth), the handlers read optional parts with `section()`, and CONTRACTS.md's state table is
generated from `ExecutionState` (`make docs`; a test fails when it is stale).
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import Annotated, Any, Literal, TypedDict


@dataclass(frozen=True)
class Key:
    """What one key of the state holds, who writes it (a handler or a state) and who reads it."""

    written_by: str
    read_by: str
    doc: str


JobState = Literal["running", "completed", "retryable", "failed"]


class ErrorInfo(TypedDict):
    """What a Catch writes: the error's name (the handler's exception class) and its message."""

    Error: str
    Cause: str


class Job(TypedDict, total=False):
    """A started job (start_processing / start_training)."""

    job_type: Literal["processing", "training"]
    stage: str
    job_name: str
    job_arn: str
    attempt: int
    created: bool
    instance_type: str
    instance_count: int
    spot: bool
    links: dict[str, str]
    run_id: str  # training only, from here on
    checkpoint_uri: str
    next_instance_type: str | None  # the next fallback attempt's, None for the last attempt
    in_job_restarts: int  # recovery.in_job_restarts: recovery in place inside the job (runs/actions.py)
    stall: dict[str, Any]
    watchdog: dict[str, Any]


class Status(TypedDict, total=False):
    """One look at the job (check_job); the training watches add their reports."""

    state: JobState
    job_name: str
    job_type: Literal["processing", "training"]
    status: str
    secondary_status: str
    status_message: str
    failure_reason: str
    billable_seconds: int
    training_seconds: int
    stage: str
    checked_at: str
    durability: dict[str, Any]
    stall_watch: dict[str, Any]
    outcome: str
    cause: str  # a failed training job's cause (contract/failure_causes.py; the action: runs/actions.py)


class ExecutionContext(TypedDict, total=False):
    """$$.Execution as Prepare receives it (the caller's input is `Input`), or its Id, Name and StartTime."""

    Id: str
    Name: str
    StartTime: str
    Input: Any


class ExecutionState(TypedDict, total=False):
    run: Annotated[dict[str, Any], Key("prepare", "every handler", "the planned run (run_spec + planning)")]
    poll_seconds: Annotated[int, Key("prepare", "the Wait states", "seconds between two looks at a job")]
    tokenizer_enabled: Annotated[bool, Key("prepare", "UseTokenizer", "whether the tokenizer stage runs first")]
    attempt: Annotated[int, Key("prepare (0), plan_fallback (the next index)", "start_training, plan_fallback",
                                "the index of the fallback option the training job runs")]
    job: Annotated[Job, Key("start_processing, start_training", "check_job, finish", "the job started last")]
    status: Annotated[Status, Key(
        "check_job (a Pass state resets it for a new job)", "the Choice states, plan_fallback, check_job",
        "`state` = running | completed | retryable | failed; for training also `durability`, `stall_watch` and "
        "`outcome` (\"stall\" when the job's stall watchdog or the outside watch ended it) and a failed job's "
        "`cause` (runs/actions.py says what follows it); each CheckTraining "
        "gets the previous `$.status` as `previous`")]
    result: Annotated[dict[str, Any], Key("finish", "the end state", "the run's summary")]
    error: Annotated[ErrorInfo, Key("a Catch", "notify_failure", "{Error, Cause}: the failed state's error")]
    notification: Annotated[dict[str, Any], Key("notify_failure", "the Fail state", "what was published")]
    notification_error: Annotated[ErrorInfo, Key("the notify state's Catch", "the Fail state",
                                                 "a failure to publish the failure")]
    execution: Annotated[ExecutionContext, Key(
        "PrepareFailed", "notify_failure", "when Prepare fails the state is only {error, execution: {Id, Name, "
        "StartTime}}: the failure branch never sees the caller's input")]


# What each handler gets (its Payload; notify_failure gets the whole state).
class PrepareInput(TypedDict, total=False):
    spec: Any
    source: dict[str, Any]
    run_id: str
    execution: ExecutionContext


class StartProcessingInput(TypedDict):
    run: dict[str, Any]
    stage: Literal["map", "reduce"]


class StartTrainingInput(TypedDict, total=False):
    run: dict[str, Any]
    attempt: int


class CheckJobInput(TypedDict, total=False):
    job: Job
    previous: Status


class PlanFallbackInput(TypedDict):
    run: dict[str, Any]
    attempt: int
    status: Status


class FinishInput(TypedDict):
    run: dict[str, Any]
    job: Job


def keys() -> dict[str, Key]:
    """Each key of ExecutionState and what it holds, in declaration order."""
    hints = typing.get_type_hints(ExecutionState, include_extras=True)
    return {name: next(m for m in hint.__metadata__ if isinstance(m, Key)) for name, hint in hints.items()}


def _members(name: str) -> frozenset[str]:
    """The keys of the object under `name` when it is declared as a TypedDict (job, status, ...), else empty."""
    hint = typing.get_type_hints(ExecutionState)[name]
    return frozenset(typing.get_type_hints(hint)) if typing.is_typeddict(hint) else frozenset()


def path(key: str, *members: str) -> str:
    """`$.key[.member]` for a declared key (and a declared member of its object); an undeclared one raises."""
    if key not in ExecutionState.__annotations__:
        raise KeyError(f"{key!r} is not a key of the execution state (lambda/runs/state.py ExecutionState)")
    if members and members[0] not in _members(key):
        raise KeyError(f"{members[0]!r} is not a member of the state's {key!r} (lambda/runs/state.py)")
    return ".".join(("$", key, *members))


def section(event: Any, key: str) -> dict[str, Any] | None:
    """The object under `key` of an event (a state or a handler's input), None when it is absent or not an
    object: what the failure branch can count on, since it runs after any state may have failed."""
    value = event.get(key) if isinstance(event, dict) else None
    return value if isinstance(value, dict) else None
