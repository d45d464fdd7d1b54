"""The run report, written for every run, failed ones too: `report.md` (the same summary the console shows,
the loss curve as `loss.png` or a sentence saying there were too few points, one stacked goodput bar per training
attempt as `goodput.png`, the states visited) and
`run.json` (everything machine-readable: execution status, error and cause, the jobs' Describe responses,
host log paths, the notifications received)."""

from __future__ import annotations

import json
from pathlib import Path

from local_mode.console import failure_lines, success_lines
from local_mode.goodput_chart import goodput_section
from local_mode.session import RunOutcome

MIN_CURVE_POINTS = 3


def _loss_curve(folder: Path, outcome: RunOutcome) -> list[str]:
    points = outcome.losses
    if len(points) < MIN_CURVE_POINTS:
        return [f"Too few logged loss points for a curve ({len(points)}; at least {MIN_CURVE_POINTS} needed): the "
                "training code logs the loss every `logging_steps` steps; lower it or train for more steps."]
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    steps, losses = zip(*points, strict=True)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps, losses, marker="o", markersize=3)
    ax.set_xlabel("global step")
    ax.set_ylabel("training loss")
    ax.set_title(f"{outcome.run_id or 'run'}: training loss")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(folder / "loss.png", dpi=100)
    plt.close(fig)
    return ["![training loss](loss.png)", "", f"{len(points)} points, loss {losses[0]:.4g} at step {steps[0]} -> "
            f"{losses[-1]:.4g} at step {steps[-1]}."]


def write_report(folder: Path, outcome: RunOutcome, model_dir: Path | None = None,
                 local: list[tuple[str, str]] | None = None,
                 sections: list[tuple[str, list[str]]] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    ok = outcome.status == "SUCCEEDED"
    local = list(local or [])
    summary = success_lines(outcome, local) if ok else failure_lines(outcome)
    md = [f"# Run {outcome.run_id}: {outcome.status}", "", "```text", *summary, "```", "", "## Training loss", "",
          *_loss_curve(folder, outcome), "", "## Goodput", "",
          *goodput_section(folder, (outcome.output.get("result") or {}).get("goodput") if ok else None), "",
          "## States visited", "",
          " -> ".join(dict.fromkeys(outcome.states)) or "(none)", ""]
    for title, lines in sections or []:
        md += [f"## {title}", "", *[f"- {line}" for line in lines], ""]
    (folder / "report.md").write_text("\n".join(md))
    record = {
        "run_id": outcome.run_id, "status": outcome.status, "seconds": round(outcome.seconds, 1),
        "execution_arn": outcome.execution_arn, "error": outcome.error, "cause": outcome.cause,
        "failed_state": outcome.failed_state, "states": outcome.states, "losses": outcome.losses,
        "result": outcome.output.get("result"), "jobs": outcome.jobs,
        "host_logs": {k: [str(p) for p in v] for k, v in outcome.host_logs.items()},
        "notifications": outcome.notifications, "model_dir": str(model_dir) if model_dir else None,
    }
    (folder / "run.json").write_text(json.dumps(record, indent=1, default=str))
    return folder / "report.md"
