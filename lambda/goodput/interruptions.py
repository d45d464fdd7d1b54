"""One record per interruption (ledger.py, "Interruptions"): for every attempt but the last, the step it
reached, the step the next attempt resumed from, what was lost and what the restart cost again. A value the logs
cannot tell is None and `unknown` says why; never 0. Pure.
"""

from __future__ import annotations

from typing import Any

from contract.checkpoint_marker import checkpoint_name
from hfsm_lambda.goodput.attempts import Attempt
from hfsm_lambda.goodput.evidence import Evidence
from hfsm_lambda.goodput.split import Split
from hfsm_lambda.goodput.values import BEFORE_TRAINING, LEADER, iso, number

HOW = {"Interrupted": "spot interruption"}  # how an attempt ended, in words (else its end status)


def startup_wall(attempt: Attempt, found: Evidence | None) -> float:
    """Wall seconds from the attempt's Training start to its first step (to its Training end without one)."""
    t0 = attempt.training_start
    first = (found.last or {}).get("first_step_at") if found else None
    if t0 is None:
        return 0.0
    return max(0.0, (number(first) if first else (attempt.training_end or t0)) - t0)


def _logged_reach(found: Evidence | None, resumed: int | None) -> tuple[int | None, str | None]:
    """(step reached, what says so) from the attempt's log, and the checkpoint the next attempt resumed from."""
    if found is None:
        return None, None
    logged, start = found.step_reached, found.start_step
    if logged is not None and resumed is not None and start is not None and resumed > max(logged, start):
        # The next attempt resumed from a checkpoint this attempt saved after its last line that reached the
        # log (a SIGTERM save whose output was lost with the process relaying it): it reached at least that.
        return resumed, (f"{checkpoint_name(resumed)}, which it saved after its last logged line (step {logged} in "
                         f"{found.stream})")
    return logged, f"the last PROGRESS line of {found.stream}"


def _unlogged_reach(attempt: Attempt, found: Evidence | None) -> tuple[int | None, str | None]:
    """No step logged: (its start step, None) for an attempt that never reached its first step, else
    (None, why the step reached is unknown)."""
    if found is None:
        return None, f"no {LEADER} log stream of {attempt.job} for this attempt"
    if found.error:
        return None, f"its log {found.stream} could not be read: {found.error}"
    if found.reports and not found.trained:
        return found.start_step, None  # it never reached its first step: it stopped where it started
    return None, f"its log {found.stream} has no PROGRESS line"


def _reach(attempt: Attempt, found: Evidence | None, resumed: int | None) -> tuple[int | None, str | None, list[str]]:
    """(step reached, what says so, why it is unknown: [] when known)."""
    reached, source = _logged_reach(found, resumed)
    if reached is not None:
        return reached, source, []
    reached, why = _unlogged_reach(attempt, found)
    return reached, source, [why] if why else []


def _how(attempt: Attempt, *, stalled: bool) -> str:
    return "stall" if stalled else HOW.get(attempt.ended, attempt.ended or "ended")


def interruption(attempt: Attempt, found: Evidence | None, nxt: Attempt, following: Evidence | None,
                 split: Split, row: dict[str, Any], *, stalled: bool = False) -> dict[str, Any]:
    """The record of the interruption that ended `attempt` (its ledger row `row`); `nxt` is the next attempt."""
    resumed = following.start_step if following else None
    reached, source, unknown = _reach(attempt, found, resumed)
    if resumed is None:
        unknown.append("the next attempt's log does not say where it resumed" if following else
                       f"no {LEADER} log stream of {nxt.job} for the next attempt")
    lost = reached - resumed if reached is not None and resumed is not None else None
    replayed = row["parts"]["replayed"]
    restart = (nxt.window(BEFORE_TRAINING) + startup_wall(nxt, following))
    return {
        "job": attempt.job, "attempt": row["attempt"], "restart": attempt.restart, "how": _how(attempt, stalled=stalled),
        "step_reached": reached, "step_logged": found.step_reached if found else None,
        "step_reached_from": source if reached is not None else None,
        "reached_at": iso(found.progress[-1][0]) if found and found.progress else None,
        # a save in flight at the last report that the next attempt resumed at or past was no loss: it completed
        # (or a SIGTERM save superseded it) after the log's last line
        "during_save": split.during_save and lost != 0,
        "resumed_from_step": resumed, "resumed_by_job": nxt.job, "resumed_at": iso(nxt.start),
        "lost_steps": max(0, lost) if lost is not None else None,
        "lost_minutes": round(replayed / attempt.instance_count / 60, 3) if lost is not None else None,
        "lost_instance_seconds": round(replayed, 3),
        "restart_seconds": round(restart, 3),
        "unknown": "; ".join(unknown) or None,
    }
