"""Host logs of local jobs written to the emulated CloudWatch Logs under SageMaker's names.

SageMaker writes each instance's output to log group `/aws/sagemaker/TrainingJobs` (processing:
`/aws/sagemaker/ProcessingJobs`), stream `<job name>/algo-<n>-<epoch seconds>`; a restarted instance (spot)
writes a new stream. The local jobs do the same, so that `python -m runctl logs RUN` and anything else that
reads those logs works against the emulator as against AWS.

Lines are buffered by the hosts' output pumps and written by the job thread (`flush`), in batches within
PutLogEvents' limits; a failure to write logs never fails a job.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from local_mode.aws.clients import job_client

log = logging.getLogger(__name__)

LOG_GROUPS = {"training": "/aws/sagemaker/TrainingJobs", "processing": "/aws/sagemaker/ProcessingJobs"}
MAX_BATCH_EVENTS = 10_000
MAX_BATCH_BYTES = 1_000_000  # PutLogEvents: 1,048,576 bytes with 26 bytes per event
MAX_EVENT_BYTES = 256 * 1024 - 26


def stream_name(job_name: str, host: str, started: float) -> str:
    return f"{job_name}/{host}-{int(started)}"


class LogShipper:
    def __init__(self, *, region: str, job_type: str, job_name: str, flush_seconds: float = 1.0) -> None:
        self.region = region
        self.group = LOG_GROUPS.get(job_type, LOG_GROUPS["training"])
        self.job_name = job_name
        self.flush_seconds = flush_seconds
        self._lock = threading.Lock()
        self._pending: dict[str, list[tuple[int, str]]] = {}
        self._streams: dict[tuple[int, str], str] = {}  # (attempt, host) -> stream
        self._created: set[str] = set()
        self._client: Any = None
        self._last_flush = 0.0
        self.disabled = False

    def stream(self, attempt: int, host: str) -> str:
        """The stream of one host in one attempt (a new one per restart, as a new instance writes)."""
        with self._lock:
            key = (attempt, host)
            if key not in self._streams:
                started = time.time()
                # two attempts within one second: keep the names apart
                while stream_name(self.job_name, host, started) in self._streams.values():
                    started += 1
                self._streams[key] = stream_name(self.job_name, host, started)
            return self._streams[key]

    def add(self, stream: str, line: str) -> None:
        if self.disabled or not line.strip():
            return
        data = line.encode("utf-8", "replace")
        if len(data) > MAX_EVENT_BYTES:
            line = data[:MAX_EVENT_BYTES].decode("utf-8", "ignore")
        with self._lock:
            self._pending.setdefault(stream, []).append((int(time.time() * 1000), line))

    def maybe_flush(self) -> None:
        if time.monotonic() - self._last_flush >= self.flush_seconds:
            self.flush()

    def flush(self) -> None:
        self._last_flush = time.monotonic()
        with self._lock:
            pending, self._pending = self._pending, {}
        if self.disabled or not pending:
            return
        try:
            client = self._client = self._client or job_client("logs", self.region)
            self._ensure(client, None)
            for stream, events in pending.items():
                self._ensure(client, stream)
                for batch in _batches(sorted(events, key=lambda e: e[0])):
                    client.put_log_events(logGroupName=self.group, logStreamName=stream,
                                          logEvents=[{"timestamp": t, "message": m} for t, m in batch])
        except Exception:  # noqa: BLE001 - logs are best effort, the host log files keep everything
            log.warning("could not write CloudWatch logs for %s; further lines stay in the local log files",
                        self.job_name, exc_info=True)
            self.disabled = True

    def _ensure(self, client: Any, stream: str | None) -> None:
        key = stream or ""
        if key in self._created:
            return
        try:
            if stream is None:
                client.create_log_group(logGroupName=self.group)
            else:
                client.create_log_stream(logGroupName=self.group, logStreamName=stream)
        except client.exceptions.ResourceAlreadyExistsException:
            pass
        self._created.add(key)


def _batches(events: list[tuple[int, str]]) -> list[list[tuple[int, str]]]:
    out: list[list[tuple[int, str]]] = []
    current: list[tuple[int, str]] = []
    size = 0
    for event in events:
        cost = len(event[1].encode("utf-8")) + 26
        if current and (len(current) >= MAX_BATCH_EVENTS or size + cost > MAX_BATCH_BYTES):
            out.append(current)
            current, size = [], 0
        current.append(event)
        size += cost
    if current:
        out.append(current)
    return out
