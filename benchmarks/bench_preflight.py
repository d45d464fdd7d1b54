"""Prepare's data check: the time it adds to Prepare on a large channel, against Prepare without it, in one run.

A moto S3 channel of `--objects` JSON lines objects of `--object-mb` MB each (default 1,000 x 1 MB = 1 GB of
text-classification rows, ShardedByS3Key over 2 instances, plus a validation channel) is prepared with the
pipeline's own Prepare path (`runs.prepare_run` with an S3 client: parse, plan, requests, pre-flight incl.
storage), interleaved: with the data check, and with it switched off (the baseline). Prints the medians, the
added time (budget: < 2 s), the ratio, and the bytes the data check read (ranged GETs only).

    python benchmarks/bench_preflight.py [--objects 1000] [--object-mb 1] [--repeat 5]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from moto import mock_aws

from benchmarks.pipeline_settings import SETTINGS as BASE_SETTINGS
from hfsm_lambda import aws
from hfsm_lambda import settings as settings_module
from hfsm_lambda.data import preflight as data_preflight
from hfsm_lambda.runs import prepare as runs

os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")

# one allowed instance type: the data check is what is measured
SETTINGS = {**BASE_SETTINGS, "allowed_instance_types": ["ml.g5.2xlarge"]}
SPEC = {"version": 1, "name": "bench", "task": "text-classification", "model": "s3://hfsm-dev-data/base-models/m/",
        "data": {"train": {"s3": "datasets/big/train/", "distribution": "ShardedByS3Key"},
                 "validation": {"s3": "datasets/big/validation/"}},
        "compute": {"instance_type": "ml.g5.2xlarge", "instance_count": 2}, "spot": {"enabled": False},
        "hyperparameters": {"text_column": "text", "label_column": "label"}}


def object_body(megabytes: float) -> bytes:
    row = json.dumps({"id": "0", "text": "lorem ipsum dolor sit amet " * 20, "label": "pos"}) + "\n"
    return (row * max(1, int(megabytes * 1e6 / len(row)))).encode()


class CountingS3:
    """The S3 client, counting the bytes GetObject returned."""

    def __init__(self, s3) -> None:
        self._s3, self.bytes = s3, 0

    def __getattr__(self, name):
        return getattr(self._s3, name)

    def get_object(self, **kwargs):
        response = self._s3.get_object(**kwargs)
        body = response["Body"].read()
        self.bytes += len(body)
        response["Body"] = _Body(body)
        return response


class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data

    def read(self, amount: int | None = None) -> bytes:
        return self.data if amount is None else self.data[:amount]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--objects", type=int, default=1000)
    parser.add_argument("--object-mb", type=float, default=1.0)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    settings = settings_module.Settings.from_dict(SETTINGS)
    with mock_aws():
        aws.reset_clients()
        s3 = aws.client("s3")
        for bucket in ("hfsm-dev-data", "hfsm-dev-artifacts"):
            s3.create_bucket(Bucket=bucket)
        body = object_body(args.object_mb)
        began = time.perf_counter()
        for i in range(args.objects):
            s3.put_object(Bucket="hfsm-dev-data", Key=f"datasets/big/train/part-{i:05d}.jsonl", Body=body)
        s3.put_object(Bucket="hfsm-dev-data", Key="datasets/big/validation/part-0.jsonl", Body=body)
        s3.put_object(Bucket="hfsm-dev-data", Key="base-models/m/config.json", Body=b"{}")
        total = (args.objects + 1) * len(body)
        print(f"channel: {args.objects} objects x {len(body) / 1e6:.2f} MB = {total / 1e9:.2f} GB in moto "
              f"(uploaded in {time.perf_counter() - began:.0f} s)")
        original = data_preflight.problems
        timings: dict[str, list[float]] = {"with data check": [], "without (baseline)": []}
        read = 0
        for _ in range(args.repeat):
            for arm in timings:
                counting = CountingS3(s3)
                data_preflight.problems = original if arm == "with data check" else (lambda *a, **k: [])
                began = time.perf_counter()
                runs.prepare_run(SPEC, settings, s3=counting)
                timings[arm].append(time.perf_counter() - began)
                if arm == "with data check":
                    read = counting.bytes
        data_preflight.problems = original
    with_check, baseline = (statistics.median(v) for v in timings.values())
    for arm, values in timings.items():
        print(f"Prepare {arm:<20} median {statistics.median(values) * 1000:8.1f} ms "
              f"(min {min(values) * 1000:.1f}, max {max(values) * 1000:.1f}, {len(values)} runs)")
    print(f"added by the data check: {(with_check - baseline) * 1000:.1f} ms (budget 2000 ms); ratio "
          f"{with_check / baseline:.2f}x Prepare without it; read {read / 1e6:.2f} MB of {total / 1e9:.2f} GB "
          f"({read / total:.4%})")
    return 0 if with_check - baseline < 2.0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
