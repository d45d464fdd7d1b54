"""A small run report: the loss curve as a PNG and a Markdown summary beside it."""

from __future__ import annotations

import json
from pathlib import Path

from local_mode.session import RunOutcome


def write_report(folder: Path, outcome: RunOutcome, model_dir: Path | None = None) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    folder.mkdir(parents=True, exist_ok=True)
    result = outcome.output.get("result", {})
    png = folder / "loss.png"
    fig, ax = plt.subplots(figsize=(6, 3.5))
    if outcome.losses:
        steps, losses = zip(*outcome.losses, strict=True)
        ax.plot(steps, losses, marker="o", markersize=3)
    ax.set_xlabel("global step")
    ax.set_ylabel("training loss")
    ax.set_title(f"{result.get('run_id', 'run')}: training loss")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png, dpi=100)
    plt.close(fig)
    md = folder / "report.md"
    md.write_text("\n".join([
        f"# Run {result.get('run_id')}: {outcome.status}",
        "",
        "![loss](loss.png)",
        "",
        f"- model: `{result.get('model_uri')}`" + (f" (local copy `{model_dir}`)" if model_dir else ""),
        f"- model package: `{result.get('model_package_arn')}`",
        f"- states visited: {' -> '.join(dict.fromkeys(outcome.states))}",
        "",
        "## Metrics",
        "```json",
        json.dumps(result.get("metrics", {}), indent=1, sort_keys=True),
        "```",
        "## Cost and spot saving (simulated)",
        "```json",
        json.dumps(result.get("cost", {}), indent=1, sort_keys=True),
        "```",
    ]) + "\n")
    return md
