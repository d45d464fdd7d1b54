"""The run report, written for every run, failed ones too: `report.md` (the same summary the console shows, the
loss curve as `loss.png` and the evaluation curve as `eval.png` where there are points for them, one stacked goodput
bar per training attempt as `goodput.png`, links to every host's log, the states visited) and `run.json` (everything
machine-readable: execution status, error and cause, the jobs' Describe responses, host log paths, the
notifications received).

Plots do not exaggerate: the y-axis starts at 0 and the caption gives the relative change, so a loss that moved
0.3% looks flat; the evaluation curve has the task's trivial baseline as a dashed line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from hfsm_lambda.runs import verdict
from local_mode.console import failure_lines, success_lines
from local_mode.goodput_chart import goodput_section
from local_mode.session import RunOutcome

MIN_CURVE_POINTS = 3


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _change(first: float, last: float) -> str:
    return f"{(last - first) / abs(first):+.1%}" if first else "n/a"


def _loss_curve(folder: Path, outcome: RunOutcome) -> list[str]:
    points = outcome.losses
    if not outcome.jobs:
        return [f"No job ran: the run ended in {outcome.failed_state or 'its first state'} before starting one."]
    if len(points) < MIN_CURVE_POINTS:
        return [f"Too few logged loss points for a curve ({len(points)}; at least {MIN_CURVE_POINTS} needed): the "
                "training code logs the loss every `logging_steps` steps; lower it or train for more steps."]
    plt = _pyplot()
    steps, losses = zip(*points, strict=True)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps, losses, marker="o", markersize=3)
    ax.set_ylim(bottom=0, top=max(losses) * 1.1)  # from 0: a small change looks small
    ax.set_xlim(left=0)
    ax.set_xlabel("global step")
    ax.set_ylabel("training loss")
    ax.set_title(f"training loss: {losses[0]:.4g} -> {losses[-1]:.4g} ({_change(losses[0], losses[-1])})")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(folder / "loss.png", dpi=100)
    plt.close(fig)
    return ["![training loss](loss.png)", "", f"{len(points)} points, loss {losses[0]:.4g} at step {steps[0]} -> "
            f"{losses[-1]:.4g} at step {steps[-1]} ({_change(losses[0], losses[-1])}; the y-axis starts at 0)."]


def _headline(outcome: RunOutcome) -> tuple[str | None, float | None]:
    """The metric the verdict judges (else eval_loss) and its trivial baseline."""
    result = outcome.summary or {}
    metrics = result.get("metrics") or {}
    metric = (result.get("verdict") or {}).get("metric")
    names = {name for _, name, _ in outcome.evals}
    if metric not in names:
        metric = "eval_loss" if "eval_loss" in names else next(iter(sorted(names)), None)
    baseline = metrics.get(f"eval_baseline_{metric.removeprefix('eval_')}") if metric else None
    return metric, baseline if isinstance(baseline, int | float) else None


def _eval_curve(folder: Path, outcome: RunOutcome) -> list[str]:
    metric, baseline = _headline(outcome)
    points = sorted({(step, value) for step, name, value in outcome.evals if name == metric})
    if not points:
        return ["No evaluation ran (no validation data, or the run ended before its evaluation)."]
    plt = _pyplot()
    steps, values = zip(*points, strict=True)
    fig, ax = plt.subplots(figsize=(6, 3.5))
    ax.plot(steps, values, marker="o", markersize=4, label=metric)
    top = max(values)
    if baseline is not None:
        ax.axhline(baseline, linestyle="--", color="grey", label=f"trivial baseline {baseline:.4g}")
        top = max(top, baseline)
        ax.legend(loc="lower right", fontsize=8)
    ax.set_ylim(bottom=0, top=top * 1.1 or 1)
    ax.set_xlim(left=0, right=max(steps) * 1.05 or 1)
    ax.set_xlabel("global step")
    ax.set_ylabel(str(metric))
    ax.set_title(f"evaluation: {metric}")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(folder / "eval.png", dpi=100)
    plt.close(fig)
    against = f" (trivial baseline {baseline:.4g})" if baseline is not None else ""
    return ["![evaluation](eval.png)", "", f"{len(points)} evaluation(s); {metric} {values[-1]:.4g} at step "
            f"{steps[-1]}{against}; the y-axis starts at 0."]


def title(outcome: RunOutcome) -> str:
    """`# Run <run id>: <how it ended>`; a run that failed before it had a run id is named after its spec."""
    who = outcome.run_id or (f"{outcome.name} (no run id: it failed in {outcome.failed_state})" if outcome.name
                             else "(unnamed)")
    return f"# Run {who}: {state(outcome)}"


def state(outcome: RunOutcome) -> str:
    """The run's status with its verdict: 'SUCCEEDED, learned', 'SUCCEEDED, not judged: 20 steps', 'completed,
    but the model did not learn', 'FAILED'."""
    judged = (outcome.summary or {}).get("verdict") if outcome.status == "SUCCEEDED" else None
    if isinstance(judged, dict) and judged.get("verdict") == verdict.NOT_LEARNED:
        return verdict.NOT_LEARNED_PHRASE
    said = verdict.short(judged)
    return f"{outcome.status}, {said}" if said else outcome.status


def write_report(folder: Path, outcome: RunOutcome, model_dir: Path | None = None,
                 local: list[tuple[str, str]] | None = None,
                 sections: list[tuple[str, list[str]]] | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    ok = outcome.status == "SUCCEEDED"
    local = list(local or [])
    summary = success_lines(outcome, local) if ok else failure_lines(outcome)
    md = [title(outcome), "", "```text", *summary, "```", "", "## Training loss", "", *_loss_curve(folder, outcome),
          "", "## Goodput", "",
          *goodput_section(folder, (outcome.summary or {}).get("goodput") if ok else None), ""]
    if outcome.jobs:
        md += ["## Evaluation", "", *_eval_curve(folder, outcome), ""]
    logs = [f"- {job} {path.stem}: [{path}]({path.as_uri()})" for job, paths in outcome.host_logs.items()
            for path in paths if path.is_absolute()]
    if logs:
        md += ["## Host logs", "", *logs, ""]
    md += ["## States visited", "", " -> ".join(dict.fromkeys(outcome.states)) or "(none)", ""]
    for heading, lines in sections or []:
        md += [f"## {heading}", "", *[f"- {line}" for line in lines], ""]
    (folder / "report.md").write_text("\n".join(md))
    record = {
        "run_id": outcome.run_id, "name": outcome.name, "status": outcome.status,
        "seconds": round(outcome.seconds, 1), "started_at": outcome.started_at,
        "execution_arn": outcome.execution_arn, "error": outcome.error, "cause": outcome.cause,
        "failed_state": outcome.failed_state, "states": outcome.states, "losses": outcome.losses,
        "evals": outcome.evals, "result": outcome.summary, "jobs": outcome.jobs,
        "host_logs": {k: [str(p) for p in v] for k, v in outcome.host_logs.items()},
        "notifications": outcome.notifications, "model_dir": str(model_dir) if model_dir else None,
    }
    (folder / "run.json").write_text(json.dumps(record, indent=1, default=str))
    return folder / "report.md"
