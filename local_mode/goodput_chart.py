"""The run report's goodput section: one stacked bar per training attempt (the ledger's parts, instance-seconds)
and a table of the same numbers. The ledger itself is the run summary's `goodput` (lambda/goodput/ledger.py, computed by
the Finish Lambda from the jobs' status transitions and logs); the summary above it in the report has its lines."""

from __future__ import annotations

from pathlib import Path
from typing import Any

# The ledger's parts in its order, each with a colour: productive green, waste warm, the rest grey.
COLOURS = {"downloading": "#9ecae1", "startup": "#6baed6", "productive": "#31a354", "replayed": "#e6550d",
           "evaluation": "#c7e9c0", "checkpointing": "#fdae6b", "uploading": "#bcbddc", "stalled": "#de2d26",
           "recovering": "#fc9272", "unaccounted": "#bdbdbd"}


def goodput_section(folder: Path, goodput: dict[str, Any] | None) -> list[str]:
    """Markdown for report.md; writes goodput.png into folder when there are attempts to draw."""
    if not isinstance(goodput, dict):
        return ["No goodput ledger: the run did not reach its summary (see the failure above)."]
    if goodput.get("error"):
        return [f"The goodput ledger could not be computed: {goodput['error']}"]
    attempts = goodput.get("attempts") or []
    if not attempts:
        return ["No training attempt was billed."]
    labels = [f"#{a['attempt']} {str(a['job_name']).rsplit('-', 1)[-1]} start {a['restart']}" for a in attempts]
    _draw_chart(folder / "goodput.png", goodput, attempts, labels)
    return ["![goodput per attempt](goodput.png)", "", "Instance-seconds per part:", "",
            *_table(attempts, labels)]


def _seconds(attempt: dict[str, Any], part: str) -> float:
    """The instance-seconds of one part of an attempt (0 when the ledger has none)."""
    return float((attempt.get("parts") or {}).get(part) or 0.0)


def _draw_chart(path: Path, goodput: dict[str, Any], attempts: list[dict[str, Any]], labels: list[str]) -> None:
    """One stacked bar per attempt, a segment per part any attempt has."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 1.0 + 0.55 * len(attempts)))
    left = [0.0] * len(attempts)
    for part, colour in COLOURS.items():
        values = [_seconds(a, part) for a in attempts]
        if not any(v > 0 for v in values):
            continue
        ax.barh(labels, values, left=left, color=colour, label=part, edgecolor="white", linewidth=0.5)
        left = [x + v for x, v in zip(left, values, strict=True)]
    ax.invert_yaxis()
    ax.set_xlabel("billed instance-seconds")
    ax.set_title(f"goodput {float(goodput.get('ratio') or 0):.1%} of {float(goodput['billed_seconds']):.0f} "
                 "billed instance-seconds")
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)


def _table(attempts: list[dict[str, Any]], labels: list[str]) -> list[str]:
    """The chart's numbers as a markdown table: a row per attempt, a column per part any attempt has."""
    shown = [p for p in COLOURS if any(_seconds(a, p) > 0 for a in attempts)]
    rows = ["| attempt | billed | goodput | " + " | ".join(shown) + " |", "|---" * (3 + len(shown)) + "|"]
    for label, a in zip(labels, attempts, strict=True):
        rows.append(f"| {label} | {float(a['billed_seconds']):.1f} | {float(a.get('ratio') or 0):.1%} | "
                    + " | ".join(f"{_seconds(a, p):.1f}" for p in shown) + " |")
    return rows
