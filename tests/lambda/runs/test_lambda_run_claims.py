"""Issue 23: a run id cannot be claimed twice (lambda/runs/claims.py).

Before, a caller could choose the run id (the execution's name, or `run_id` in the input) and only training job
names were checked for uniqueness, so a second execution could plan a live run's id during that run's tokenizer
stage (its training jobs did not exist yet), write into its prefixes and stop its jobs when it failed."""

from __future__ import annotations

import json
from typing import Any

import pytest
from testkit.lambdas import ACCOUNT, REGION, SETTINGS

from hfsm_lambda import aws, handlers
from hfsm_lambda.errors import PreflightError

SPEC = {"version": 1, "name": "squad", "task": "question-answering", "model": "distilbert/distilbert-base-uncased",
        "data": {"train": {"s3": "datasets/squad/train/"}},
        "tokenizer": {"type": "bpe", "instance_type": "ml.c5.2xlarge"}}
RUN_ID = "squad-20250601120000-0123456789abcdef"


def execution(machine: str, name: str = RUN_ID) -> dict[str, Any]:
    return {"Id": f"arn:aws:states:{REGION}:{ACCOUNT}:execution:{machine}:{name}", "Name": name,
            "StartTime": "2025-06-01T12:00:00.000Z", "Input": {"spec": SPEC}}


@pytest.fixture
def data(aws_account, put_data):
    put_data(f"s3://{SETTINGS['data_bucket']}/datasets/squad/train/", 2)
    return aws_account


def test_a_second_execution_cannot_claim_a_live_run_s_id(data, context) -> None:
    first = handlers.prepare({"execution": execution("hfsm-dev-fine-tune")}, context)
    assert first["run"]["run_id"] == RUN_ID  # runctl names the execution after the run id
    # The same name on the other state machine (execution names are unique per machine only), while the first
    # run is in its tokenizer stage: no training job of it exists yet for pre-flight to find.
    with pytest.raises(PreflightError) as info:
        handlers.prepare({"execution": execution("hfsm-dev-tokenizer")}, context)
    assert f"run_id: {RUN_ID} is already claimed by execution {execution('hfsm-dev-fine-tune')['Id']}" in str(
        info.value)
    # ...nor by naming it in the input of an execution with another name
    with pytest.raises(PreflightError, match="already claimed"):
        handlers.prepare({"spec": SPEC, "run_id": RUN_ID,
                          "execution": execution("hfsm-dev-fine-tune", "another-name")}, context)
    claim = aws.client("s3").get_object(Bucket=SETTINGS["artifacts_bucket"], Key=f"claims/{RUN_ID}.json")
    assert json.loads(claim["Body"].read())["execution_arn"] == execution("hfsm-dev-fine-tune")["Id"]
    assert claim["ServerSideEncryption"] == "aws:kms"


def test_a_retried_prepare_of_the_same_execution_keeps_its_claim(data, context) -> None:
    event = {"execution": execution("hfsm-dev-fine-tune")}
    assert handlers.prepare(event, context)["run"]["run_id"] == RUN_ID
    assert handlers.prepare(event, context)["run"]["run_id"] == RUN_ID  # Lambda retried: same execution, same run
