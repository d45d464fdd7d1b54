"""What the training code refused leaves the run's checkpoint prefix before the next attempt downloads it
(lambda/runs/set_aside.py), against moto: moved (copied, then deleted), never anything else, bounded per call."""

from __future__ import annotations

import pytest
from testkit.lambdas import SETTINGS

from hfsm_lambda import aws, handlers
from hfsm_lambda.runs import set_aside

BUCKET = SETTINGS["artifacts_bucket"]
RUN = "squad-20261205-000000-abcd"
CKPT = f"s3://{BUCKET}/checkpoints/{RUN}/"
TARGET = set_aside.refused_uri(BUCKET, RUN)
DIGEST = "0123456789abcdef0123"
REFUSED = ["checkpoint-40.unverified-1/model.safetensors", "checkpoint-40.unverified-1/_complete.json",
           f"_tokenized/{DIGEST}.refused-1/train/data.arrow", f"_tokenized/{DIGEST}.algo-2.refused-3/_complete.json"]
KEPT = ["checkpoint-40/model.safetensors", "checkpoint-40/_complete.json", f"_tokenized/{DIGEST}/train/data.arrow",
        "checkpoint-40.unverified-x/notes.txt", "notes/checkpoint-40.unverified-1/x", "_progress.json",
        f"_tokenized/{DIGEST}.refused-1.txt", "user.refused-1/file"]


def keys(prefix: str) -> set[str]:
    found = aws.client("s3").list_objects_v2(Bucket=BUCKET, Prefix=prefix).get("Contents", [])
    return {o["Key"][len(prefix):] for o in found}


def put(names: list[str]) -> None:
    for name in names:
        aws.client("s3").put_object(Bucket=BUCKET, Key=f"checkpoints/{RUN}/{name}", Body=name.encode())


def test_refused_directories_are_moved_and_nothing_else(aws_account):
    put(REFUSED + KEPT)
    moved = set_aside.move_refused(aws.client("s3"), CKPT, TARGET, SETTINGS["kms_key_arn"])
    assert moved == {"directories": sorted({"checkpoint-40.unverified-1", f"_tokenized/{DIGEST}.refused-1",
                                            f"_tokenized/{DIGEST}.algo-2.refused-3"}),
                     "objects": 4, "bytes": sum(len(n) for n in REFUSED), "left": 0}
    assert keys(f"checkpoints/{RUN}/") == set(KEPT)
    assert keys(f"refused/{RUN}/") == set(REFUSED)
    copy = aws.client("s3").get_object(Bucket=BUCKET, Key=f"refused/{RUN}/{REFUSED[0]}")
    assert copy["Body"].read() == REFUSED[0].encode() and copy["ServerSideEncryption"] == "aws:kms"
    again = set_aside.move_refused(aws.client("s3"), CKPT, TARGET, SETTINGS["kms_key_arn"])
    assert again["objects"] == 0 and keys(f"checkpoints/{RUN}/") == set(KEPT)  # idempotent


def test_a_spent_budget_leaves_the_rest_for_the_next_start_and_a_failed_copy_deletes_nothing(aws_account):
    put(REFUSED)
    ticks = iter([0.0, 0.0, 0.0, 500.0, 500.0, 500.0])
    moved = set_aside.move_refused(aws.client("s3"), CKPT, TARGET, SETTINGS["kms_key_arn"], clock=lambda: next(ticks),
                                   budget=100)
    assert moved["objects"] == 2 and moved["left"] == 2 and len(keys(f"checkpoints/{RUN}/")) == 2

    class NoCopy:
        def __init__(self, s3):
            self.s3 = s3

        def get_paginator(self, name):
            return self.s3.get_paginator(name)

        def copy(self, *a, **kw):
            raise OSError("copy failed")

        def delete_object(self, **kw):
            pytest.fail("deleted before a copy succeeded")

    with pytest.raises(OSError, match="copy failed"):
        set_aside.move_refused(NoCopy(aws.client("s3")), CKPT, TARGET, SETTINGS["kms_key_arn"])
    assert len(keys(f"checkpoints/{RUN}/")) == 2
    with pytest.raises(ValueError, match="is not a run's checkpoint prefix"):
        set_aside.move_refused(aws.client("s3"), f"s3://{BUCKET}/checkpoints/", TARGET, SETTINGS["kms_key_arn"])


def test_start_training_moves_them_before_the_attempt_starts(state, context):
    run = state["run"]
    prefix = run["uris"]["checkpoint"].removeprefix(f"s3://{BUCKET}/")
    for name in REFUSED + KEPT:
        aws.client("s3").put_object(Bucket=BUCKET, Key=prefix + name, Body=b"x")
    handlers.start_training({"run": run, "attempt": 1}, context)
    assert keys(prefix) == set(KEPT)
    assert keys(f"refused/{run['run_id']}/") == set(REFUSED)
