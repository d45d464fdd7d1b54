"""Worst-case cost of a planned run, before anything starts. Pure.

Every job can run until its MaxRuntimeInSeconds, and every attempt of the fallback chain can be used (an
attempt that ends with MaxWaitTimeExceeded or a capacity error has billed at most its runtime), so the worst
case is the sum over the tokenizer jobs and all `max_attempts` training attempts of
max runtime x instance count x on-demand price per hour (`instance_prices`; spot is billed at most that).
Waiting for spot capacity is not billed. Used by `runctl plan`; named for what it computes so that other
checks (spend limits) can use the same figure.
"""

from __future__ import annotations

from typing import Any

import planning
from settings import Settings


def _item(job: str, kind: str, instance_type: str, count: int, seconds: int, spot: bool,
          prices: dict[str, float]) -> dict[str, Any]:
    price = prices.get(instance_type)
    usd = None if price is None else round(seconds / 3600 * count * price, 2)
    return {"job": job, "kind": kind, "instance_type": instance_type, "instance_count": count,
            "max_seconds": seconds, "spot": spot, "price_per_hour": price, "worst_case_usd": usd}


def worst_case_cost(run: dict[str, Any], settings: Settings) -> dict[str, Any]:
    """{items: [...one per job...], total_usd: float | None, missing_prices: [...], instance_hours: float}."""
    spec, prices = run["spec"], settings.instance_prices
    items = []
    tok = spec.get("tokenizer") if run.get("tokenizer_stage") else None
    if tok:
        items.append(_item(run["job_names"]["tokenizer_map"], "tokenizer map", tok["instance_type"],
                           tok["instance_count"], tok["max_runtime_seconds"], False, prices))
        items.append(_item(run["job_names"]["tokenizer_reduce"], "tokenizer reduce", tok["instance_type"], 1,
                           tok["max_runtime_seconds"], False, prices))
    for attempt in range(run["max_attempts"]):
        config = planning.attempt_config(spec, attempt)
        names = run["job_names"]["train"]
        items.append(_item(names[attempt] if attempt < len(names) else f"attempt {attempt}",
                           f"training attempt {attempt}", config["instance_type"], config["instance_count"],
                           spec["max_runtime_seconds"], config["spot"], prices))
    missing = sorted({i["instance_type"] for i in items if i["price_per_hour"] is None})
    total = None if missing else round(sum(i["worst_case_usd"] for i in items), 2)
    hours = round(sum(i["max_seconds"] * i["instance_count"] for i in items) / 3600, 2)
    return {"items": items, "total_usd": total, "missing_prices": missing, "instance_hours": hours}
