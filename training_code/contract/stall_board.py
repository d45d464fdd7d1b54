"""The stall board's keys: where the stall watchdogs of one training job meet in torchrun's TCPStore.

Producer: Prepare mints a random token per run (lambda/plan/planning.py, `Run.stall_board_token`); the training
job request carries it in the job's environment (lambda/plan/job_requests.py, checked by the request guard).
Consumer: the stall watchdog of every rank (hftrain/stall/watchdog.py) keys its heartbeats, claim, flag and acks
under `prefix(token)`. TCPStore has no authentication and no way to list keys: a process of another job that can
reach the store cannot set this run's stall flag without the token. Without a token (local runs, a state planned
before the token existed) the fixed prefix is used.
"""

from __future__ import annotations

import re

VARIABLE = "HFTRAIN_STALL_BOARD_TOKEN"
FIXED_PREFIX = "hftrain-stall/"
TOKEN_RE = re.compile(r"[0-9a-f]{32}")


def prefix(token: str | None, generation: int = 0) -> str:
    """The keys' prefix for `token` (32 lowercase hex digits); the fixed prefix for none or a malformed one.
    A recovery in place (hftrain/recovery/) starts generation 1, 2, ... of the training processes in the same job:
    each generation's keys are its own (an earlier generation's stall flag must not end the next one)."""
    base = f"{FIXED_PREFIX}{token}/" if token and TOKEN_RE.fullmatch(token) else FIXED_PREFIX
    return f"{base}g{generation}/" if generation else base


def environment(token: str) -> dict[str, str]:
    """The job's environment entry carrying `token` ({} without one)."""
    return {VARIABLE: token} if token else {}
