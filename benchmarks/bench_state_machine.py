"""State transitions, Lambda calls and their cost per hour of waiting on a job (issue: pipelines).

Runs the synthesized fine-tune state machine in moto's Step Functions interpreter with a training job that
stays InProgress for N polls, counts the transitions the execution history shows per poll (measured, not
assumed), and prints the hourly figures for several poll intervals against the baseline (a 60 s poll).

    python benchmarks/bench_state_machine.py
"""

from __future__ import annotations

import copy
import importlib.util
import os
import sys
import tempfile
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")
for var in ("AWS_PROFILE", "AWS_SESSION_TOKEN"):
    os.environ.pop(var, None)
os.environ.update(AWS_ACCESS_KEY_ID="testing", AWS_SECRET_ACCESS_KEY="testing", AWS_DEFAULT_REGION="us-east-1")

PRICE_PER_TRANSITION = 0.025 / 1000  # Step Functions Standard, USD
PRICE_PER_LAMBDA_CALL = 0.20 / 1_000_000 + 0.0000166667 * 0.256 * 0.3  # request + 256 MB x ~300 ms
POLLS = (10, 30)


def _pipeline_harness() -> ModuleType:
    """The integration tests' pipeline harness (moto's Step Functions + a scripted SageMaker), loaded from its file:
    the tests are not an installed package."""
    spec = importlib.util.spec_from_file_location("pipeline_harness", REPO / "tests/testkit/pipeline_harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


def measure() -> float:
    from moto import mock_aws

    harness = _pipeline_harness()
    COMPLETED, RUNNING, Pipeline, ScriptedSageMaker = (  # noqa: N806
        harness.COMPLETED, harness.RUNNING, harness.Pipeline, harness.ScriptedSageMaker)

    from stacks.app_builder import build_app, cdk_json_context

    outdir = Path(tempfile.mkdtemp(prefix="bench-sfn-"))
    build_app(context=copy.deepcopy(cdk_json_context()), env_name="dev", outdir=str(outdir)).app.synth()
    account = cdk_json_context()["environments"]["dev"]["account"]
    os.environ["MOTO_ACCOUNT_ID"] = account
    counts = {}
    with mock_aws(config={"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}):
        p = Pipeline(outdir)
        for prefix in ("datasets/t/train/", "base-models/m/"):
            p.put_dataset(prefix, 2)
        spec = {"version": 1, "name": "bench", "task": "text-classification",
                "model": f"s3://{p.dep.data_bucket}/base-models/m/",
                "data": {"train": {"s3": "datasets/t/train/"}},
                "compute": {"instance_type": "ml.g5.2xlarge", "instance_count": 1}}
        for polls in POLLS:
            with ScriptedSageMaker(attempts=[[RUNNING] * polls + [COMPLETED]]).installed():
                arn = p.start(spec, name=f"bench-{polls}")
                p.wait(arn, timeout=600)
            events = p.history(arn)
            counts[polls] = sum(1 for e in events if e["type"].endswith("StateEntered"))
        p.emulator.close()
    # Two runs that differ only in the number of polls: the difference is the cost of waiting.
    (a, b) = POLLS
    return (counts[b] - counts[a]) / (b - a)


def main() -> None:
    per_poll = measure()
    lambda_calls_per_poll = 1  # CheckJob
    print(f"measured: {per_poll:.1f} state transitions and {lambda_calls_per_poll} Lambda call per poll "
          "(Wait -> CheckTraining -> TrainingStatus)")
    print(f"{'poll (s)':>8} {'transitions/h':>14} {'Lambda calls/h':>15} {'USD/h':>9} {'ratio to 60 s':>14} "
          f"{'worst-case detection delay (s)':>31}")
    def usd_per_hour(poll: int) -> float:
        return 3600 / poll * (per_poll * PRICE_PER_TRANSITION + lambda_calls_per_poll * PRICE_PER_LAMBDA_CALL)

    base = usd_per_hour(60)
    for poll in (15, 30, 60, 120, 300):
        per_hour = 3600 / poll
        usd = usd_per_hour(poll)
        print(f"{poll:>8} {per_hour * per_poll:>14.0f} {per_hour:>15.0f} {usd:>9.5f} {usd / base:>13.2f}x {poll:>31}")
    print(f"baseline (60 s poll): {base:.5f} USD per hour of training; one ml.g5.2xlarge hour costs ~1.21 USD "
          f"on demand, so waiting costs {base / 1.212 * 100:.3f}% of the GPU it watches")


if __name__ == "__main__":
    main()
