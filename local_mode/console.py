"""What a local run prints at its end: readable lines, no interpreter reprs, no escaped JSON.

Success: the success notification as the topic's subscribers got it (outcome line, metrics next to their
trivial baselines, times, cost, spot saving, attempts and their interruptions, model), then the local paths.
Failure: the state that failed, the reason as the failure notification gives it (for a job: the job's
FailureReason, which the training and processing code write for the user), what to do, and for every job of
the run each host's log file with its last lines. `verbose` adds the execution's raw error and cause.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from local_mode.session import RunOutcome

TAIL_LINES = 8
LINE_WIDTH = 220


def notification_body(message: str) -> list[str]:
    """A notification's lines up to its console links (which point at AWS, not at this machine)."""
    lines = message.splitlines()
    if "Links:" in lines:
        lines = lines[: lines.index("Links:")]
    while lines and not lines[-1].strip():
        lines.pop()
    return lines


def _notification(outcome: RunOutcome, status: str) -> str | None:
    """The run's last success or failure notification (its `status` message attribute; else its subject)."""
    wanted = "Succeeded" if status == "SUCCEEDED" else "Failed"
    marker = "succeeded" if status == "SUCCEEDED" else "FAILED"
    for note in reversed(outcome.notifications):
        if note.get("status") == wanted or (not note.get("status") and marker in note.get("subject", "")):
            return note["message"]
    return None


def log_tail(path: Path, count: int = TAIL_LINES) -> list[str]:
    """The last lines of a host log; the script's own `ERROR: ...` line first when it is further up."""
    try:
        lines = [line.rstrip() for line in path.read_text(errors="replace").splitlines() if line.strip()]
    except OSError:
        return []
    tail = lines[-count:]
    errors = [line for line in lines[:-count] if line.startswith("ERROR: ")]
    if errors:
        tail = [errors[-1], "...", *tail]
    return [line if len(line) <= LINE_WIDTH else line[: LINE_WIDTH - 3] + "..." for line in tail]


def _job_name(desc: dict[str, Any]) -> str:
    return str(desc.get("TrainingJobName") or desc.get("ProcessingJobName"))


def _job_status(desc: dict[str, Any]) -> str:
    status = desc.get("TrainingJobStatus") or desc.get("ProcessingJobStatus")
    secondary = desc.get("SecondaryStatus")
    return f"{status} / {secondary}" if secondary and secondary != status else str(status)


def reason_from_cause(error: str | None, cause: str | None) -> list[str]:
    """The execution's cause in words: a Lambda error's message, or a job's FailureReason."""
    text = cause or ""
    try:
        parsed = json.loads(text) if text.startswith("{") else None
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict) and "job_name" in parsed:
        text = (f"{parsed.get('job_type', 'SageMaker')} job {parsed['job_name']} ended {parsed.get('status')}: "
                f"{parsed.get('failure_reason') or parsed.get('secondary_status')}")
    elif isinstance(parsed, dict):
        text = str(parsed.get("errorMessage") or parsed.get("message") or text)
    return [line for line in text.splitlines() if line.strip()] or ["(no cause given)"]


def failure_lines(outcome: RunOutcome, *, verbose: bool = False) -> list[str]:
    who = f"run {outcome.run_id}" if outcome.run_id else "the run"
    lines = [f"{who} {outcome.status} in state {outcome.failed_state} after {outcome.seconds:.0f} s: "
             f"{outcome.error}"]
    note = _notification(outcome, outcome.status)
    if note:
        # The notification's links point at the AWS console; here the host log files are the links
        where = "(the host log files below)" if any(outcome.host_logs.values()) else "(report/run.json)"
        body = [line.replace("(link below)", where) for line in notification_body(note)]
        lines += [f"  {line}" if line else "" for line in body[1:]]  # the first line repeats the outcome
    else:
        lines += [f"  {line}" for line in reason_from_cause(outcome.error, outcome.cause)]
    said = "\n".join(lines)
    for desc in outcome.jobs:
        name = _job_name(desc)
        failed = _job_status(desc).split(" / ")[0] in ("Failed", "Stopped")
        lines += ["", f"  {name}: {_job_status(desc)}"]
        for key in ("FailureReason", "ExitMessage") if failed else ():
            if desc.get(key, "").strip() and desc[key].strip().splitlines()[0] not in said:
                lines.append(f"    {key}: {desc[key].strip().splitlines()[0]}")
        for log in outcome.host_logs.get(name, []):
            lines.append(f"    {log.stem} log: {log}")
            if failed:
                lines += [f"      | {line}" for line in log_tail(log)]
    if verbose:
        lines += ["", f"  execution error: {outcome.error}", "  execution cause:",
                  *[f"    {line}" for line in (outcome.cause or "").splitlines()]]
    return lines


def success_lines(outcome: RunOutcome, local: list[tuple[str, str]]) -> list[str]:
    note = _notification(outcome, "SUCCEEDED")
    if note:
        lines = notification_body(note)
    else:  # the notification did not arrive: the summary's essentials
        result = outcome.summary or {}
        lines = [f"Run {result.get('run_id')} succeeded.", f"  model  {result.get('model_uri')}"]
    local = [("run time", f"{outcome.seconds:.0f} s on this machine"), *local]
    width = max(len(k) for k, _ in local)
    return [*lines, "", "Locally:", *[f"  {k.ljust(width)}  {v}" for k, v in local]]
