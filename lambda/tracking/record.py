"""What Finish adds to the pipeline run's MLflow run (contract/tracking.py): the resolved spec as params, the goodput
ledger, cost and final metrics as metrics, the verdict, the model's locations, the model package ARN and each
attempt's instance type and capacity as tags; then the run is marked FINISHED. The run is found by its pipeline run
tag when the run's state does not name it (Prepare opens it with `find_or_create_run` and the id travels in `$.run`;
without an answer from the server then, the run is found, or created, by its tag). Best effort: Finish calls `record_finish` after the run is
registered, and a failure is logged and returned, never raised.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from typing import Any

from contract import summary as run_summary
from contract import tracking
from hfsm_lambda.tracking.rest import MlflowRest, MlflowRestError

# The summary's keys that link the MLflow run to the model (contract/summary.py): the job, the model's locations and
# the model package, as tags of the same names.
LINKED_KEYS = tuple(k for k in run_summary.SUCCEEDED_KEYS if k == "job_name" or k.endswith(("model_uri", "_arn")))
MAX_PARAM_VALUE = 6000
MAX_TAG_VALUE = 8000


def flatten(value: Any, prefix: str) -> Iterator[tuple[str, Any]]:
    """`spec.compute.instance_type`-style keys of a JSON object's leaves (lists as JSON-ish text)."""
    if isinstance(value, Mapping):
        for key, item in value.items():
            yield from flatten(item, f"{prefix}.{key}" if prefix else str(key))
    else:
        yield prefix, value


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def find_or_create_run(rest: MlflowRest, experiment: str, pipeline_run_id: str) -> str:
    try:
        experiment_id = rest.call("GET", "experiments/get-by-name", {"experiment_name": experiment})[
            "experiment"]["experiment_id"]
    except MlflowRestError as err:
        if err.code != "RESOURCE_DOES_NOT_EXIST":
            raise
        experiment_id = rest.call("POST", "experiments/create", {"name": experiment})["experiment_id"]
    found = rest.call("POST", "runs/search", {
        "experiment_ids": [experiment_id], "max_results": 1,
        "filter": f"tags.`{tracking.PIPELINE_RUN_TAG}` = '{pipeline_run_id}'"}).get("runs") or []
    if found:
        return found[0]["info"]["run_id"]
    created = rest.call("POST", "runs/create", {
        "experiment_id": experiment_id, "run_name": pipeline_run_id, "start_time": int(time.time() * 1000),
        "tags": [{"key": tracking.PIPELINE_RUN_TAG, "value": pipeline_run_id}]})
    return created["run"]["info"]["run_id"]


def find_run(rest: MlflowRest, experiment: str, pipeline_run_id: str) -> tuple[str, str] | None:
    """(experiment id, MLflow run id) of a pipeline run, or None when there is none (nothing is created)."""
    try:
        experiment_id = rest.call("GET", "experiments/get-by-name", {"experiment_name": experiment})[
            "experiment"]["experiment_id"]
    except MlflowRestError as err:
        if err.code == "RESOURCE_DOES_NOT_EXIST":
            return None
        raise
    found = rest.call("POST", "runs/search", {
        "experiment_ids": [experiment_id], "max_results": 1,
        "filter": f"tags.`{tracking.PIPELINE_RUN_TAG}` = '{pipeline_run_id}'"}).get("runs") or []
    return (experiment_id, found[0]["info"]["run_id"]) if found else None


def run_url(base: str, experiment_id: str, run_id: str) -> str:
    """The MLflow UI's page of a run."""
    return f"{base.rstrip('/')}/#/experiments/{experiment_id}/runs/{run_id}"


def finish_data(summary: Mapping[str, Any], spec: Mapping[str, Any]) -> tuple[dict, dict, dict]:
    """(params, metrics, tags) Finish logs for a succeeded run's summary (contract/summary.py)."""
    params = {k: _text(v)[:MAX_PARAM_VALUE] for k, v in flatten(spec, "spec")}
    metrics: dict[str, float] = {}
    goodput = summary.get("goodput") or {}
    for key in ("ratio", "billed_seconds", "billable_seconds", "waiting_seconds"):
        if isinstance(goodput.get(key), int | float):
            metrics[f"goodput.{key}"] = float(goodput[key])
    for part, seconds in (goodput.get("parts") or {}).items():
        if isinstance(seconds, int | float):
            metrics[f"goodput.{part}_seconds"] = float(seconds)
    cost = summary.get("cost") or {}
    for key in ("cost_usd", "billable_instance_seconds", "training_instance_seconds", "spot_saving"):
        if isinstance(cost.get(key), int | float):
            metrics[f"cost.{key}"] = float(cost[key])
    for key, value in (summary.get("metrics") or {}).items():
        if isinstance(value, int | float) and not isinstance(value, bool):
            metrics[f"final.{key}"] = float(value)
    verdict = summary.get("verdict") or {}
    tags = {"verdict": verdict.get("verdict", ""), "verdict.text": verdict.get("text", ""),
            "pipeline.status": "SUCCEEDED", **{key: summary.get(key, "") for key in LINKED_KEYS}}
    for attempt in goodput.get("attempts") or summary.get("attempts") or []:
        job = attempt.get("job_name")
        if job:
            tags[tracking.attempt_tag(job, "instance_type")] = attempt.get("instance_type", "")
            tags[tracking.attempt_tag(job, "spot")] = _text(attempt.get("spot", ""))
    return params, metrics, {k: _text(v)[:MAX_TAG_VALUE] for k, v in tags.items() if v != ""}


def record_finish(rest: MlflowRest, experiment: str, pipeline_run_id: str, summary: Mapping[str, Any],
                  spec: Mapping[str, Any], *, mlflow_run_id: str = "") -> str:
    """Log the finished run; returns the MLflow run id. Raises MlflowRestError (the caller logs it)."""
    run_id = mlflow_run_id or find_or_create_run(rest, experiment, pipeline_run_id)
    existing = rest.call("GET", "runs/get", {"run_id": run_id})["run"]
    have = {p["key"]: p["value"] for p in (existing.get("data") or {}).get("params") or []}
    params, metrics, tags = finish_data(summary, spec)
    new_params = [{"key": k, "value": v} for k, v in params.items() if k not in have]
    now = int(time.time() * 1000)
    step = max([int(m.get("step", 0)) for m in (existing.get("data") or {}).get("metrics") or []] or [0])
    batches = [new_params[i:i + 100] for i in range(0, len(new_params), 100)] or [[]]
    metric_rows = [{"key": k, "value": v, "timestamp": now, "step": step} for k, v in metrics.items()]
    for i, batch in enumerate(batches):
        rest.call("POST", "runs/log-batch", {
            "run_id": run_id, "params": batch,
            "metrics": metric_rows if i == 0 else [],
            "tags": [{"key": k, "value": v} for k, v in tags.items()] if i == 0 else []})
    rest.call("POST", "runs/update", {"run_id": run_id, "status": "FINISHED", "end_time": now})
    return run_id
