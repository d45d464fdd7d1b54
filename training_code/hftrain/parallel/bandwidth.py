"""A short all-reduce bandwidth probe at start-up (GPU jobs on several hosts): the bus bandwidth in GB/s, logged
with the instance type's expected order of magnitude, and a failure below a floor, before any training step.

Bus bandwidth is NCCL's `busbw` (nccl-tests' PERFORMANCE.md): for an all-reduce of S bytes that took t seconds
on n ranks, S / t x 2 (n - 1) / n, the figure comparable with the hardware's link speed. Across hosts the links
between them bound it: `NETWORK_GBPS` holds each instance type's network bandwidth as AWS publishes it (Amazon
EC2 accelerated computing instance specifications: "Network bandwidth (Gbps)"), in GB/s. The floor is 10% of
it: a guess meant to separate a working EFA (nccl-tests on 2 x p4d reach most of the 50 GB/s) from NCCL falling
back to TCP sockets (single-digit GB/s), not a performance target. On CPU (gloo) the probe is skipped and says
so; on one host it measures NVLink/PCIe, which the table does not cover, and only logs.
"""

from __future__ import annotations

import logging
import time

logger = logging.getLogger("hftrain")

# instance type -> published network bandwidth in GB/s (Gbps / 8)
NETWORK_GBPS = {
    "ml.p4d.24xlarge": 400 / 8, "ml.p4de.24xlarge": 400 / 8,
    "ml.p5.48xlarge": 3200 / 8, "ml.p5e.48xlarge": 3200 / 8, "ml.p5en.48xlarge": 3200 / 8,
    "ml.p6-b200.48xlarge": 3200 / 8, "ml.p3dn.24xlarge": 100 / 8, "ml.g5.48xlarge": 100 / 8,
    "ml.g4dn.12xlarge": 50 / 8, "ml.g4dn.8xlarge": 50 / 8, "ml.trn1.32xlarge": 800 / 8,
    "ml.trn1n.32xlarge": 1600 / 8,
}
FLOOR_SHARE = 0.10
PROBE_BYTES = 64 * 2**20
ROUNDS = 5


def bus_bandwidth(nbytes: int, seconds: float, ranks: int) -> float:
    """GB/s (10^9 bytes per second), NCCL's busbw for an all-reduce."""
    if seconds <= 0 or ranks < 2:
        return 0.0
    return nbytes / seconds * 2 * (ranks - 1) / ranks / 1e9


def verdict(gbps: float, instance_type: str | None, hosts: int) -> tuple[str, str | None]:
    """(the log line, the failure message or None)."""
    expected = NETWORK_GBPS.get(instance_type or "")
    line = f"bandwidth probe: all-reduce bus bandwidth {gbps:.1f} GB/s"
    if hosts < 2 or expected is None:
        why = "one host: links inside the instance" if hosts < 2 else f"no published figure for {instance_type}"
        return f"{line} ({why}; not checked)", None
    floor = expected * FLOOR_SHARE
    line += f" across {hosts} hosts ({instance_type}: network {expected:.0f} GB/s, floor {floor:.1f} GB/s)"
    if gbps >= floor:
        return line, None
    return line, (f"the all-reduce bandwidth across hosts is {gbps:.1f} GB/s, below the floor of {floor:.1f} GB/s "
                  f"for {instance_type} ({expected:.0f} GB/s network): NCCL is likely not using EFA; check the "
                  "security group's self-referencing rules, FI_PROVIDER=efa and the aws-ofi-nccl plugin. To run "
                  "anyway, set network.require_efa to false in the run spec")


def probe(*, instance_type: str | None, hosts: int, require: bool) -> str:
    """Run the probe on every rank (a collective); returns the logged line. Raises NetworkError below the floor
    when `require`."""
    import torch
    import torch.distributed as dist

    from hftrain.parallel.nccl import NetworkError

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() < 2:
        return "bandwidth probe: skipped (one process)"
    backend = str(dist.get_backend()).lower()
    if backend != "nccl" or not torch.cuda.is_available():
        return f"bandwidth probe: skipped ({backend} backend on CPU: the GB/s of gloo says nothing about EFA)"
    tensor = torch.ones(PROBE_BYTES // 4, dtype=torch.float32, device=torch.device("cuda",
                                                                                   torch.cuda.current_device()))
    for _ in range(2):  # warm-up: communicator set-up, buffers
        dist.all_reduce(tensor)
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(ROUNDS):
        dist.all_reduce(tensor)
    torch.cuda.synchronize()
    seconds = (time.perf_counter() - started) / ROUNDS
    gbps = bus_bandwidth(PROBE_BYTES, seconds, dist.get_world_size())
    line, failure = verdict(gbps, instance_type, hosts)
    del tensor
    if failure and require:
        raise NetworkError(failure)
    return line
