"""`runctl compare RUN_A RUN_B [--local]`: two runs side by side: spec differences, final metrics, goodput, cost,
verdict.

From MLflow when tracking is on (each pipeline run is one MLflow run, found by its pipeline run tag in any
experiment: lambda/tracking/record.py): the resolved spec as `spec.*` params, the final metrics, the goodput ledger
and cost as metrics, the verdict as a tag. Otherwise from the runs' summaries (contract/summary.py), which hold no
spec: the spec side is what the summary records (the last attempt's instance type, count and capacity, and how many
times a job started).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from contract import tracking
from hfsm_lambda.tracking import record
from hfsm_lambda.tracking.rest import MlflowRest, MlflowRestError
from runctl import core


@dataclass
class RunView:
    """What compare shows of one run."""

    run_id: str
    source: str  # "mlflow <uri>" or "summary"
    spec: dict[str, str] = field(default_factory=dict)
    metrics: dict[str, float] = field(default_factory=dict)
    goodput: float | None = None
    cost_usd: float | None = None
    verdict: str = ""
    url: str = ""


def from_mlflow(rest: MlflowRest, run_id: str, browse: str = "") -> RunView | None:
    """The pipeline run's MLflow run in any experiment, or None when the server has none."""
    experiments = rest.call("POST", "experiments/search", {"max_results": 1000}).get("experiments") or []
    ids = [e["experiment_id"] for e in experiments]
    if not ids:
        return None
    found = rest.call("POST", "runs/search", {"experiment_ids": ids, "max_results": 1,
                                              "filter": f"tags.`{tracking.PIPELINE_RUN_TAG}` = '{run_id}'"})
    runs = found.get("runs") or []
    if not runs:
        return None
    run = runs[0]
    data = run.get("data") or {}
    params = {p["key"]: p["value"] for p in data.get("params") or []}
    metrics = {m["key"]: float(m["value"]) for m in data.get("metrics") or []}
    tags = {t["key"]: t["value"] for t in data.get("tags") or []}
    final = {k.removeprefix("final."): v for k, v in metrics.items() if k.startswith("final.")}
    if not final:  # Finish has not logged (a run still going, or failed): the job's own last values
        final = {k: v for k, v in metrics.items() if "." not in k}
    info = run["info"]
    return RunView(run_id=run_id, source=f"mlflow {rest.uri}",
                   spec={k.removeprefix("spec."): v for k, v in params.items() if k.startswith("spec.")},
                   metrics=final, goodput=metrics.get("goodput.ratio"), cost_usd=metrics.get("cost.cost_usd"),
                   verdict=tags.get("verdict", ""),
                   url=record.run_url(browse or rest.base, info["experiment_id"], info["run_id"]))


def from_summary(run_id: str, result: Mapping[str, Any] | None) -> RunView:
    """From a run's status `result` (its summary); a run without one (not finished) has only its id."""
    result = result or {}
    goodput = result.get("goodput") or {}
    spec: dict[str, str] = {}
    attempts = goodput.get("attempts") or []
    if attempts:  # the last attempt's compute, and how many starts the run took (restarts after interruptions too)
        last = attempts[-1]
        spec = {"instance_type": str(last.get("instance_type")), "instance_count": str(last.get("instance_count")),
                "spot": str(last.get("spot")).lower(), "job starts": str(len(attempts))}
    metrics = {k: float(v) for k, v in (result.get("metrics") or {}).items()
               if isinstance(v, int | float) and not isinstance(v, bool)}
    cost = (result.get("cost") or {}).get("cost_usd")
    return RunView(run_id=run_id, source="summary", spec=spec, metrics=metrics, goodput=goodput.get("ratio"),
                   cost_usd=cost if isinstance(cost, int | float) else None,
                   verdict=str((result.get("verdict") or {}).get("verdict") or ""))


def view(run_id: str, rest: MlflowRest | None, summary: Any, browse: str = "") -> RunView:
    """From MLflow when there is a server and the run is on it, else from the summary (`summary()` gives it)."""
    if rest is not None:
        try:
            found = from_mlflow(rest, run_id, browse)
        except MlflowRestError as err:
            raise core.RunctlError(f"the tracking server {rest.uri} did not answer ({err}); leave out "
                                   "--tracking-uri to compare the runs' summaries") from None
        if found is not None:
            return found
    return from_summary(run_id, summary())


def _number(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _rows(a: Mapping[str, Any], b: Mapping[str, Any], fmt: Any) -> list[tuple[str, str, str]]:
    return [(key, fmt(a.get(key)), fmt(b.get(key))) for key in sorted(set(a) | set(b))]


def compare_lines(a: RunView, b: RunView) -> list[str]:
    differ = [(k, x, y) for k, x, y in _rows(a.spec, b.spec, lambda v: "-" if v is None else str(v)) if x != y]
    same = len(set(a.spec) & set(b.spec)) - len([k for k, _, _ in differ if k in a.spec and k in b.spec])
    sections: list[tuple[str, list[tuple[str, str, str]]]] = [
        ("spec (differences)", differ),
        ("final metrics", _rows(a.metrics, b.metrics, _number)),
        ("run", [("goodput", _number(a.goodput, 3), _number(b.goodput, 3)),
                 ("cost (USD)", _number(a.cost_usd, 4), _number(b.cost_usd, 4)),
                 ("verdict", a.verdict or "-", b.verdict or "-")]),
    ]
    width = max([len(k) for _, rows in sections for k, _, _ in rows] + [12])
    col = max([len(x) for _, rows in sections for _, x, _ in rows] + [len("A"), 12])
    lines = [f"A: {a.run_id} ({a.source})", f"B: {b.run_id} ({b.source})"]
    lines += [f"   {label}: {v.url}" for label, v in (("A", a), ("B", b)) if v.url]
    for title, rows in sections:
        lines += ["", f"{title}:", f"  {'':<{width}}  {'A':<{col}}  B"]
        lines += [f"  {k:<{width}}  {x:<{col}}  {y}" for k, x, y in rows] or ["  (none)"]
        if title.startswith("spec"):
            lines.append(f"  ({same} spec field(s) the same)" if (a.spec or b.spec) else
                         "  (no spec recorded: compare from MLflow to see spec differences)")
    return lines


def as_json(a: RunView, b: RunView) -> dict[str, Any]:
    return {"a": a.__dict__, "b": b.__dict__}
