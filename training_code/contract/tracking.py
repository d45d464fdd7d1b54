"""MLflow tracking: how a training job learns where to log, and the names every writer of one MLflow run shares.

Producers: the training job request (lambda/plan/job_requests.py) and local mode's jobs carry the variables below in
the job's environment when the run's tracking is on (the spec's `tracking`, the environment's tracking server).
Consumers: the training code's MLflow logger (hftrain/tracking/), which logs what the job measures, and Finish
(lambda/tracking/), which adds the goodput ledger, the verdict, the cost and the model package ARN to the same run.

One pipeline run is one MLflow run, found by its `PIPELINE_RUN_TAG` (or named by `RUN_ID_VARIABLE` when the run's
state has it); each attempt (training job) adds tags under `attempt_tag(job, ...)`. MLflow cannot delete a metric's
points, so a writer never logs a step at or below the last one logged for that metric (`new_points`): a resumed
attempt's replayed steps are not logged again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

# MLflow's own variable names, so that `mlflow` on the job's host reads the same configuration.
URI_VARIABLE = "MLFLOW_TRACKING_URI"  # http://127.0.0.1:PORT locally; the tracking server's ARN on SageMaker
EXPERIMENT_VARIABLE = "MLFLOW_EXPERIMENT_NAME"
RUN_ID_VARIABLE = "MLFLOW_RUN_ID"  # the MLflow run, when the run's state knows it already
# Ours: the pipeline run id (the MLflow run is found or created by its tag), and the per-call timeout.
PIPELINE_RUN_VARIABLE = "HFTRAIN_PIPELINE_RUN_ID"
TIMEOUT_VARIABLE = "HFTRAIN_TRACKING_TIMEOUT_SECONDS"
DEFAULT_TIMEOUT_SECONDS = 5.0

PIPELINE_RUN_TAG = "pipeline.run_id"
ATTEMPT_PREFIX = "attempt"
TENSORBOARD_LOCAL_PATH = "/opt/ml/output/tensorboard"  # the job's TensorBoardOutputConfig.LocalPath


def attempt_tag(job: str, what: str) -> str:
    """A tag of one attempt (training job), e.g. `attempt.<job>.instance_type`."""
    return f"{ATTEMPT_PREFIX}.{job}.{what}"


def environment(uri: str, experiment: str, pipeline_run_id: str, mlflow_run_id: str = "") -> dict[str, str]:
    """The job's environment entries for tracking ({} when tracking is off: no URI)."""
    if not uri:
        return {}
    env = {URI_VARIABLE: uri, EXPERIMENT_VARIABLE: experiment, PIPELINE_RUN_VARIABLE: pipeline_run_id}
    if mlflow_run_id:
        env[RUN_ID_VARIABLE] = mlflow_run_id
    return env


def enabled(environ: Mapping[str, str]) -> bool:
    """Tracking is on when a URI and the run to log to (an MLflow run id, or an experiment and pipeline run) are set."""
    return bool(environ.get(URI_VARIABLE)) and bool(
        environ.get(RUN_ID_VARIABLE) or (environ.get(EXPERIMENT_VARIABLE) and environ.get(PIPELINE_RUN_VARIABLE)))


def new_points(points: Iterable[tuple[str, float, int]], last_step: dict[str, int]) -> list[tuple[str, float, int]]:
    """The (key, value, step) points above the last step logged for their key; `last_step` is updated."""
    kept = []
    for key, value, step in points:
        if step > last_step.get(key, -1):
            last_step[key] = step
            kept.append((key, value, step))
    return kept
