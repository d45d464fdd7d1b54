"""EFA instance types: one table for the training request's environment and for pre-flight's subnet check.

The sagemaker-training toolkit turns EFA on only for the instance types in its own hard-coded lists
(sagemaker-training 5.1.4, `sagemaker_training/__init__.py`: SM_EFA_NCCL_INSTANCES -> FI_PROVIDER=efa;
SM_EFA_RDMA_INSTANCES -> FI_EFA_USE_DEVICE_RDMA=1 and RDMAV_FORK_SAFE=1; read by torch_distributed.py,
mpi.py and smdataparallel.py). For an EFA type missing there (p5en, p6-b200, trn1n, trn2) NCCL silently falls
back to TCP sockets. For those the request sets the same variables in the job's Environment, which the toolkit
passes on to torchrun and its workers. Every distributed GPU job also gets NCCL's INIT/NET debug output in a
per-process file, from which the training code logs the transport NCCL chose at the first step
(training_code/hftrain/parallel/nccl.py), so a TCP fallback is visible.

Subnets: every EFA instance needs free private IPs in the job's subnet (about 5 per instance, see the
SageMaker EFA guidance); pre-flight checks `AvailableIpAddressCount` before a job is started.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

IPS_PER_EFA_INSTANCE = 5


@dataclass(frozen=True)
class EfaType:
    rdma: bool  # EFA device RDMA (FI_EFA_USE_DEVICE_RDMA=1)
    toolkit_knows: bool  # in sagemaker-training 5.1.4's SM_EFA_NCCL_INSTANCES (it sets the variables itself)


EFA_INSTANCE_TYPES: dict[str, EfaType] = {
    "ml.g4dn.8xlarge": EfaType(rdma=False, toolkit_knows=True),
    "ml.g4dn.12xlarge": EfaType(rdma=False, toolkit_knows=True),
    "ml.g5.48xlarge": EfaType(rdma=False, toolkit_knows=True),
    "ml.p3dn.24xlarge": EfaType(rdma=False, toolkit_knows=True),
    "ml.p4d.24xlarge": EfaType(rdma=True, toolkit_knows=True),
    "ml.p4de.24xlarge": EfaType(rdma=True, toolkit_knows=True),
    "ml.p5.48xlarge": EfaType(rdma=True, toolkit_knows=True),
    "ml.p5e.48xlarge": EfaType(rdma=True, toolkit_knows=True),
    "ml.p6e-gb200.36xlarge": EfaType(rdma=True, toolkit_knows=True),
    "ml.trn1.32xlarge": EfaType(rdma=True, toolkit_knows=True),
    # EFA types the pinned toolkit does not know: the request sets what it would have set
    "ml.p5en.48xlarge": EfaType(rdma=True, toolkit_knows=False),
    "ml.p6-b200.48xlarge": EfaType(rdma=True, toolkit_knows=False),
    "ml.trn1n.32xlarge": EfaType(rdma=True, toolkit_knows=False),
    "ml.trn2.48xlarge": EfaType(rdma=True, toolkit_knows=False),
}
# NCCL reports its transport choice under INIT/NET; one file per process, read back by the training code.
NCCL_DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET",
                  "NCCL_DEBUG_FILE": "/tmp/nccl-debug.%h.%p.log"}


def is_efa(instance_type: str) -> bool:
    return instance_type in EFA_INSTANCE_TYPES


def training_environment(instance_type: str, *, distributed: bool, require_efa: bool = True) -> dict[str, str]:
    """Environment entries for a training job on `instance_type` (empty for CPU / single-process jobs).

    require_efa (the spec's network.require_efa): on an EFA type, a NCCL transport other than EFA at the first
    step ends the job (HFTRAIN_REQUIRE_EFA=1, training_code/hftrain/parallel/nccl.py); False: only a warning."""
    env: dict[str, str] = {}
    gpu = not instance_type.startswith(("ml.c", "ml.m", "ml.r", "ml.t"))
    if distributed and gpu:
        env.update(NCCL_DEBUG_ENV)
    efa = EFA_INSTANCE_TYPES.get(instance_type)
    if efa is not None:
        env["HFTRAIN_EXPECT_EFA"] = "1"  # the training code checks that NCCL picked EFA
        env["HFTRAIN_REQUIRE_EFA"] = "1" if require_efa else "0"  # ... and ends the job when it did not
        if not efa.toolkit_knows:
            env["FI_PROVIDER"] = "efa"
            if efa.rdma:
                env["FI_EFA_USE_DEVICE_RDMA"] = "1"
                env["RDMAV_FORK_SAFE"] = "1"
    return env


def subnet_ip_problems(field: str, instance_type: str, instance_count: int,
                       subnets: list[dict[str, Any]]) -> list[str]:
    """Each subnet a job may be placed in must have the free IPs its EFA instances need."""
    if not is_efa(instance_type):
        return []
    needed = IPS_PER_EFA_INSTANCE * instance_count
    return [f"{field}: {instance_count} x {instance_type} (EFA) need about {needed} free private IPs in subnet "
            f"{subnet['SubnetId']}, which has {subnet['AvailableIpAddressCount']}; free addresses, use fewer "
            "instances or a larger subnet"
            for subnet in subnets if int(subnet.get("AvailableIpAddressCount", 0)) < needed]
