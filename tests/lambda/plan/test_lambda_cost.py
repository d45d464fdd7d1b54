"""Worst-case cost over the whole fallback chain, from instance_prices, read from the built requests."""

from __future__ import annotations

from hfsm_lambda.plan import cost
from hfsm_lambda.plan.job_requests import build_requests
from hfsm_lambda.runs.prepare import prepare_run


def _spec(**extra):
    return {"version": 1, "name": "qa", "task": "question-answering", "model": "bert-base-uncased",
            "data": {"train": {"s3": "datasets/a/"}}, **extra}


def test_every_attempt_and_tokenizer_job_at_its_max_runtime(settings):
    settings = settings.__class__(**{**settings.__dict__, "instance_prices": {
        "ml.g5.2xlarge": 1.5, "ml.g6.2xlarge": 1.2, "ml.c5.2xlarge": 0.4}})
    spec = _spec(compute={"instance_type": "ml.g5.2xlarge", "instance_count": 2}, max_runtime_seconds=7200,
                 spot={"enabled": True, "max_wait_seconds": 14400},
                 fallback={"max_attempts": 3, "options": [{"instance_type": "ml.g6.2xlarge"}, {"spot": False}]},
                 tokenizer={"type": "bpe", "instance_type": "ml.c5.2xlarge", "instance_count": 2,
                            "max_runtime_seconds": 3600})
    run = prepare_run(spec, settings)
    requests = build_requests(run, settings)
    worst = cost.worst_case_cost(run, requests, settings)
    # one item per request, in the requests' order (build_requests: the attempts, then the tokenizer jobs)
    assert [i["kind"] for i in worst["items"]] == ["training attempt 0", "training attempt 1", "training attempt 2",
                                                   "tokenizer map", "tokenizer reduce"]
    assert [i["job"] for i in worst["items"][:3]] == [a.job_name for a in run.attempts]
    # option 2 only switches spot off: attempt 2 runs the spec's ml.g5.2xlarge on demand
    assert [i["instance_type"] for i in worst["items"][:3]] == ["ml.g5.2xlarge", "ml.g6.2xlarge", "ml.g5.2xlarge"]
    assert [i["spot"] for i in worst["items"]] == [True, True, False, False, False]
    assert [i["instance_count"] for i in worst["items"]] == [2, 2, 2, 2, 1]
    # map 2 x 1 h x 0.4 + reduce 1 h x 0.4 + 2 instances x 2 h x (1.5 + 1.2 + 1.5), plus every instance's volume
    # (training 100 GB, tokenizer 30 GB) for those hours at $0.14 per GB-month of 730 h
    storage = [round(gb * n * 0.14 * hours / 730, 2) for gb, n, hours in ((100, 2, 2),) * 3 + ((30, 2, 1), (30, 1, 1))]
    assert [i["storage_usd"] for i in worst["items"]] == storage == [0.08, 0.08, 0.08, 0.01, 0.01]
    assert worst["total_usd"] == round(0.8 + 0.4 + 4 * 1.5 + 4 * 1.2 + 4 * 1.5 + sum(storage), 2) == 18.26
    assert worst["instance_hours"] == 2 + 1 + 3 * 4 and worst["missing_prices"] == []


def test_missing_price_makes_the_total_unknown(settings):
    settings = settings.__class__(**{**settings.__dict__, "instance_prices": {}})
    run = prepare_run(_spec(), settings)
    worst = cost.worst_case_cost(run, build_requests(run, settings), settings)
    assert worst["total_usd"] is None and worst["missing_prices"] == [run.spec.compute.instance_type]


def test_the_storage_volume_counts_in_the_worst_case(settings):
    """Issue 23: the worst case ignored the EBS volume, which a spec may set to 16,384 GB per instance. At $0.14 per
    GB-month (SageMaker's ML storage list price, us-east-1) that is $3.14 an instance-hour, more than a g5.2xlarge."""
    settings = settings.__class__(**{**settings.__dict__, "instance_prices": {"ml.g5.2xlarge": 1.515}})
    spec = _spec(compute={"instance_type": "ml.g5.2xlarge", "instance_count": 2, "volume_size_gb": 16384},
                 max_runtime_seconds=10 * 3600)
    run = prepare_run(spec, settings)
    (item,) = cost.worst_case_cost(run, build_requests(run, settings), settings)["items"]
    storage = round(16384 * 2 * 0.14 * 10 / 730, 2)
    assert item["volume_gb"] == 16384 and item["storage_usd"] == storage == 62.84
    assert item["worst_case_usd"] == round(2 * 10 * 1.515 + storage, 2) == 93.14
    assert "+ 16,384 GB storage each ($62.84) = $93.14" in cost.describe(item)
