"""GPU instance types: how many GPUs each has, and whether they compute in bf16 and TF32. One table, read by
Prepare for `compute.processes_per_host` and every fallback option, and for the hyperparameters that need bf16 or
TF32 (the `bf16_gpu` fact of training_code/hftrain/hp_rules.py).

Sources: GPUs per instance and GPU model from the instance tables of Amazon EC2 "Accelerated computing instance
specifications" (https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html; the SageMaker `ml.` types are the
EC2 types of the same name, https://aws.amazon.com/sagemaker/ai/pricing/ "Instance details"). bf16 and TF32 tensor
cores from NVIDIA Ampere (compute capability 8.0) on: NVIDIA's "CUDA C++ Programming Guide", compute capabilities
table; transformers checks the same (`is_torch_bf16_gpu_available`: CUDA compute capability >= 8).

A type missing here is not checked (the environment's `allowed_instance_types` is the platform engineer's choice);
a missing family is taken to support bf16, as every family newer than the ones listed does.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class GpuFamily:
    gpu: str
    architecture: str
    bf16: bool  # bf16 and TF32 (Ampere or newer)


FAMILIES: dict[str, GpuFamily] = {
    "ml.p2": GpuFamily("NVIDIA K80", "Kepler", bf16=False),
    "ml.p3": GpuFamily("NVIDIA V100", "Volta", bf16=False),
    "ml.p3dn": GpuFamily("NVIDIA V100", "Volta", bf16=False),
    "ml.g3": GpuFamily("NVIDIA M60", "Maxwell", bf16=False),
    "ml.g3s": GpuFamily("NVIDIA M60", "Maxwell", bf16=False),
    "ml.g4dn": GpuFamily("NVIDIA T4", "Turing", bf16=False),
    "ml.g4ad": GpuFamily("AMD Radeon Pro V520", "RDNA (no CUDA)", bf16=False),
    "ml.g5": GpuFamily("NVIDIA A10G", "Ampere", bf16=True),
    "ml.g6": GpuFamily("NVIDIA L4", "Ada Lovelace", bf16=True),
    "ml.g6e": GpuFamily("NVIDIA L40S", "Ada Lovelace", bf16=True),
    "ml.p4d": GpuFamily("NVIDIA A100", "Ampere", bf16=True),
    "ml.p4de": GpuFamily("NVIDIA A100 80GB", "Ampere", bf16=True),
    "ml.p5": GpuFamily("NVIDIA H100", "Hopper", bf16=True),
    "ml.p5e": GpuFamily("NVIDIA H200", "Hopper", bf16=True),
    "ml.p5en": GpuFamily("NVIDIA H200", "Hopper", bf16=True),
    "ml.p6-b200": GpuFamily("NVIDIA B200", "Blackwell", bf16=True),
    "ml.p6e-gb200": GpuFamily("NVIDIA B200 (GB200)", "Blackwell", bf16=True),
}


# Families without an NVIDIA GPU (CPU, or accelerators without CUDA): no bf16 or TF32 for the Trainer's GPU paths
# (transformers refuses `tf32` without an Ampere GPU). GPUs: none, so `gpus` stays None (not checked).
CPU_FAMILIES = ("ml.t2", "ml.t3", "ml.m4", "ml.m5", "ml.m5d", "ml.m6i", "ml.m6id", "ml.m7i", "ml.c4", "ml.c5",
                "ml.c5d", "ml.c5n", "ml.c6i", "ml.c6id", "ml.c7i", "ml.r5", "ml.r5d", "ml.r6i", "ml.r7i",
                "ml.trn1", "ml.trn1n", "ml.trn2", "ml.inf2")
FAMILIES.update({name: GpuFamily("no NVIDIA GPU", "CPU" if not name.startswith(("ml.trn", "ml.inf")) else "Neuron",
                                 bf16=False) for name in CPU_FAMILIES})


def _sizes(family: str, counts: dict[str, int]) -> dict[str, int]:
    return {f"{family}.{size}": gpus for size, gpus in counts.items()}


_ONE_TO_FOUR = {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1, "12xlarge": 4, "24xlarge": 4,
                "48xlarge": 8}
GPUS: dict[str, int] = {
    **_sizes("ml.p2", {"xlarge": 1, "8xlarge": 8, "16xlarge": 16}),
    **_sizes("ml.p3", {"2xlarge": 1, "8xlarge": 4, "16xlarge": 8}),
    "ml.p3dn.24xlarge": 8,
    **_sizes("ml.g3", {"4xlarge": 1, "8xlarge": 2, "16xlarge": 4}),
    "ml.g3s.xlarge": 1,
    **_sizes("ml.g4dn", {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 1, "16xlarge": 1, "12xlarge": 4}),
    **_sizes("ml.g4ad", {"xlarge": 1, "2xlarge": 1, "4xlarge": 1, "8xlarge": 2, "16xlarge": 4}),
    **_sizes("ml.g5", _ONE_TO_FOUR),
    **_sizes("ml.g6", _ONE_TO_FOUR),
    **_sizes("ml.g6e", _ONE_TO_FOUR),
    "ml.p4d.24xlarge": 8,
    "ml.p4de.24xlarge": 8,
    "ml.p5.48xlarge": 8,
    "ml.p5e.48xlarge": 8,
    "ml.p5en.48xlarge": 8,
    "ml.p6-b200.48xlarge": 8,
    "ml.p6e-gb200.36xlarge": 4,
}


def family(instance_type: str) -> str:
    """`ml.g5` of `ml.g5.2xlarge`."""
    return instance_type.rsplit(".", 1)[0]


def gpus(instance_type: str) -> int | None:
    """GPUs of one instance; None when the table does not know the type."""
    return GPUS.get(instance_type)


def has_bf16(instance_type: str) -> bool:
    """bf16 and TF32 on its GPUs (a family the table does not know is taken to have them)."""
    known = FAMILIES.get(family(instance_type))
    return known is None or known.bf16


def describe(instance_type: str) -> str:
    known, count = FAMILIES.get(family(instance_type)), gpus(instance_type)
    if known is not None and family(instance_type) in CPU_FAMILIES:
        return f"{instance_type} ({known.architecture}, no NVIDIA GPU)"
    if known is None or count is None:
        return instance_type
    return f"{instance_type} ({count} x {known.gpu}, {known.architecture})"
