"""What CheckJob reads of the checkpoint prefix is bounded (issue 36, finding 3): each marker, all markers of one
check, the history and progress files; a marker of the wrong shape is unreadable, never an exception."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime

from contract import run_history
from contract.checkpoint_marker import MARKER_FORMAT, checkpoint_name, marker_name
from hfsm_lambda.watch import durability

URI = "s3://arts/checkpoints/run/"
MOMENT = datetime(2025, 6, 1, tzinfo=UTC)


class Body(io.BytesIO):
    def __init__(self, data: bytes, asked: list[int]) -> None:
        super().__init__(data)
        self.asked = asked

    def read(self, size=-1):
        data = super().read(size)
        self.asked.append((size, len(data)))
        return data


class S3:
    """ListObjectsV2 and GetObject over objects in memory (sizes may be claimed without the bytes), counting what
    each GetObject was asked to read."""

    def __init__(self, objects: dict[str, bytes]) -> None:
        self.objects, self.asked = objects, []

    def get_paginator(self, name):
        outer = self

        class Pages:
            def paginate(self, Bucket, Prefix, PaginationConfig=None):  # noqa: N803 - the API's names
                return [{"Contents": [{"Key": k, "Size": len(v), "LastModified": MOMENT}
                                      for k, v in outer.objects.items() if k.startswith(Prefix)]}]
        return Pages()

    def get_object(self, Bucket, Key):  # noqa: N803
        data = self.objects[Key]
        return {"Body": Body(data, self.asked), "ContentLength": len(data)}


def marker(step: int, padding: int = 0, **changes) -> bytes:
    return json.dumps({"format": MARKER_FORMAT, "host": "algo-1", "hosts": ["algo-1"], "step": step,
                       "saved_at_unix": MOMENT.timestamp(), "files": {"model.safetensors": {"size": 1}},
                       "pad": "x" * padding, **changes}).encode()


def key(step: int, name: str) -> str:
    return f"checkpoints/run/{checkpoint_name(step)}/{name}"


def objects_of(steps: dict[int, bytes]) -> dict[str, bytes]:
    out = {}
    for step, body in steps.items():
        out[key(step, "model.safetensors")] = b"w"
        out[key(step, marker_name("algo-1"))] = body
    return out


def test_markers_are_read_up_to_their_bounds():
    s3 = S3(objects_of({1: marker(1), **{step: marker(step, padding=60 * 1024 * 1024) for step in range(2, 5)}}))
    found = durability.last_durable(s3, URI)
    assert found is not None and found["step"] == 1  # the big markers are unreadable, the small one counts
    assert [p["reason"] for p in found["pending"]] == ["no readable marker"] * 3
    assert len(s3.asked) == 4 and all(size == durability.MAX_MARKER_BYTES + 1 for size, _ in s3.asked)


def test_the_markers_of_one_check_are_read_up_to_a_total():
    big = durability.MAX_MARKER_BYTES - 1024  # readable one by one, too many together
    s3 = S3(objects_of({step: marker(step, padding=big, hosts=["algo-1", "algo-9"]) for step in range(1, 40)}))
    assert durability.last_durable(s3, URI) is None
    assert sum(got for _, got in s3.asked) <= durability.MAX_MARKER_BYTES_TOTAL + 2 * durability.MAX_MARKER_BYTES


def test_a_marker_of_the_wrong_shape_is_unreadable_not_an_exception():
    s3 = S3(objects_of({5: marker(5, hosts=5), 6: marker(6, files=["model.safetensors"]), 4: marker(4)}))
    found = durability.last_durable(s3, URI)
    assert found["step"] == 4 and [p["reason"] for p in found["pending"]] == ["no readable marker"] * 2


def test_history_and_progress_files_are_read_up_to_their_bound():
    huge = b" " * (run_history.MAX_CHARS + 10) + b"{}"
    s3 = S3({f"checkpoints/run/{run_history.HISTORY_FILE}": huge, f"checkpoints/run/{run_history.PROGRESS_FILE}": huge})
    assert durability.read_history(s3, URI) == {} and durability.read_progress(s3, URI) is None
    assert [size for size, _ in s3.asked] == [run_history.MAX_CHARS + 1] * 2
