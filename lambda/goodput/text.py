"""The goodput ledger (ledger.py) in words: the summary lines of notifications and `runctl status`, and one line
per interruption. Pure.
"""

from __future__ import annotations

from typing import Any

from hfsm_lambda.goodput.values import PARTS

SMALL_SHARE = 0.01  # parts under 1% of the billed time are shown together as `other` (each named in it)
TOP_DETAILS = 4  # the largest details shown beside a part


def _seconds(value: float) -> str:
    value = float(value)
    if abs(value) < 120:
        return f"{value:.0f} s"
    if abs(value) < 7200:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.2f} h"


def lost_time(minutes: float | None) -> str:
    """Time lost, never rounded to nothing: seconds under a minute ("under 1 s" for a loss below half a second),
    minutes above; "unknown time" when not known."""
    if minutes is None:
        return "unknown time"
    seconds = float(minutes) * 60
    if 0 < seconds < 0.5:
        return "under 1 s"
    if seconds < 60:
        return f"{seconds:.0f} s"
    return f"{float(minutes):.1f} min"


def _part_line(name: str, value: float, percent: float, details: dict[str, float]) -> str:
    """One part: its share (percent), its time and its largest details (half a second or more)."""
    top = sorted(((k, v) for k, v in details.items() if v >= 0.5), key=lambda kv: -kv[1])[:TOP_DETAILS]
    extra = " (" + ", ".join(f"{k.replace('_', ' ')} {_seconds(v)}" for k, v in top) + ")" if top else ""
    return f"  {name:<13} {percent:5.1f}%  {_seconds(value)}{extra}"


def shares(parts: dict[str, float], billed: float) -> dict[str, float]:
    """Each part's share of the billed time in percent with one decimal, rounded so that they add up to exactly
    100.0 (largest remainders)."""
    if billed <= 0:
        return dict.fromkeys(parts, 0.0)
    exact = {k: max(0.0, v) * 1000 / billed for k, v in parts.items()}
    tenths = {k: int(v) for k, v in exact.items()}
    short = 1000 - sum(tenths.values())
    for name in sorted(exact, key=lambda k: exact[k] - tenths[k], reverse=True)[:max(0, short)]:
        tenths[name] += 1
    return {k: v / 10 for k, v in tenths.items()}


def summary_lines(goodput: dict[str, Any] | None) -> list[str]:
    """The goodput line and every part, `productive` first, their shares adding up to 100% (parts under
    `SMALL_SHARE` grouped as `other`, named), for notifications and `runctl status`."""
    if not goodput or not goodput.get("billed_seconds"):
        return []
    billed = float(goodput["billed_seconds"])
    parts = {name: float((goodput.get("parts") or {}).get(name) or 0.0) for name in PARTS}
    ratio = goodput.get("ratio") or 0.0
    attempts = goodput.get("attempts") or []
    lines = [f"Goodput: {ratio:.1%} of {_seconds(billed)} billed instance time was productive training "
             f"({len(attempts)} attempt(s); waiting for instances, unbilled: {_seconds(goodput.get('waiting_seconds') or 0)})"]
    details = goodput.get("details") or {}
    order = ["productive", *[name for name in PARTS if name != "productive"]]
    small = [n for n in order if n not in ("productive", "unaccounted") and parts[n] < SMALL_SHARE * billed]
    shown = {n: parts[n] for n in order if n not in small}
    if small:
        shown["other"] = sum(parts[n] for n in small)
    percent = shares(shown, billed)
    for name, value in shown.items():
        if name == "other":  # every small part named, zeros too: the list is the whole ledger
            named = ", ".join(f"{n} {_seconds(parts[n])}" for n in small)
            lines.append(f"  {name:<13} {percent[name]:5.1f}%  {_seconds(value)} ({named})")
        else:
            lines.append(_part_line(name, value, percent[name], details.get(name) or {}))
    return lines


def _where(record: dict[str, Any]) -> str:
    reached = record.get("step_reached")
    where = f"step {reached} reached" if reached is not None else "step reached unknown"
    return where + " (during a checkpoint save)" if record.get("during_save") else where


def _back(resumed: int | None) -> str:
    if resumed is None:
        return "resumed from an unknown step"
    return f"resumed from step {resumed}" if resumed else "restarted from scratch (step 0)"


def _lost(record: dict[str, Any]) -> str:
    if record.get("lost_steps") is None:
        return "work lost unknown"
    return f"{record['lost_steps']} step(s), {lost_time(record.get('lost_minutes'))} of training lost"


def interruption_line(record: dict[str, Any]) -> str:
    """One interruption as it happened; unknown values said as unknown."""
    line = (f"{record.get('how')} of {record.get('job')}: {_where(record)}, {_back(record.get('resumed_from_step'))} "
            f"by {record.get('resumed_by_job')}: {_lost(record)}; "
            f"the restart spent {_seconds(record.get('restart_seconds') or 0)} on download and start-up again")
    if record.get("unknown"):
        line += f" (unknown: {record['unknown']})"
    return line
