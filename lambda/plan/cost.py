"""Worst-case cost of a planned run, before anything starts, read from the requests Prepare built. Pure.

Every job can run until its MaxRuntimeInSeconds, and every attempt of the fallback chain can be used (an
attempt that ends with MaxWaitTimeExceeded or a capacity error has billed at most its runtime), so the worst
case is the sum over every built request (`job_requests.build_requests`: each training attempt, the tokenizer
jobs) of MaxRuntimeInSeconds x instance count x (on-demand price per hour (`instance_prices`; spot is billed at
most that) + the instance's storage volume at `STORAGE_USD_PER_GB_MONTH`). Waiting for spot capacity is not billed; the StoppingCondition bounds the complete job, SageMaker's
own InternalServerError retries included: "When RetryStrategy is specified in the job request,
MaxRuntimeInSeconds specifies the maximum time for all of the attempts in total, not each individual attempt"
(StoppingCondition, SageMaker API reference). The one worst-case figure of the project: Prepare's spend limit
(spend.cost_problems in preflight.check), the start handlers' per-job check (request_guard) and `runctl plan`.
"""

from __future__ import annotations

from typing import Any

from hfsm_lambda.plan.run import Run
from hfsm_lambda.settings import Settings

# Every instance also bills its ML storage volume (VolumeSizeInGB, up to 16,384 GB) while it runs: SageMaker's
# pricing page (https://aws.amazon.com/sagemaker/pricing/, "ML storage", General Purpose SSD for training and
# processing instances) lists $0.14 per GB-month in us-east-1, the region of both environments here. Not read
# from an account (there is none offline); a region with another list price changes this figure. A GB-month is
# 730 hours (AWS's monthly-pricing convention).
STORAGE_USD_PER_GB_MONTH = 0.14
SECONDS_PER_MONTH = 730 * 3600


def _kind(run: Run, operation: str, name: str) -> str:
    if operation == "CreateTrainingJob":
        for attempt in run.attempts:
            if attempt.job_name == name:
                return f"training attempt {attempt.attempt}"
        return "training"
    names = run.job_names
    return {names.tokenizer_map: "tokenizer map", names.tokenizer_reduce: "tokenizer reduce"}.get(
        name, "processing")


def request_cost(operation: str, request: dict[str, Any], prices: dict[str, float]) -> dict[str, Any]:
    """The worst case of one CreateTrainingJob / CreateProcessingJob request (no run needed: the start handlers
    price the request they are about to send)."""
    if operation == "CreateTrainingJob":
        name, resources = request["TrainingJobName"], request["ResourceConfig"]
        spot = bool(request.get("EnableManagedSpotTraining"))
    else:
        name, resources = request["ProcessingJobName"], request["ProcessingResources"]["ClusterConfig"]
        spot = False
    instance_type, count = resources["InstanceType"], int(resources["InstanceCount"])
    seconds = int(request["StoppingCondition"]["MaxRuntimeInSeconds"])
    volume = int(resources.get("VolumeSizeInGB") or 0)
    storage = round(volume * count * STORAGE_USD_PER_GB_MONTH * seconds / SECONDS_PER_MONTH, 2)
    price = prices.get(instance_type)
    usd = None if price is None else round(seconds / 3600 * count * price + storage, 2)
    return {"job": name, "instance_type": instance_type, "instance_count": count, "max_seconds": seconds,
            "spot": spot, "price_per_hour": price, "volume_gb": volume, "storage_usd": storage,
            "worst_case_usd": usd}


def request_item(run: Run, operation: str, request: dict[str, Any],
                 prices: dict[str, float]) -> dict[str, Any]:
    """`request_cost` with the job's kind in the run (training attempt k, tokenizer map/reduce)."""
    item = request_cost(operation, request, prices)
    return {"job": item["job"], "kind": _kind(run, operation, item["job"]), **item}


def describe(item: dict[str, Any]) -> str:
    """One line for a refusal: job, instances, price, hours, worst case."""
    price = "no price" if item["price_per_hour"] is None else f"${item['price_per_hour']:g}/h"
    usd = "" if item["worst_case_usd"] is None else f" = ${item['worst_case_usd']:,.2f}"
    storage = f" + {item['volume_gb']:,} GB storage each (${item['storage_usd']:,.2f})" if item.get("volume_gb") else ""
    return (f"{item['job']}: {item['instance_count']} x {item['instance_type']} at {price} x "
            f"{item['max_seconds'] / 3600:g} h{storage}{usd}")


def worst_case_cost(run: Run, requests: list[tuple[str, dict[str, Any]]],
                    settings: Settings) -> dict[str, Any]:
    """{items: [one per request, in order], total_usd: float | None, missing_prices: [...], instance_hours}."""
    items = [request_item(run, operation, request, settings.instance_prices) for operation, request in requests]
    missing = sorted({i["instance_type"] for i in items if i["price_per_hour"] is None})
    total = None if missing else round(sum(i["worst_case_usd"] for i in items), 2)
    hours = round(sum(i["max_seconds"] * i["instance_count"] for i in items) / 3600, 2)
    return {"items": items, "total_usd": total, "missing_prices": missing, "instance_hours": hours}
