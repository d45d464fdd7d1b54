"""Exceptions raised by the handlers.

The Lambda runtime reports an exception's class name as `errorType`, which Step Functions uses as the
error name in Retry/Catch: keep these class names stable, they are part of the state machine contract.
"""

from __future__ import annotations


class PipelineError(Exception):
    """Base class; never raised itself."""


class ProblemsError(PipelineError):
    """An error that carries a list of problems, each starting with the field it is about.

    The message is bounded (Step Functions keeps at most 32,768 characters of an error's cause, SNS 256 KB):
    at most MAX_LISTED problems of at most MAX_PROBLEM_CHARS each, then "(and N more problems)".
    """

    headline = "problems"
    MAX_LISTED = 50
    MAX_PROBLEM_CHARS = 400
    MAX_MESSAGE_CHARS = 12_000

    def __init__(self, problems: list[str], omitted: int = 0) -> None:
        cut = [p if len(p) <= self.MAX_PROBLEM_CHARS else p[: self.MAX_PROBLEM_CHARS - 3] + "..."
               for p in problems[: self.MAX_LISTED]]
        omitted += len(problems) - len(cut)
        while cut and sum(len(p) + 3 for p in cut) > self.MAX_MESSAGE_CHARS:
            cut.pop()
            omitted += 1
        self.problems, self.omitted = cut, omitted
        count = len(cut) + omitted
        lines = "\n".join(f"- {p}" for p in cut)
        more = f"\n(and {omitted} more problem{'s' if omitted != 1 else ''})" if omitted else ""
        super().__init__(f"{self.headline} ({count} problem{'s' if count != 1 else ''}):\n{lines}{more}")


class SpecError(ProblemsError):
    """The run spec is not valid JSON, has unknown fields or bad values."""

    headline = "invalid run spec"


class PreflightError(ProblemsError):
    """The spec is well formed but cannot run in this environment or on this data; no job was started."""

    headline = "pre-flight checks failed, no job was started"


class SettingsError(ProblemsError):
    """The PIPELINE_SETTINGS environment variable is missing or invalid (a deployment problem)."""

    headline = "invalid PIPELINE_SETTINGS"


class FallbackExhaustedError(PipelineError):
    """Every attempt allowed by the spec's fallback list ended in a capacity error or a spot timeout."""


class JobConflictError(PipelineError):
    """A job with the planned name exists with other settings (another run's): it is never adopted."""


class JobFailedError(PipelineError):
    """A SageMaker job failed for a reason that a fallback attempt would not fix."""


class ModelArtifactError(PipelineError):
    """The job's model artifact cannot be told apart from another writer's version: nothing is registered."""


class ThrottlingException(PipelineError):
    """An AWS API throttled the call (retry with backoff)."""


class ResourceLimitExceeded(PipelineError):
    """A SageMaker account quota was hit, e.g. too many concurrent jobs (retry with backoff)."""


class RequestRejected(ProblemsError):
    """A start handler's request breaks the environment's rules (a forged or stale run); nothing was created."""

    headline = "request rejected before SageMaker, no job was started"
