"""Run summaries and SNS notification texts. Pure."""

from __future__ import annotations

import json
from typing import Any

from contract import failure_causes
from hfsm_lambda import naming
from hfsm_lambda.goodput import text as goodput
from hfsm_lambda.neutral_text import neutral, printable
from hfsm_lambda.plan.run import Run
from hfsm_lambda.runs import actions, summary_text, verdict
from hfsm_lambda.settings import Settings
from hfsm_lambda.watch import durability

SUBJECT_MAX = 100
MESSAGE_MAX = 200_000  # SNS allows 256 KB
HINTS = {
    "SpecError": "Fix the fields listed above and submit the spec again (docs/run_spec.md describes every field).",
    "PreflightError": "Fix the data or the spec as listed above and submit again; no job was started.",
    "FallbackExhaustedError": "Add fallback.options (other instance types, or spot: false for on-demand) or raise "
                              "fallback.max_attempts, then submit again.",
    "JobFailedError": "Read the job's CloudWatch logs (link below), fix the settings or the data, submit again.",
    "ModelArtifactError": "Something other than the job wrote its model artifact while it uploaded; check the "
                          "object's versions before registering a model by hand.",
    "ThrottlingException": "AWS API limits were hit even after retries; submit again later.",
    "ResourceLimitExceeded": "A SageMaker quota (e.g. concurrent jobs or instances of this type) is used up; wait for "
                             "other jobs or request a quota increase in Service Quotas.",
    "RequestRejected": "The job request broke this environment's rules (a hand-made or stale run); start runs with a "
                       "run spec through the state machine or an upload to runs/, which Prepare checks.",
    "SettingsError": "The deployment is misconfigured (PIPELINE_SETTINGS); ask the platform team to redeploy.",
    "States.Timeout": "A step timed out; check the job and the execution history, then submit again.",
    "TrainingJobFailed": "Read the training job's CloudWatch logs (link below), fix the settings or data, submit again.",
    "TokenizerMapJobFailed": "Read the tokenizer map job's logs (link below): check tokenizer.text_field and the data.",
    "TokenizerReduceJobFailed": "Read the tokenizer reduce job's logs (link below): check the tokenizer settings.",
}
DEFAULT_HINT = "See the execution's event history (link below) for the failing step."
_JOB_ERRORS = ("FallbackExhaustedError", "JobFailedError", "TrainingJobFailed")


def parse_error(error: dict[str, Any] | None) -> tuple[str, str]:
    """Step Functions Catch output {"Error", "Cause"} -> (error name, readable message).

    A Lambda's Cause is JSON {"errorMessage", "errorType", "stackTrace"}; other causes are plain text.
    """
    error = error or {}
    name = str(error.get("Error") or "UnknownError")
    cause = error.get("Cause") or ""
    message = cause
    if isinstance(cause, str) and cause.startswith("{"):
        try:
            parsed = json.loads(cause)
        except json.JSONDecodeError:
            parsed = None
        if isinstance(parsed, dict) and "state" in parsed and "job_name" in parsed:
            # A job that ended badly: the state machine passes check_job's output as the cause.
            message = (f"{parsed.get('job_type', 'SageMaker')} job {parsed['job_name']} ended "
                       f"{parsed.get('status')}: {parsed.get('failure_reason') or parsed.get('secondary_status')}")
        elif isinstance(parsed, dict):
            message = str(parsed.get("errorMessage") or parsed.get("message") or cause)
            if name in ("UnknownError", "States.TaskFailed") and parsed.get("errorType"):
                name = str(parsed["errorType"])
    return name, str(message) or "(no cause given)"


def _subject(settings: Settings, text: str) -> str:
    subject = printable(f"[{settings.project}-{settings.environment}] {text}".replace("\n", " "))
    subject = subject.encode("ascii", "replace").decode()
    return subject if len(subject) <= SUBJECT_MAX else subject[: SUBJECT_MAX - 3] + "..."


def _clip(text: str) -> str:
    """The message's text: parts of it were written by jobs (failure reasons, log-derived notes, checkpoint
    files), so every line is neutralised (neutral_text.py) and the whole bounded."""
    text = neutral(text)
    return text if len(text) <= MESSAGE_MAX else text[: MESSAGE_MAX - 20] + "\n...(truncated)"


def run_links(settings: Settings, run: Run | None, job_name: str | None,
              job_type: str = "training") -> dict[str, str]:
    region, links = settings.region, {}
    if job_name:
        links["job"] = (naming.training_job_url(region, job_name) if job_type == "training"
                        else naming.processing_job_url(region, job_name))
        links["logs"] = naming.job_logs_url(region, job_name, job_type)
    if run:
        links.update(run_address_links(region, run.execution_arn, run.uris.outputs, run.uris.model_output))
    return links


def run_address_links(region: str, execution_arn: str | None, outputs: str, model_output: str) -> dict[str, str]:
    """The console links of a run's execution (when known) and of its output prefixes."""
    links = {"execution": naming.execution_url(region, execution_arn)} if execution_arn else {}
    links["outputs"] = naming.s3_url(outputs, region)
    links["model_output"] = naming.s3_url(model_output, region)
    return links


def success_notification(settings: Settings, summary: dict[str, Any]) -> tuple[str, str]:
    lines = [
        *summary_text.success_lines(summary),
        "",
        *[*goodput.summary_lines(summary.get("goodput")), ""][: None if goodput.summary_lines(summary.get("goodput"))
                                                               else 0],
        *[*checkpoint_lines(summary), ""][: None if checkpoint_lines(summary) else 0],
        "Approve the model package in the model registry to deploy it.",
        f"Full summary (JSON): {summary.get('summary_uri')}",
        "Links:",
        *[f"  {k}: {v}" for k, v in summary["links"].items()],
    ]
    outcome = verdict.outcome(summary)
    subject = f"run {summary['run_id']} succeeded" if outcome == "succeeded" else f"{outcome}: run {summary['run_id']}"
    return _subject(settings, subject), _clip("\n".join(lines))


def _hint(summary: dict[str, Any]) -> str:
    """What to do; a hint that points at a link says so only when the links below hold that link (the job's logs
    for a hint about logs, the execution for the event history)."""
    cause = (summary.get("job_status") or {}).get("cause")
    if cause is None and (summary.get("job_status") or {}).get("outcome") == "stall":
        cause = failure_causes.STALLED
    # a failed training job: what to do follows its cause (runs/actions.py), not the error's name
    hint = actions.action_for(cause).next if cause and summary["error"] in _JOB_ERRORS else \
        HINTS.get(summary["error"], DEFAULT_HINT)
    wanted = "execution" if "event history" in hint else "logs"
    return hint if (summary.get("links") or {}).get(wanted) else hint.replace(" (link below)", "")


def failure_notification(settings: Settings, summary: dict[str, Any]) -> tuple[str, str]:
    who = (summary.get("run_id") or summary.get("name") or (summary.get("source") or {}).get("key")
           or summary.get("execution") or "(unnamed)")
    lines = [
        f"Run {who} FAILED: {summary['error']}",
        "",
        summary["reason"],
        "",
        f"What to do: {_hint(summary)}",
    ]
    source = summary.get("source")
    if source:
        version = f" (version {source['version_id']})" if source.get("version_id") else ""
        lines.append(f"Spec: s3://{source.get('bucket')}/{source.get('key')}{version}")
    if summary.get("job_name"):
        lines.append(f"Last job: {summary['job_name']}")
    durable = (summary.get("job_status") or {}).get("durability")
    if isinstance(durable, dict):
        lines.append(f"Last durable checkpoint: {durability.describe(durable)} ({durable.get('checkpoint_uri')})")
    if summary.get("links"):
        lines += ["Links:", *[f"  {k}: {v}" for k, v in summary["links"].items()]]
    if summary.get("summary_uri"):
        lines.append(f"Full summary (JSON): {summary['summary_uri']}")
    return _subject(settings, f"run {who} FAILED: {summary['error']}"), _clip("\n".join(lines))


def interruption_line(record: dict[str, Any]) -> str:
    if "how" in record:  # the goodput ledger's record (from the attempts' logs)
        return goodput.interruption_line(record)
    minutes = goodput.lost_time(record.get("lost_minutes"))
    return (f"step {record.get('step_reached')} reached by {record.get('job')}, resumed from step "
            f"{record.get('resumed_from_step') if record.get('resumed_from_step') is not None else '0 (scratch)'}: "
            f"{record.get('lost_steps')} step(s), {minutes} of work lost")


def checkpoint_lines(summary: dict[str, Any]) -> list[str]:
    """Interruptions (step reached, step resumed from, work lost) and checkpoint problems, for notifications."""
    lines = []
    interruptions = summary.get("interruptions") or []
    if interruptions:
        total = sum(r.get("lost_minutes") or 0 for r in interruptions)
        unknown = sum(1 for r in interruptions if r.get("lost_minutes") is None)
        lines.append(f"Interruptions: {len(interruptions)}, {goodput.lost_time(total)} of work lost in all"
                     + (f" ({unknown} unknown)" if unknown else ""))
        lines += [f"  {interruption_line(r)}" for r in interruptions[:20]]
    checkpoints = summary.get("checkpoints") or {}
    if checkpoints.get("last_durable_step") is not None:
        lines.append(f"Last durable checkpoint: step {checkpoints['last_durable_step']} saved "
                     f"{checkpoints.get('last_durable_at')} ({checkpoints.get('checkpoint_uri')})")
    for record in (checkpoints.get("rejected") or [])[:10]:
        lines.append(f"Checkpoint rejected at a resume (kept for inspection): {record.get('checkpoint')}: "
                     f"{record.get('reason')}")
    for decision in checkpoints.get("fresh_starts") or []:
        lines.append(f"Started from scratch: {decision}")
    return lines


def durability_warning(settings: Settings, job: dict[str, Any], report: dict[str, Any], *,
                       stopped: bool) -> tuple[str, str]:
    """The watchdog's notification: no new checkpoint has reached S3 for too long."""
    run = job.get("run_id") or job["job_name"]
    watchdog = job.get("watchdog") or {}
    every = f"auto, at most {watchdog.get('every_minutes'):g}" if watchdog.get("auto") else watchdog.get("every_minutes")
    action = ("The job was stopped; the pipeline starts the next attempt, which resumes from the last durable "
              "checkpoint." if stopped else
              "The job keeps running. Check its logs (checkpoint saves, S3 access of the SageMaker role, disk "
              "space); set checkpoint.watchdog.action to 'stop' to have such a job stopped and resumed.")
    lines = [
        f"Run {run}: no new checkpoint has reached S3 for {report.get('age_minutes')} minutes of training "
        f"(checkpoint.every_minutes={every}, limit {report.get('threshold_minutes')} minutes).",
        f"Job: {job['job_name']}",
        f"Last durable checkpoint: {durability.describe(report)}",
        f"Checkpoint prefix: {report.get('checkpoint_uri')}",
        *[f"Not complete in S3: checkpoint-{p['step']}: {p['reason']}" for p in report.get("pending") or []],
        "",
        action,
        "Links:",
        *[f"  {k}: {v}" for k, v in (job.get("links") or {}).items()],
    ]
    what = "stopped: no new checkpoint" if stopped else "no new checkpoint"
    return _subject(settings, f"run {run} {what} for {report.get('age_minutes'):.0f} min"), _clip("\n".join(lines))
