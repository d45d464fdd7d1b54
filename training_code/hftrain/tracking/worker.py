"""The MLflow client behind a queue: every call to the tracking server runs on a thread of its own.

The training loop only enqueues (never blocks; a full queue drops the item and counts it). The thread imports
mlflow (seconds of import time off the loop too), opens the pipeline run's MLflow run (contract/tracking.py: by
its MLflow run id, or by its pipeline run tag in the experiment, created when absent) and reads, per metric,
the last step already logged, so that a resumed attempt logs only steps above it. Each HTTP call has a short
timeout and one retry (MLflow's own settings, unless the job's environment sets them); the first failure is
logged once as a warning, later ones are only counted, and the run goes on. `close` waits a bounded time.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from contract import tracking

logger = logging.getLogger(__name__)

MAX_QUEUE = 10_000
MAX_PARAM_VALUE = 6000  # MLflow's limit on a param value (longer values are cut)
MAX_BATCH = 1000  # MLflow's log_batch limit on metrics per call


_EARLY: TrackingWorker | None = None


def start_early(environ: Mapping[str, str] | None = None) -> TrackingWorker | None:
    """train.py, first thing, in global rank 0 (RANK unset or 0): a started worker when tracking is on, kept for
    the callback (`take_early`), so that mlflow's import and the run's lookup overlap the job's own start-up."""
    global _EARLY
    environ = os.environ if environ is None else environ
    if _EARLY is None and tracking.enabled(environ) and environ.get("RANK", "0") == "0":
        _EARLY = TrackingWorker(environ)
        _EARLY.start()
    return _EARLY


def take_early() -> TrackingWorker | None:
    """The worker train.py started, once (None when it started none)."""
    global _EARLY
    worker, _EARLY = _EARLY, None
    return worker


class TrackingWorker:
    """One pipeline run's MLflow run, written from a background thread."""

    def __init__(self, environ: Mapping[str, str], *, make_client: Callable[[str], Any] | None = None,
                 max_queue: int = MAX_QUEUE) -> None:
        self.uri = environ[tracking.URI_VARIABLE]
        self.experiment = environ.get(tracking.EXPERIMENT_VARIABLE, "")
        self.pipeline_run = environ.get(tracking.PIPELINE_RUN_VARIABLE, "")
        self.run_id: str | None = environ.get(tracking.RUN_ID_VARIABLE) or None
        self.timeout = float(environ.get(tracking.TIMEOUT_VARIABLE) or tracking.DEFAULT_TIMEOUT_SECONDS)
        self._make_client = make_client
        self.client: Any = None
        self.opened = False
        self.params: dict[str, str] = {}  # already on the run (params cannot change)
        self.last_step: dict[str, int] = {}
        self.failures = 0
        self.dropped = 0
        self.first_failure = ""
        self._queue: queue.Queue = queue.Queue(max_queue)
        self._thread = threading.Thread(target=self._loop, name="hftrain-mlflow", daemon=True)

    # --- the training loop's side: enqueue only
    def start(self) -> None:
        if self._thread.is_alive() or self._thread.ident is not None:
            return  # started already (train.py's early start)
        self._thread.start()
        self.submit(self._open)

    def submit(self, call: Callable[[], None]) -> None:
        try:
            self._queue.put_nowait(call)
        except queue.Full:
            self.dropped += 1

    def close(self, wait_seconds: float) -> bool:
        """Ask the thread to finish what is queued; True when it did within `wait_seconds`."""
        self.submit(None)  # type: ignore[arg-type]
        self._thread.join(wait_seconds)
        done = not self._thread.is_alive()
        if self.failures or self.dropped or not done:
            logger.warning("tracking: %d MLflow call(s) failed, %d item(s) dropped%s; the run's MLflow record is "
                           "incomplete (first failure: %s)", self.failures, self.dropped,
                           "" if done else f", still writing after {wait_seconds:g} s (left behind)",
                           self.first_failure or "none")
        return done

    # --- the thread's side
    def _loop(self) -> None:
        held = None  # an item taken while gathering points: the next one to run
        while True:
            call, held = (held, None) if held is not None else (self._queue.get(), None)
            if call is None or call is _STOP:
                return
            if call != self._open and not self.opened:
                continue  # the run could not be opened: nothing to log to
            if isinstance(call, _Points):  # every queued point in one request: a slow server falls behind less
                while len(call.points) < MAX_BATCH:
                    try:
                        more = self._queue.get_nowait()
                    except queue.Empty:
                        break
                    if not isinstance(more, _Points):
                        held = _STOP if more is None else more
                        break
                    call.points.extend(more.points)
            try:
                call()
            except Exception as err:  # noqa: BLE001 - any failure of the tracking server: reported, never raised
                self._failed(err)

    def _failed(self, err: Exception) -> None:
        self.failures += 1
        if self.failures == 1:
            self.first_failure = f"{type(err).__name__}: {str(err)[:300]}"
            logger.warning("tracking: MLflow at %s failed (%s); training goes on, further failures are only counted",
                           self.uri, self.first_failure)

    def _client(self) -> Any:
        # Short calls: MLflow's defaults (120 s, 7 retries with backoff) would hold the queue for minutes.
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(max(1, round(self.timeout))))
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "1")
        os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")
        if not self.uri.startswith("arn:"):  # sagemaker-mlflow's header plugin warns at every call to a non-ARN URI
            logging.getLogger("mlflow.tracking.request_header.registry").setLevel(logging.ERROR)
        if self._make_client is not None:
            return self._make_client(self.uri)
        from mlflow import MlflowClient

        return MlflowClient(tracking_uri=self.uri)

    def _open(self) -> None:
        self.client = client = self._client()
        if self.run_id is None:
            self.run_id = self._find_or_create_run(client)
        run = client.get_run(self.run_id)
        self.params = dict(run.data.params)
        for key in run.data.metrics:  # the last step per metric, from the whole history (resumed attempts)
            self.last_step[key] = max((m.step for m in client.get_metric_history(self.run_id, key)), default=-1)
        self.opened = True
        logger.info("tracking: MLflow run %s at %s%s", self.run_id, self.uri,
                    f" (continuing {len(self.last_step)} metric(s))" if self.last_step else "")

    def _find_or_create_run(self, client: Any) -> str:
        experiment = client.get_experiment_by_name(self.experiment)
        if experiment is None:
            try:
                experiment_id = client.create_experiment(self.experiment)
            except Exception:  # noqa: BLE001 - created meanwhile by another writer of the same run
                experiment = client.get_experiment_by_name(self.experiment)
                if experiment is None:
                    raise
                experiment_id = experiment.experiment_id
        else:
            experiment_id = experiment.experiment_id
        found = client.search_runs([experiment_id], filter_string=f"tags.`{tracking.PIPELINE_RUN_TAG}` = "
                                                                  f"'{self.pipeline_run}'", max_results=1)
        if found:
            return found[0].info.run_id
        return client.create_run(experiment_id, run_name=self.pipeline_run,
                                 tags={tracking.PIPELINE_RUN_TAG: self.pipeline_run}).info.run_id

    # --- what the callback enqueues
    def log_params(self, params: Mapping[str, Any], job: str) -> None:
        """New params as params; a value that differs from the run's (a later attempt's) as an attempt tag."""
        def call() -> None:
            from mlflow.entities import Param, RunTag

            new, changed = [], []
            for key, value in params.items():
                text = str(value)[:MAX_PARAM_VALUE]
                if key not in self.params:
                    new.append(Param(key, text))
                elif self.params[key] != text:
                    changed.append(RunTag(tracking.attempt_tag(job, f"param.{key}"), text))
            for start in range(0, len(new), 100):  # MLflow's log_batch limit on params per call
                self.client.log_batch(self.run_id, params=new[start:start + 100])
            self.params.update({p.key: p.value for p in new})
            if changed:
                self.client.log_batch(self.run_id, tags=changed)

        self.submit(call)

    def set_tags(self, tags: Mapping[str, Any]) -> None:
        def call() -> None:
            from mlflow.entities import RunTag

            self.client.log_batch(self.run_id, tags=[RunTag(k, str(v)) for k, v in tags.items()])

        self.submit(call)

    def log_metrics(self, metrics: Mapping[str, float], step: int, timestamp_ms: int | None = None) -> None:
        """Points at `step`; those at or below the last step logged for their metric are not logged."""
        stamp = timestamp_ms or int(time.time() * 1000)
        self.submit(_Points(self, [(k, float(v), step, stamp) for k, v in metrics.items()]))


_STOP = object()  # the end of the queue, met while gathering points


class _Points:
    """Metric points (key, value, step, timestamp ms) queued for one log_batch; consecutive ones are merged."""

    def __init__(self, worker: TrackingWorker, points: list[tuple[str, float, int, int]]) -> None:
        self.worker, self.points = worker, points

    def __call__(self) -> None:
        from mlflow.entities import Metric

        worker = self.worker
        stamps = {(k, s): t for k, _, s, t in self.points}
        kept = tracking.new_points([(k, v, s) for k, v, s, _ in self.points], worker.last_step)
        metrics = [Metric(k, v, stamps[(k, s)], s) for k, v, s in kept]
        for start in range(0, len(metrics), MAX_BATCH):
            worker.client.log_batch(worker.run_id, metrics=metrics[start:start + MAX_BATCH])
