"""One FailureReason for a failed local training job, from every host's evidence, whatever order it arrived in.

Each host leaves: its failure file (`/opt/ml/output/failure`: a stall verdict, a rank's exception, a peer's
collective error that names the rank that went silent), the launcher's exit code, and torchrun's report of a
worker that died (`failed (exitcode: -9) local_rank: 0 (pid: ...)`: the signal; a SIGKILLed worker writes nothing
itself). The cause is chosen by contract/failure_causes.py's precedence and the others are listed as its
consequences; a killed rank is named with its global rank (node rank x processes per host + local rank), host,
signal and the last step its peers completed with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from contract import failure_causes as causes

LOG_TAIL_BYTES = 256 * 1024
STOP_SIGNAL = 15  # SIGTERM: how the job itself stops the other hosts, not a cause


@dataclass(frozen=True)
class HostEnd:
    """What one host left: its name and node rank, its launcher's exit code, its failure file and log."""

    host: str
    index: int
    exit_code: int | None
    failure_file: Path
    log_path: Path


def _read(path: Path, limit: int | None = None) -> tuple[str, float | None]:
    try:
        with path.open("rb") as handle:
            if limit is not None:
                size = path.stat().st_size
                handle.seek(max(0, size - limit))
            return handle.read().decode("utf-8", "replace"), path.stat().st_mtime
    except OSError:
        return "", None


def host_evidence(end: HostEnd, processes_per_host: int) -> list[causes.Evidence]:
    """The evidence one host left (none when it left nothing: stopped by the job before it could say anything)."""
    found: list[causes.Evidence] = []
    text, written = _read(end.failure_file)
    if text.strip():
        found.append(causes.Evidence(causes.classify(text), text.strip(), host=end.host, at=written))
    log, logged = _read(end.log_path, LOG_TAIL_BYTES)
    for local_rank, code, pid in causes.torchrun_failures(log):
        if code < 0 and -code != STOP_SIGNAL:
            rank = end.index * processes_per_host + local_rank
            found.append(causes.Evidence(
                causes.SIGNAL, f"rank {rank} ({end.host}, local rank {local_rank}, pid {pid}) was killed by "
                f"{causes.signal_text(-code)}", rank=rank, host=end.host, at=logged))
    return found


def job_failure(ends: list[HostEnd], processes_per_host: int, fallback: str) -> str:
    """The job's failure text (without SageMaker's `AlgorithmError: `): the cause first, its consequences after;
    `fallback` (the failed host's log tail) when no host left any evidence."""
    evidence = [e for end in ends for e in host_evidence(end, processes_per_host)]
    if not evidence:
        return fallback
    cause, consequences = causes.choose(evidence)
    if cause.cause == causes.SIGNAL:
        cause = _with_step(cause, evidence)
    return causes.format_reason(cause, consequences)


def _with_step(cause: causes.Evidence, evidence: list[causes.Evidence]) -> causes.Evidence:
    """A killed rank's last step: the step its peers completed when their collective with it failed (in data
    parallel training every rank completes each step together)."""
    steps = [peer[3] for peer in (causes.silent_peer(e.text) for e in evidence) if peer is not None]
    if not steps:
        return causes.Evidence(cause.cause, cause.text + " (its last step is unknown: no peer reported it)",
                               rank=cause.rank, host=cause.host, at=cause.at)
    return causes.Evidence(cause.cause, f"{cause.text} after step {min(steps)} (the last step its peers completed "
                           "with it)", rank=cause.rank, host=cause.host, step=min(steps), at=cause.at)
