"""The run summary: what Finish (a succeeded run) and NotifyFailure (a failed one) write to `summary.json`, and what
the state machine passes on as the execution's output.

Producer: lambda/handlers.py (`finish`, `notify_failure`), through `succeeded` and `failed` (every key declared
below, no other). Consumers: the notifications (lambda/runs/messages.py, summary_text.py), runctl (`status`,
`list`, `logs`: the execution's output, `of_output`, and the keys in STATUS_KEYS), local mode (the report, the
console, the kept run record) and benchmarks/bench_goodput.py.
"""

from __future__ import annotations

from typing import Any

from contract.jsontext import dumps, loads_object

FILE_NAME = "summary.json"
METRICS_FILE_NAME = "metrics.json"  # the final metrics, beside it
OUTPUT_KEY = "result"  # where the state machine puts Finish's summary in the execution's output
SUCCEEDED, FAILED = "Succeeded", "Failed"  # the summary's `status`
MAX_CHARS = 16 * 1024 * 1024

SUCCEEDED_KEYS = ("run_id", "status", "task", "base_model", "job_name", "model_uri", "registered_model_uri",
                  "registered_model_etag", "metrics", "cost", "model_package_arn", "model_package_group",
                  "summary_uri", "metrics_uri", "metrics_sha256", "attempts", "source", "links", "finished_at",
                  "interruptions", "checkpoints", "goodput", "verdict", "stragglers", "data_coverage")
FAILED_KEYS = ("run_id", "name", "status", "error", "reason", "source", "execution", "job_name", "job_status",
               "attempt", "summary_uri", "links", "finished_at")
# what `runctl status` shows of a succeeded run's summary
STATUS_KEYS = ("model_uri", "model_package_arn", "metrics", "cost", "interruptions", "checkpoints", "goodput",
               "verdict", "stragglers", "data_coverage")


def _document(keys: tuple[str, ...], status: str, fields: dict[str, Any]) -> dict[str, Any]:
    given = set(fields) | {"status"}
    if given != set(keys):
        missing, unknown = sorted(set(keys) - given), sorted(given - set(keys))
        raise TypeError(f"a {status} run's summary: missing {missing}, unknown {unknown} (contract/summary.py)")
    return {key: status if key == "status" else fields[key] for key in keys}


def succeeded(**fields: Any) -> dict[str, Any]:
    """A succeeded run's summary, its keys in SUCCEEDED_KEYS' order; TypeError on a missing or unknown key."""
    return _document(SUCCEEDED_KEYS, SUCCEEDED, fields)


def failed(**fields: Any) -> dict[str, Any]:
    """A failed run's summary, its keys in FAILED_KEYS' order; TypeError on a missing or unknown key."""
    return _document(FAILED_KEYS, FAILED, fields)


def format_summary(summary: dict[str, Any]) -> str:
    """`summary.json`'s text; ValueError when it holds a non-finite number."""
    return dumps(summary, what=FILE_NAME, indent=1, default=str)


def parse_summary(text: str | bytes | None) -> dict[str, Any] | None:
    """The summary of `summary.json`'s text; None when empty, oversize or not a finite JSON object."""
    return loads_object(text, max_chars=MAX_CHARS)


def of_output(output: Any) -> dict[str, Any] | None:
    """A succeeded run's summary from its execution's output (a dict, or its JSON text); None when it has none."""
    if isinstance(output, str | bytes):
        output = loads_object(output, max_chars=MAX_CHARS)
    found = output.get(OUTPUT_KEY) if isinstance(output, dict) else None
    return found if isinstance(found, dict) else None


def shown_in_status(summary: dict[str, Any]) -> dict[str, Any]:
    """The parts of a succeeded run's summary that `runctl status` shows."""
    return {key: summary.get(key) for key in STATUS_KEYS}
