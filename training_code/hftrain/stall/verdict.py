"""The stall verdict (watchdog.py's watchdogs judge every rank's heartbeat): who is silent, the failure message and
the `_stalls.json` record."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from contract.stall_records import MESSAGE_PREFIX, STACKS_DIR
from hftrain.stall.limits import Limits


@dataclass
class Verdict:
    ranks: list[dict[str, Any]]  # the named (silent) ranks' heartbeats
    silent_seconds: float
    limit: str
    message: str
    record: dict[str, Any] = field(default_factory=dict)


def judge(beats: dict[int, dict[str, Any] | None], limits: Limits, *, now: float, started_at: float,
          poll: float, identity: Callable[[int], tuple[str, int]] | None = None) -> Verdict | None:
    """The stall, if any, in every rank's heartbeat (None: a rank that never published, counted from
    `started_at`; `identity(rank)` gives its host and local rank from the job's layout).

    Progress means progress: the job is stalled only when every rank whose watchdog still publishes has made no
    progress for its own section's limit. A rank that moves, however slowly (a straggler, a rank stopped and
    continued again and again), keeps its peers moving too (they wait for it in the collectives): no verdict.
    A frozen rank (its watchdog silent too) has no say on the limit: the limit that applies is the one of the
    section its live peers are in (the largest of their limits: every one of them was past its own)."""
    medians = [b["median_step"] for b in beats.values() if b and b.get("median_step")]
    median = max(medians) if medians else None
    every = [_quiet(_beat_or_never(rank, beat, started_at, identity), limits, median, now, started_at)
             for rank, beat in beats.items()]
    if not any(quiet > limit for _, quiet, limit in every):
        return None
    if _some_watchdog_late(every, now, poll):
        return None
    live = [s for s in every if not s[0]["frozen"]]
    if not live or any(quiet <= limit for _, quiet, limit in live):
        return None  # some rank still moves within its limit
    binding = max(live, key=lambda s: s[2])
    _fill_in_frozen(every, live)
    job = next((s[0]["job"] for s in every if s[0].get("job")), None)
    for s in every:  # a rank that never published says no job: it is its peers'
        s[0].setdefault("job", job)
    silent = [s for s in every if s[1] > s[2] / 2 or s[0]["frozen"]]  # may be the cause
    # a frozen rank is the cause whenever it last moved (it may have begun the next step before it froze)
    named = [s for s in every if s[0]["frozen"]] or [s for s in silent if not s[0].get("waiting")] or silent
    named.sort(key=lambda s: (-s[1], s[0]["rank"]))
    beat, quiet, _limit = named[0]
    rule = limits.describe(binding[0].get("kind", "train"), median, binding[0].get("sections"))
    if beat["frozen"]:  # its own beat is stale: the job made no progress since its live peers' last move
        quiet = min(s[1] for s in live)
    message = _message(named, quiet, rule, len(silent), len(beats))
    return Verdict([s[0] for s in named], quiet, rule, message, _stall_record(named, quiet, rule, message, now))


def _beat_or_never(rank: int, beat: dict[str, Any] | None, started_at: float,
                   identity: Callable[[int], tuple[str, int]] | None) -> dict[str, Any]:
    """A rank's heartbeat, or one that says it never published (silent since `started_at`)."""
    if beat:
        return beat
    host, local_rank = identity(rank) if identity is not None else ("?", "?")
    return {"rank": rank, "moved_at": started_at, "alive_at": started_at, "kind": "startup",
            "phase": "not started", "step": None, "where": "", "frames": [], "host": host,
            "local_rank": local_rank, "never": True}


def _fill_in_frozen(every: list[tuple[dict[str, Any], float, float]],
                    live: list[tuple[dict[str, Any], float, float]]) -> None:
    """A frozen rank's last beat may be older than its last step (it published every poll): its live peers wait
    for it in the next step's collective, so it completed at least the step they all completed."""
    steps = [s[0].get("step") for s in live if s[0].get("kind") != "startup" and s[0].get("step") is not None]
    if not steps:
        return
    for beat, _quiet, _limit in every:
        if beat["frozen"] and (beat.get("step") is None or beat["step"] < min(steps)):
            # its frames are as stale as its beat: said as such, not as where it froze
            beat.update(step=min(steps), step_from_peers=True, where="",
                        kind="train" if beat.get("kind") == "startup" else beat.get("kind"))


def _quiet(beat: dict[str, Any], limits: Limits, median: float | None, now: float,
           started_at: float) -> tuple[dict[str, Any], float, float]:
    """(beat, seconds without progress, the limit for its phase)."""
    limit = limits.seconds(beat.get("kind", "train"), median, beat.get("sections"))
    return beat, now - float(beat.get("moved_at") or started_at), limit


def _some_watchdog_late(every: list[tuple[dict[str, Any], float, float]], now: float, poll: float) -> bool:
    """Marks each beat `frozen` (never published, or its watchdog silent for max(3 polls, 5 s)) and says whether
    to wait: a watchdog that missed two beats may be frozen (a SIGSTOP that landed after the rank's last step);
    wait until it is clearly frozen or alive again before naming anyone, at most frozen_after past the limit."""
    frozen_after = max(3 * poll, 5.0)
    late = False
    for beat, quiet, limit in every:
        age = now - float(beat.get("alive_at") or 0)
        beat["frozen"] = bool(beat.get("never")) or age > frozen_after
        late = late or (not beat["frozen"] and age > 2 * poll and quiet <= limit + frozen_after)
    return late


def _stall_record(named: list[tuple[dict[str, Any], float, float]], quiet: float, rule: str, message: str,
                  now: float) -> dict[str, Any]:
    """The `_stalls.json` record of a stall (CONTRACTS.md): the first named rank, when progress last happened."""
    beat = named[0][0]
    return {"job": beat.get("job"), "last_progress_at": round(now - quiet, 3),
            "detected_at": round(now, 3), "rank": beat["rank"], "host": beat.get("host"),
            "local_rank": beat.get("local_rank"), "step": beat.get("step"), "phase": beat.get("phase"),
            "where": (beat.get("frames") or [""])[0], "frozen": beat["frozen"],
            "ranks": [s[0]["rank"] for s in named], "silent_seconds": round(quiet, 1), "limit": rule,
            "reason": message.splitlines()[0]}


def _rank_text(beat: dict[str, Any]) -> str:
    return f"rank {beat['rank']} ({beat.get('host')}, local rank {beat.get('local_rank')})"


def _message(named: list[tuple[dict[str, Any], float, float]], quiet: float, rule: str, silent: int,
             world: int) -> str:
    beat = named[0][0]
    others = [_rank_text(s[0]) for s in named[1:4]]
    who = _rank_text(beat) + (f" (also {', '.join(others)})" if others else "")
    if beat.get("never") and beat.get("step_from_peers"):
        state = (f"never reported (frozen or dead before its watchdog's first beat); no progress for "
                 f"{quiet / 60:.1f} min, after step {beat.get('step')} (the last step every rank completed)")
    elif beat.get("never"):
        state = "never reported (its process may not have started)"
    elif beat.get("frozen"):
        at = (f", after step {beat.get('step')} (the last step every rank completed)" if beat.get("step_from_peers")
              else f", last heard at step {beat.get('step')}" if beat.get("step") is not None
              else f", last heard at start-up phase {beat.get('phase')}")
        state = (f"stopped responding (its process is frozen or SIGSTOPped: not even its watchdog thread runs); no "
                 f"progress for {quiet / 60:.1f} min{at}")
    elif beat.get("step") is None or beat.get("kind") == "startup":
        state = f"made no progress for {quiet / 60:.1f} min in start-up phase {beat.get('phase')} (before step 1)"
    else:
        state = f"made no progress for {quiet / 60:.1f} min at step {beat.get('step')}"
        if beat.get("kind") != "train":
            state += f" in {beat.get('phase')}"
    frames = beat.get("frames") or []
    last = f"; last in {' <- '.join(frames)}" if frames else ""
    if frames and beat.get("step_from_peers"):
        last = f"; last heard in {' <- '.join(frames)} (its last beat, older than that step)"
    if beat.get("where"):
        last += f" (step part: {beat['where']})"
    first = f"{MESSAGE_PREFIX}{who} {state}{last}"
    return (f"{first}\n{silent} of {world} ranks without progress (the others wait for the named rank in a "
            f"collective); limit {rule}. The stacks of every rank that could still run are in the job's log and in "
            f"{STACKS_DIR}/{beat.get('job')}/rank-<rank>.txt under the run's checkpoint prefix; the pipeline starts "
            "a new attempt from the last durable checkpoint if fallback.max_attempts allows (stall.action 'fail': the "
            "run ends).")
