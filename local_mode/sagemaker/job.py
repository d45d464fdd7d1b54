"""What training and processing jobs share: state under a lock, the job thread, host processes, events."""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import botocore.session

from local_mode.aws.clients import job_client
from local_mode.aws.cloudwatch_logs import LogShipper
from local_mode.sagemaker.host_processes import HostProcess, stop_hosts, wait_for_hosts
from local_mode.sagemaker.settings import JobEvent, LocalSageMakerSettings

log = logging.getLogger(__name__)

FAILURE_REASON_MAX = 1024  # SageMaker's FailureReason / ExitMessage limit
# Any AWS call from inside a job fails at once instead of reaching AWS (no network in local mode).
NO_AWS_ENDPOINT = "http://127.0.0.1:9"


class JobSetupError(Exception):
    """The request cannot run here (bad channel, missing code, unsupported mode): a ClientError."""


def now() -> datetime:
    return datetime.now(UTC)


def output_members(operation: str) -> frozenset[str]:
    """The members of an operation's output shape in botocore's SageMaker model."""
    model = botocore.session.get_session().get_service_model("sagemaker")
    return frozenset(model.operation_model(operation).output_shape.members)


def truncate(text: str, limit: int = FAILURE_REASON_MAX) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def python_bin() -> Path:
    return Path(sys.executable).parent


def job_env(settings: LocalSageMakerSettings, request: dict[str, Any], region: str) -> dict[str, str]:
    """The environment of a job's processes: this machine's (less AWS settings) + the request's.

    "This machine's" is the snapshot the settings took when the local SageMaker was installed, never the
    live process environment (see invocation_env)."""
    host_env = settings.host_env if settings.host_env is not None else dict(os.environ)
    env = {k: v for k, v in host_env.items() if not k.startswith(("AWS_", "SM_", "SAGEMAKER_"))}
    env["PATH"] = f"{python_bin()}{os.pathsep}{env.get('PATH', '')}"
    env.setdefault("OMP_NUM_THREADS", "1")  # N hosts x M processes share this machine's cores
    env.update({"PYTHONUNBUFFERED": "1", "AWS_REGION": region, "AWS_DEFAULT_REGION": region})
    env.update({str(k): str(v) for k, v in (request.get("Environment") or {}).items()})
    env.update(settings.extra_env)
    env.update(
        {
            "AWS_ACCESS_KEY_ID": "local-sagemaker",
            "AWS_SECRET_ACCESS_KEY": "local-sagemaker",
            "AWS_ENDPOINT_URL": NO_AWS_ENDPOINT,
            "AWS_EC2_METADATA_DISABLED": "true",
            "HF_HUB_OFFLINE": "1",
            "HF_DATASETS_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
        }
    )
    if settings.pip_offline:
        env.update({"PIP_NO_INDEX": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    return env


class LocalJob:
    """A job run by a thread of its own; Describe reads a consistent snapshot under the lock."""

    job_type = "job"
    event_detail_type = ""

    def __init__(
        self,
        request: dict[str, Any],
        *,
        name: str,
        arn: str,
        region: str,
        settings: LocalSageMakerSettings,
        on_state_change: Callable[[LocalJob], None] | None = None,
    ) -> None:
        self.request = request
        self.name = name
        self.arn = arn
        self.region = region
        self.settings = settings
        self.work_dir = settings.work_dir / name
        self.lock = threading.RLock()
        self.status = "InProgress"
        self.failure_reason: str | None = None
        self.creation_time = now()
        self.last_modified_time = self.creation_time
        self.end_time: datetime | None = None
        self._created_monotonic = time.monotonic()
        self._stop_requested = threading.Event()
        self._done = threading.Event()
        self._on_state_change = on_state_change
        self._thread = threading.Thread(target=self._run_guarded, name=f"job-{name}", daemon=True)
        self.hosts: list[HostProcess] = []
        self.attempt = 1
        self.logs = LogShipper(region=region, job_type=self.job_type, job_name=name)
        self.logs.disabled = not settings.cloudwatch_logs

    # ---- lifecycle -------------------------------------------------------------------------------
    def start(self) -> None:
        if self.work_dir.exists():  # a job name is unique; a leftover folder is from an earlier session
            shutil.rmtree(self.work_dir)
        self.work_dir.mkdir(parents=True)
        self._thread.start()

    def stop(self) -> None:
        """StopTrainingJob / StopProcessingJob: Stopping now, Stopped once the hosts are down."""
        with self.lock:
            if self.status != "InProgress":
                return
            self.status = "Stopping"
            self._on_stopping()
        self._stop_requested.set()
        self._changed("Stopping")

    def wait(self, timeout: float | None = None) -> bool:
        return self._done.wait(timeout)

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop the job if it runs and wait for its thread (the emulator is going away)."""
        self.stop()
        self._thread.join(timeout)

    def _run_guarded(self) -> None:
        try:
            self.run()
        except JobSetupError as error:
            self._fail(f"ClientError: {error}")
        except Exception as error:  # a bug here must not leave the job InProgress forever
            log.exception("local %s job %s crashed", self.job_type, self.name)
            self._fail(f"InternalServerError: local runner: {type(error).__name__}: {error}")
        finally:
            self.logs.flush()
            self._done.set()

    # ---- for subclasses --------------------------------------------------------------------------
    def run(self) -> None:
        raise NotImplementedError

    def describe(self) -> dict[str, Any]:
        raise NotImplementedError

    def _on_stopping(self) -> None:
        """Under the lock, when a stop is requested (training sets its secondary status)."""

    def _fail(self, reason: str) -> None:
        raise NotImplementedError

    # ---- shared helpers --------------------------------------------------------------------------
    def s3(self) -> Any:
        return job_client("s3", self.region)

    def base_env(self) -> dict[str, str]:
        return job_env(self.settings, self.request, self.region)

    def stop_requested(self) -> bool:
        return self._stop_requested.is_set()

    def wait_or_stop(self, seconds: float) -> bool:
        """Sleep, waking early on a stop request; True when a stop was requested."""
        return self._stop_requested.wait(seconds)

    def stop_hosts(self) -> None:
        stop_hosts(self.hosts, self.settings.stop_grace_seconds)

    def elapsed(self) -> float:
        return time.monotonic() - self._created_monotonic

    def watch_hosts(
        self, check: Callable[[], str | None], tick: Callable[[], None] | None = None,
        first: Callable[[], str | None] | None = None,
    ) -> tuple[str, HostProcess | None]:
        """Poll the hosts until they all exit 0 ("completed"), one fails ("failed", that host), a stop is
        requested ("stopped") or check() names another reason to end them; first() is asked before the exit
        codes are read (a reason that killed the hosts itself); the hosts are down on return (and their lines
        are in CloudWatch Logs)."""

        def before_poll() -> str | None:
            self.logs.maybe_flush()
            reason = first() if first is not None else None
            if reason:  # before the tick: nothing of a lost instance is synced after its loss
                return reason
            if tick is not None:
                tick()
            return "stopped" if self.stop_requested() else None

        try:
            return wait_for_hosts(
                self.hosts,
                grace_seconds=self.settings.stop_grace_seconds,
                poll_seconds=self.settings.poll_seconds,
                before_poll=before_poll,
                after_poll=check,
            )
        finally:
            self.logs.flush()

    def ship_line(self, host: str, line: str) -> None:
        """A host's output line to its CloudWatch stream (called from the host's output pump)."""
        self.logs.add(self.logs.stream(self.attempt, host), line)

    @staticmethod
    def host_failure(host: HostProcess, base_dir: Path) -> str:
        """SageMaker's FailureReason: the toolkit's output/failure file, else the end of the host's log."""
        failure_file = base_dir / "output" / "failure"
        if failure_file.is_file():
            text = failure_file.read_text(errors="replace").strip()
            if text:
                return truncate(f"AlgorithmError: {text}")
        code = host.poll()
        how = f"exited with code {code}" if code is None or code >= 0 else f"was killed by signal {-code}"
        return truncate(f"AlgorithmError: {host.host} {how}:\n{tail_text(list(host.tail))}")

    def emit(self, kind: str, message: str, **fields: Any) -> None:
        callback = self.settings.on_event
        if callback is None:
            return
        try:
            callback(JobEvent(self.name, self.job_type, kind, message, **fields))
        except Exception:  # a display error must not break the job
            log.exception("on_event callback failed")

    def _changed(self, message: str) -> None:
        """After a state change, outside the lock: progress event, EventBridge event, moto record."""
        snapshot = self.describe()
        self.emit(
            "status",
            message,
            status=snapshot.get(f"{self.job_type.capitalize()}JobStatus"),
            secondary_status=snapshot.get("SecondaryStatus"),
        )
        if self._on_state_change is not None:
            self._on_state_change(self)
        if self.settings.emit_events:
            self._put_event(snapshot)

    def _put_event(self, detail: dict[str, Any]) -> None:
        try:
            job_client("events", self.region).put_events(
                Entries=[
                    {
                        "Source": "aws.sagemaker",
                        "DetailType": self.event_detail_type,
                        "Resources": [self.arn],
                        "Detail": json.dumps(detail, default=_event_json),
                    }
                ]
            )
        except Exception:  # events are best effort, as a missing rule target would be
            log.warning("could not put the %s event for %s", self.event_detail_type, self.name, exc_info=True)


def _event_json(value: Any) -> Any:
    if isinstance(value, datetime):
        return int(value.timestamp() * 1000)  # SageMaker's state-change events carry epoch milliseconds
    raise TypeError(f"not JSON serializable: {type(value)}")


def tail_text(lines: list[str], count: int = 8) -> str:
    kept = [line for line in lines if line.strip()][-count:]
    return "\n".join(kept)
