"""What one attempt's leader log stream says (ledger.py): its GOODPUT reports (the training code's own account
of its time, hftrain/run/goodput.py) and its PROGRESS lines (both formats: contract/goodput_line.py,
contract/progress_lines.py), and which stream belongs to which attempt. Pure.
"""

from __future__ import annotations

import bisect
from dataclasses import dataclass, field
from typing import Any

from contract import goodput_line, progress_lines, recovery_line
from hfsm_lambda.goodput.attempts import Attempt

STREAM_SLACK_SECONDS = 120.0  # a stream's first event may follow its attempt's end by this much (log delivery)


def parse_report(message: str) -> dict[str, Any] | None:
    return goodput_line.parse_line(message)


def parse_progress(message: str) -> int | None:
    progress = progress_lines.parse_progress(message)
    return progress.global_step if progress else None


@dataclass
class Evidence:
    stream: str | None = None
    reports: list[dict[str, Any]] = field(default_factory=list)
    progress: list[tuple[float, int]] = field(default_factory=list)  # (event time, step)
    error: str | None = None
    recoveries: list[dict[str, Any]] = field(default_factory=list)  # RECOVERY records: recoveries in place

    @property
    def last(self) -> dict[str, Any] | None:
        return self.reports[-1] if self.reports else None

    def report(self, event: str) -> dict[str, Any] | None:
        return next((r for r in reversed(self.reports) if r.get("event") == event), None)

    @property
    def start_step(self) -> int | None:
        for report in reversed(self.reports):
            if isinstance(report.get("start_step"), int):
                return report["start_step"]
        if self.progress:
            return max(0, self.progress[0][1] - 1)
        return None

    @property
    def step_reached(self) -> int | None:
        steps = [s for _, s in self.progress]
        steps += [r["step"] for r in self.reports if isinstance(r.get("step"), int)]
        if steps:
            return max(steps)
        return None

    @property
    def trained(self) -> bool:
        return bool(self.progress) or any(r.get("first_step_at") for r in self.reports)


def evidence_from(stream: dict[str, Any]) -> Evidence:
    found = Evidence(stream=stream.get("name"), error=stream.get("error"))
    for event in stream.get("events") or []:
        moment, message = float(event[0]), str(event[1])
        report = parse_report(message)
        if report is not None:
            found.reports.append(report)
            continue
        recovery = recovery_line.parse_line(message)
        if recovery is not None:
            found.recoveries.append(recovery)
            continue
        step = parse_progress(message)
        if step is not None:
            found.progress.append((moment, step))
    return found


def _window_index(attempts: list[Attempt], starts: list[float], first_at: float) -> int | None:
    """The attempt whose window holds a stream's first event (the last one started before it), if any."""
    index = bisect.bisect_right(starts, first_at) - 1
    if 0 <= index < len(attempts) and first_at <= attempts[index].end + STREAM_SLACK_SECONDS:
        return index
    return None


def assign_streams(attempts: list[Attempt], streams: list[dict[str, Any]]) -> list[Evidence | None]:
    """Each attempt's leader stream: the one whose first event lies in the attempt's window (else by order)."""
    chosen: list[Evidence | None] = [None] * len(attempts)
    timed = sorted((s for s in streams if s.get("first_at") is not None), key=lambda s: s["first_at"])
    untimed = [s for s in streams if s.get("first_at") is None]
    starts = [a.start for a in attempts]
    for stream in timed:
        index = _window_index(attempts, starts, float(stream["first_at"]))
        if index is not None and chosen[index] is None:
            chosen[index] = evidence_from(stream)
        else:
            untimed.append(stream)
    free = [i for i, c in enumerate(chosen) if c is None]
    for i, stream in zip(free, sorted(untimed, key=lambda s: str(s.get("name"))), strict=False):
        chosen[i] = evidence_from(stream)
    return chosen
