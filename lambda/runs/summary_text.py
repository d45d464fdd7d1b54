"""The run summary as a person reads it: one outcome line, then a small table. Pure.

Used by the success notification (SNS) and printed by the local mode as received, so both show the same:
metrics next to the task's trivial baseline (the training code reports `eval_baseline_<metric>`), training and
billable instance time, cost, spot saving, every attempt with the interruptions it really had, the model.
"""

from __future__ import annotations

from typing import Any

from hfsm_lambda.runs import coverage, verdict

BASELINE_PREFIX = "eval_baseline_"
# Shown first, in this order, when present; then the other eval_* metrics; then train_loss.
HEADLINE = ("eval_f1", "eval_exact_match", "eval_accuracy", "eval_macro_f1", "eval_rougeL", "eval_rouge1",
            "eval_rouge2", "eval_rougeLsum")
NOT_SHOWN_SUFFIXES = ("_runtime", "_per_second", "_total", "epoch")


def _value(value: Any) -> str:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:.4g}" if abs(value) < 1000 else f"{value:,.0f}"


def duration(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    minutes, sec = divmod(seconds, 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{sec:02d}s" if hours else f"{minutes}m{sec:02d}s"


def metric_rows(metrics: dict[str, Any]) -> list[tuple[str, str, str]]:
    """(name, value, trivial baseline or '') for the metrics worth reading, headline first."""
    shown = [n for n in metrics if n.startswith("eval_") and not n.startswith(BASELINE_PREFIX)
             and not n.endswith(NOT_SHOWN_SUFFIXES)]
    order = [n for n in HEADLINE if n in shown] + sorted(n for n in shown if n not in HEADLINE)
    if "train_loss" in metrics:
        order.append("train_loss")
    rows = []
    for name in order:
        baseline = metrics.get(BASELINE_PREFIX + name.removeprefix("eval_")) if name.startswith("eval_") else None
        rows.append((name, _value(metrics[name]), "" if baseline is None else _value(baseline)))
    return rows


def _table(rows: list[tuple[str, ...]], indent: str = "  ") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [(indent + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row))).rstrip() for row in rows]


def attempt_line(attempt: dict[str, Any]) -> str:
    kind = "spot" if attempt.get("spot") else "on-demand"
    line = (f"#{attempt.get('attempt')} {attempt.get('job_name')}: {attempt.get('instance_type')} "
            f"x{attempt.get('instance_count')} {kind}, {attempt.get('outcome')}")
    if attempt.get("outcome") != "completed" and attempt.get("reason"):
        line += f" ({attempt['reason']})"
    count = attempt.get("interruptions")
    if count:
        line += f"; {count} spot interruption{'s' if count != 1 else ''}, resumed from checkpoints"
    elif count == 0 and attempt.get("spot"):
        line += "; no spot interruption"
    return line


def straggler_line(straggler: dict[str, Any]) -> str:
    """A rank slower than the fleet (hftrain/stall/stragglers.py), as the summary and the notification say it."""
    return (f"  straggler: rank {straggler.get('rank')} ({straggler.get('host')}) takes "
            f"{straggler.get('own_step_seconds')} s of its own per step against the fleet's median "
            f"{straggler.get('median_step_seconds')} s (+{float(straggler.get('slower') or 0):.0%}): up to "
            f"{straggler.get('minutes_lost_per_hour')} min of every hour of every instance"
            + ("" if straggler.get("now", True) else " (while it was slower; it caught up before the job ended)"))


def success_lines(summary: dict[str, Any]) -> list[str]:
    cost = summary.get("cost") or {}
    attempts = summary.get("attempts") or []
    starts = sum(1 + int(a.get("interruptions") or 0) for a in attempts)
    jobs = cost.get("jobs") or []
    training_jobs = [j for j in jobs if j.get("job_type") == "training"]
    lines = [f"Run {summary.get('run_id')} {verdict.outcome(summary)}: {summary.get('task')} fine-tune of "
             f"{summary.get('base_model')}."]
    rows = metric_rows(summary.get("metrics") or {})
    lines.append("")
    if rows:
        lines += _table([("metric", "value", "trivial baseline"), *rows])
    else:
        lines.append("  metrics: none reported (check the metric definitions and the training log)")
    if summary.get("verdict"):
        lines.append(f"  verdict: {summary['verdict']['text']}")
    lines += [straggler_line(s) for s in summary.get("stragglers") or []]
    lines += ["", *coverage.coverage_lines(summary.get("data_coverage"))]
    lines.append("")
    price = cost.get("cost_usd")
    final = training_jobs[-1] if training_jobs else {}
    facts = [
        ("training time", f"{duration(final.get('training_seconds'))} on {final.get('instance_count')} x "
                          f"{final.get('instance_type')} (final job)" if final else "-"),
        ("billable", f"{duration(cost.get('billable_instance_seconds'))} instance time over all jobs "
                     f"({duration(cost.get('training_instance_seconds'))} before the spot discount)"),
        ("cost", f"${price:.2f} at on-demand list prices" if price is not None and price >= 0.01 else
                 f"${price:.4f} at on-demand list prices" if price is not None else
                 "unknown (no instance_prices for every instance type)"),
        ("spot saving", f"{cost.get('spot_saving', 0):.0%} on the final job, {cost.get('run_spot_saving', 0):.0%} "
                        "over the run" if any(j.get("spot") for j in jobs) else "none (on-demand)"),
        # the README's words: a SageMaker job per pipeline attempt entry; an attempt is each start of a job's
        # instances (a managed-spot job restarted after an interruption has several)
        ("jobs", f"{len(attempts)} SageMaker job{'s' if len(attempts) != 1 else ''}, "
                 f"{starts} attempt{'s' if starts != 1 else ''} (starts of their instances)"),
    ]
    lines += _table([(name, value) for name, value in facts])
    lines += [f"    {attempt_line(a)}" for a in attempts]
    lines += _table([("model", str(summary.get("model_uri"))),
                     ("model package", f"{summary.get('model_package_arn')} (PendingManualApproval)")])
    return lines
