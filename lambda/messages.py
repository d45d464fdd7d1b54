"""Run summaries and SNS notification texts. Pure."""

from __future__ import annotations

import json
from typing import Any

import naming
import summary_text
from settings import Settings

SUBJECT_MAX = 100
MESSAGE_MAX = 200_000  # SNS allows 256 KB
HINTS = {
    "SpecError": "Fix the fields listed above and submit the spec again (docs/run_spec.md describes every field).",
    "PreflightError": "Fix the data or the spec as listed above and submit again; no job was started.",
    "FallbackExhaustedError": "Add fallback.options (other instance types, or spot: false for on-demand) or raise "
                              "fallback.max_attempts, then submit again.",
    "JobFailedError": "Read the job's CloudWatch logs (link below), fix the settings or the data, submit again.",
    "ThrottlingException": "AWS API limits were hit even after retries; submit again later.",
    "ResourceLimitExceeded": "A SageMaker quota (e.g. concurrent jobs or instances of this type) is used up; wait for "
                             "other jobs or request a quota increase in Service Quotas.",
    "SettingsError": "The deployment is misconfigured (PIPELINE_SETTINGS); ask the platform team to redeploy.",
    "States.Timeout": "A step timed out; check the job and the execution history, then submit again.",
    "TrainingJobFailed": "Read the training job's CloudWatch logs (link below), fix the settings or data, submit again.",
    "TokenizerMapJobFailed": "Read the tokenizer map job's logs (link below): check tokenizer.text_field and the data.",
    "TokenizerReduceJobFailed": "Read the tokenizer reduce job's logs (link below): check the tokenizer settings.",
}
DEFAULT_HINT = "See the execution's event history (link below) for the failing step."


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
    subject = f"[{settings.project}-{settings.environment}] {text}".replace("\n", " ")
    subject = subject.encode("ascii", "replace").decode()
    return subject if len(subject) <= SUBJECT_MAX else subject[: SUBJECT_MAX - 3] + "..."


def _clip(text: str) -> str:
    return text if len(text) <= MESSAGE_MAX else text[: MESSAGE_MAX - 20] + "\n...(truncated)"


def run_links(settings: Settings, run: dict[str, Any] | None, job_name: str | None,
              job_type: str = "training") -> dict[str, str]:
    region, links = settings.region, {}
    if job_name:
        links["job"] = (naming.training_job_url(region, job_name) if job_type == "training"
                        else naming.processing_job_url(region, job_name))
        links["logs"] = naming.job_logs_url(region, job_name, job_type)
    if run:
        if run.get("execution_arn"):
            links["execution"] = naming.execution_url(region, run["execution_arn"])
        links["outputs"] = naming.s3_url(run["uris"]["outputs"], region)
        links["model_output"] = naming.s3_url(run["uris"]["model_output"], region)
    return links


def success_notification(settings: Settings, summary: dict[str, Any]) -> tuple[str, str]:
    lines = [
        *summary_text.success_lines(summary),
        "",
        "Approve the model package in the model registry to deploy it.",
        f"Full summary (JSON): {summary.get('summary_uri')}",
        "Links:",
        *[f"  {k}: {v}" for k, v in summary["links"].items()],
    ]
    return _subject(settings, f"run {summary['run_id']} succeeded"), _clip("\n".join(lines))


def failure_notification(settings: Settings, summary: dict[str, Any]) -> tuple[str, str]:
    who = summary.get("run_id") or summary.get("name") or (summary.get("source") or {}).get("key") or "(unnamed)"
    lines = [
        f"Run {who} FAILED: {summary['error']}",
        "",
        summary["reason"],
        "",
        f"What to do: {HINTS.get(summary['error'], DEFAULT_HINT)}",
    ]
    source = summary.get("source")
    if source:
        version = f" (version {source['version_id']})" if source.get("version_id") else ""
        lines.append(f"Spec: s3://{source.get('bucket')}/{source.get('key')}{version}")
    if summary.get("job_name"):
        lines.append(f"Last job: {summary['job_name']}")
    if summary.get("links"):
        lines += ["Links:", *[f"  {k}: {v}" for k, v in summary["links"].items()]]
    if summary.get("summary_uri"):
        lines.append(f"Full summary (JSON): {summary['summary_uri']}")
    return _subject(settings, f"run {who} FAILED: {summary['error']}"), _clip("\n".join(lines))
