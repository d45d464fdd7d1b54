"""A training job's attempts, cut from its SecondaryStatusTransitions (ledger.py, "Attempts"): one attempt is
one start of the job's instances; `Starting` and `Interrupted` (and the other statuses in UNBILLED) are waiting,
not billed; every other InProgress status is billed. Pure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from hfsm_lambda.goodput.values import BEFORE_TRAINING, epoch

UNBILLED = frozenset({"Starting", "Interrupted", "LaunchingMLInstances", "PreparingTrainingStack", "Pending"})
END_STATUSES = frozenset({"Completed", "Failed", "Stopped", "MaxRuntimeExceeded", "MaxWaitTimeExceeded"})
RUNNING = ("InProgress", "Stopping")  # TrainingJobStatus of a job whose last transition has not ended


@dataclass
class Segment:
    status: str
    start: float
    end: float

    @property
    def seconds(self) -> float:
        return max(0.0, self.end - self.start)


@dataclass
class Attempt:
    job: str
    restart: int  # 0 for the job's first start
    instance_count: int
    instance_type: str | None
    spot: bool
    segments: list[Segment] = field(default_factory=list)
    waiting_before: float = 0.0
    ended: str = ""  # how it ended: "Interrupted", the job's end status, or "running"

    @property
    def start(self) -> float:
        return self.segments[0].start

    @property
    def end(self) -> float:
        return self.segments[-1].end

    @property
    def billed_wall(self) -> float:
        return sum(s.seconds for s in self.segments)

    def window(self, kind: str) -> float:
        """Wall seconds of the attempt's downloading / training / uploading transitions."""
        return sum((s.seconds for s in self.segments if _kind(s, self.segments) == kind), 0.0)

    @property
    def training_start(self) -> float | None:
        return next((s.start for s in self.segments if s.status == "Training"), None)

    @property
    def training_end(self) -> float | None:
        ends = [s.end for s in self.segments if _kind(s, self.segments) == "training"]
        return max(ends) if ends else None


def _kind(segment: Segment, segments: list[Segment]) -> str:
    if segment.status == "Uploading":
        return "uploading"
    training = next((s.start for s in segments if s.status == "Training"), None)
    if training is None or segment.start < training:
        return BEFORE_TRAINING
    return "training"


class _Cutter:
    """Cuts one job's transitions into attempts, in order: billed ones extend the current attempt (or start
    one), waiting ones add to the wait before the next billed one, `Interrupted` and an instant end status
    close the current attempt."""

    def __init__(self, desc: dict[str, Any]) -> None:
        resources = desc.get("ResourceConfig") or {}
        self.job = desc.get("TrainingJobName", "?")
        self.count = int(resources.get("InstanceCount") or 1)
        self.instance_type, self.spot = resources.get("InstanceType"), bool(desc.get("EnableManagedSpotTraining"))
        self.attempts: list[Attempt] = []
        self.current: Attempt | None = None
        self.waiting = 0.0  # unbilled seconds since the last billed transition

    def close(self, ended: str) -> None:
        if self.current is not None:
            self.current.ended = ended
            self.attempts.append(self.current)
            self.current = None

    def add(self, name: str, start: float, end: float) -> None:
        if name == "Interrupted":  # the instances are gone: the next billed transition is a new attempt
            self.close(name)
        if name in UNBILLED:
            self.waiting += max(0.0, end - start)
            return
        if name in END_STATUSES and end - start <= 1e-6:
            self.close(name)
            return
        if self.current is None:
            self.current = Attempt(self.job, len(self.attempts), self.count, self.instance_type, self.spot)
        self.current.waiting_before += self.waiting  # unbilled time before (or, rarely, within) this attempt
        self.waiting = 0.0
        self.current.segments.append(Segment(name, start, end))


def _transition_end(transitions: list[dict[str, Any]], i: int, job_end: float | None, now: float) -> float:
    """The end of transition i; the current transition's: the next one's start, the (ended) job's end, or now."""
    end = epoch(transitions[i].get("EndTime"))
    if end is not None:
        return end
    following = epoch(transitions[i + 1].get("StartTime")) if i + 1 < len(transitions) else None
    return following or job_end or now


def attempts_of(desc: dict[str, Any], now: float) -> tuple[list[Attempt], float]:
    """(attempts, unbilled seconds after the last attempt) of one training job."""
    cutter = _Cutter(desc)
    status = desc.get("TrainingJobStatus")
    running = status in RUNNING
    job_end = None if running else epoch(desc.get("TrainingEndTime"))
    transitions = desc.get("SecondaryStatusTransitions") or []
    for i, transition in enumerate(transitions):
        start = epoch(transition.get("StartTime"))
        if start is not None:
            cutter.add(str(transition.get("Status") or ""), start, _transition_end(transitions, i, job_end, now))
    cutter.close("running" if running else str(status))
    out = cutter.attempts
    if out and out[-1].ended == "Interrupted" and not running:
        out[-1].ended = f"Interrupted, then {desc.get('SecondaryStatus') or status}"
    return out, cutter.waiting
