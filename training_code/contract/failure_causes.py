"""The cause of a failed training attempt: one verdict, whatever order the evidence arrives in.

Evidence of a failure comes from several places and in no fixed order: the stall watchdog's announcement
(hftrain/stall/), a rank's own exception (hftrain/run/failure.py), torchrun's report of a worker that died
(`exitcode: -9`, "Signal 9 (SIGKILL) received by PID"), a host's exit code, the peers' consequential errors (gloo
"Connection reset by peer", NCCL timeouts). `choose` keeps exactly one cause by PRECEDENCE, earliest first among
equals, and lists the rest as consequences; `format_reason` writes it as the job's failure text, whose first line
`cause_of` reads back (lambda/runs/outcomes.py classifies FailureReason with it, the action per cause is
lambda/runs/actions.py).

PRECEDENCE (the first that applies is the cause):
1. `stalled`: a stall watchdog (in the job, or the outside watch) declared a stall: the other ranks' errors
   followed from it being ended; `straggler`: the watchdog ended the job for a rank slower than the fleet
   (`stall.stragglers: end`), so that a new attempt runs on other instances;
2. `signal`: a rank was killed by a signal (SIGKILL from the OOM killer or an operator, SIGSEGV, ...);
3. `out-of-memory`: a rank ran out of memory (CUDA or host);
4. `collective`: a collective failed (gloo/NCCL: connection reset, timeout) with no better evidence of why: the
   peer that caused it is unknown;
5. `configuration`: the script refused its settings or data before training (exit code 2: a user error);
6. `exception`: the script's own exception.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from contract import stall_records

STALLED, SIGNAL, OOM, COLLECTIVE, CONFIGURATION, EXCEPTION = (
    "stalled", "signal", "out-of-memory", "collective", "configuration", "exception")
STRAGGLER = "straggler"  # stall.stragglers end: the job ended for a slow rank (hftrain/stall/stragglers.py)
STRAGGLER_PREFIX = "straggler ended the job: "
INSTANCE = "instance"  # an instance lost or unhealthy, a spot reclaim: SageMaker says so, not the script
PRECEDENCE = (STALLED, STRAGGLER, SIGNAL, OOM, COLLECTIVE, CONFIGURATION, EXCEPTION)
# What the training job itself does about each cause (hftrain/recovery/, the per-rank supervisor): the in-job half
# of the one action table whose pipeline half is lambda/runs/actions.py (its tests check that the two agree).
IN_PLACE, IN_PLACE_ONCE, NOT_IN_PLACE = "in-place", "in-place-once", "not-in-place"
IN_JOB_ACTION = {STALLED: IN_PLACE, SIGNAL: IN_PLACE, COLLECTIVE: IN_PLACE,
                 EXCEPTION: IN_PLACE_ONCE,  # once per error: the same error at the same step again ends the run
                 OOM: NOT_IN_PLACE, CONFIGURATION: NOT_IN_PLACE, INSTANCE: NOT_IN_PLACE,
                 STRAGGLER: NOT_IN_PLACE}  # the same instances would be as slow: a new attempt on others
CONSEQUENCES_PREFIX = "consequences (not the cause): "
USER_ERROR_EXIT = 2  # train.py's exit code for a settings or data error (hftrain/run/runner.py)

SIGNAL_NAMES = {1: "SIGHUP", 2: "SIGINT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS", 8: "SIGFPE", 9: "SIGKILL",
                11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM"}
_SIGNAL_RES = (re.compile(r"killed by signal (\d+)"), re.compile(r"Signal (\d+) \(SIG[A-Z]+\) received by PID"),
               re.compile(r"exitcode\s*:?\s*-(\d+)"))
_OOM_RE = re.compile(r"out of memory|OutOfMemoryError|CUDA error: out of memory|MemoryError|"
                     r"Cannot allocate memory", re.IGNORECASE)
_COLLECTIVE_RE = re.compile(r"Connection reset by peer|Connection closed by peer|ProcessGroupGloo|"
                            r"ProcessGroupNCCL|DistBackendError|DistNetworkError|NCCL (?:error|timeout)|"
                            r"gloo/transport|Broken pipe|Watchdog caught collective operation timeout",
                            re.IGNORECASE)
_CONFIG_RE = re.compile(r"\bexit(?:ed with)? code 2\b|ExitCode 2\b")


@dataclass(frozen=True)
class Evidence:
    """One piece of evidence: what one rank (or host) said or how it ended."""

    cause: str
    text: str  # the rank's own words (its failure file's first line, torchrun's report, an exit code)
    rank: int | None = None
    host: str | None = None
    step: int | None = None  # the last step that rank completed, when known
    at: float | None = None  # when it happened (unix seconds), when known
    extra: dict = field(default_factory=dict, compare=False)


def signal_number(text: str) -> int | None:
    """The signal a text says killed a process (torchrun's `exitcode: -9`, "killed by signal 9")."""
    for pattern in _SIGNAL_RES:
        match = pattern.search(text)
        if match:
            return int(match.group(1))
    return None


def signal_text(number: int) -> str:
    return f"signal {number} ({SIGNAL_NAMES.get(number, 'SIG?')})"


def classify(text: str, exit_code: int | None = None) -> str:
    """The cause one piece of text (and an exit code: negative is a signal) says, by PRECEDENCE."""
    if stall_records.says_stall(text):
        return STALLED
    if STRAGGLER_PREFIX in text:
        return STRAGGLER
    if (exit_code is not None and exit_code < 0) or signal_number(text) is not None:
        return SIGNAL
    if _OOM_RE.search(text):
        return OOM
    if _COLLECTIVE_RE.search(text):
        return COLLECTIVE
    if exit_code == USER_ERROR_EXIT or _CONFIG_RE.search(text):
        return CONFIGURATION
    return EXCEPTION


def cause_of(reason: str) -> str:
    """The cause a job's failure text (FailureReason, `AlgorithmError: ` prefix or not) gives: the text before
    the consequences line `format_reason` wrote (a toolkit message, one rank's own failure: the whole text)."""
    return classify(reason.partition(f"\n{CONSEQUENCES_PREFIX}")[0])


_NAMED_RE = re.compile(r"\brank (\d+) \(([^,()]+), local rank \d+\)")


def named_rank(text: str) -> tuple[int, str] | None:
    """(rank, host) a stall or straggler text names first ("rank 3 (algo-2, local rank 1)"): the rank it is about,
    not the rank that wrote it."""
    match = _NAMED_RE.search(text.strip().splitlines()[0] if text.strip() else "")
    return (int(match[1]), match[2]) if match else None


_SILENT_RE = re.compile(r"rank (\d+) \(([^,()]+), local rank (\d+)\) went silent after step (\d+)")
_TORCHRUN_RE = re.compile(r"failed \(exitcode: (-?\d+)\) local_rank: (\d+) \(pid: (\d+)\)")


def silent_peer_text(*, rank: int, host: str, local_rank: int, step: int | None, silent_seconds: float,
                     error: str) -> str:
    """A rank whose collective failed says which peer went silent first (its watchdog stopped publishing): the
    peer is the likely cause, this rank's error a consequence (hftrain/stall/watchdog.py `peer_failure`)."""
    return (f"rank {rank} ({host}, local rank {local_rank}) went silent after step {step if step is not None else 0} "
            f"(its watchdog stopped publishing {silent_seconds:.0f} s before this rank's collective failed: its "
            f"process died or froze); this rank's error is a consequence: {error}")


def silent_peer(text: str) -> tuple[int, str, int, int] | None:
    """(rank, host, local rank, step) of the peer a `silent_peer_text` names."""
    match = _SILENT_RE.search(text)
    return (int(match[1]), match[2], int(match[3]), int(match[4])) if match else None


def torchrun_failures(log: str) -> list[tuple[int, int, int]]:
    """(local rank, exit code, pid) of every worker torchrun's agent reported failed in its log ("failed
    (exitcode: -9) local_rank: 0 (pid: 123) of binary ..."): a negative exit code is the signal that killed it."""
    return [(int(m[2]), int(m[1]), int(m[3])) for m in _TORCHRUN_RE.finditer(log)]


def _rank_order(evidence: Evidence) -> tuple[int, float, int]:
    return (PRECEDENCE.index(evidence.cause) if evidence.cause in PRECEDENCE else len(PRECEDENCE),
            evidence.at if evidence.at is not None else float("inf"),
            evidence.rank if evidence.rank is not None else 1 << 30)


def choose(evidence: list[Evidence]) -> tuple[Evidence, list[Evidence]]:
    """(the cause, the consequences): the strongest cause by PRECEDENCE, the earliest among equals; ValueError on
    no evidence. The order of `evidence` does not matter."""
    if not evidence:
        raise ValueError("no evidence of a failure")
    ordered = sorted(evidence, key=_rank_order)
    return ordered[0], ordered[1:]


def who(evidence: Evidence) -> str:
    if evidence.rank is None:
        return evidence.host or "a host"
    return f"rank {evidence.rank} ({evidence.host or '?'})"


def format_reason(cause: Evidence, consequences: list[Evidence]) -> str:
    """The failure text: the cause's own words (a stall keeps the watchdog's message), then one line that lists
    the consequences (SageMaker keeps the first 1024 characters: the consequences are cut first). Evidence that
    says the same as the cause (every host's copy of one stall verdict) is the cause, not a consequence."""
    text = cause.text.strip()
    first = text.splitlines()[0]
    others = [c for c in consequences if c.text.strip().splitlines()[0] != first]
    if others:
        listed = "; ".join(f"{who(c)}: {_clip(c.text.strip().splitlines()[0], 200)}" for c in others[:4])
        more = f" (+{len(others) - 4} more)" if len(others) > 4 else ""
        text += f"\n{CONSEQUENCES_PREFIX}{listed}{more}"
    return text


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."
