"""Checkpoints in S3 as the training code writes them, for the Lambda and state-machine tests (issue 9)."""

from __future__ import annotations

from typing import Any


def upload_checkpoint(s3: Any, uri: str, workdir: Any, step: int, *, hosts: tuple[str, ...] = ("algo-1",),
                      saved_at: float | None = None, skip: tuple[str, ...] = ()) -> None:
    """Write checkpoint-<step> with the training code's own marker writer (one marker per host), then upload it
    as the nodes' sync would; `skip` leaves files (relative paths) out of S3."""
    from pathlib import Path

    from hftrain.checkpoint import manager as ck

    identity = {"task": "text-classification", "model_fingerprint": "f" * 32, "model": {"model_type": "bert"}}
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    for rank, host in enumerate(hosts):
        node = Path(workdir) / host / f"checkpoint-{step}"
        node.mkdir(parents=True, exist_ok=True)
        (node / f"rng_state_{rank}.pth").write_bytes(b"rng" * (rank + 1))
        if rank == 0:
            for name in ("model.safetensors", "optimizer.pt", "scheduler.pt", "trainer_state.json"):
                (node / name).write_bytes(name.encode() * 10)
        ck.write_node_marker(str(node), host=host, hosts=list(hosts), step=step, world_size=len(hosts),
                             identity=identity, lineage="run", now=saved_at)
        for path in sorted(node.rglob("*")):
            rel = f"checkpoint-{step}/{path.relative_to(node).as_posix()}"
            if path.is_file() and rel not in skip:
                s3.put_object(Bucket=bucket, Key=f"{prefix.rstrip('/')}/{rel}", Body=path.read_bytes())
