"""Where the SageMaker distributed data parallel library (SMDDP, `ddp_backend smddp`) exists: one table.

Pre-flight allows `distribution.strategy: smddp` only when the training image ships the library and the
instance type is one the library runs on.

Images: the SageMaker PyTorch GPU training DLCs install the library in their Dockerfile (`SMD_DATA_PARALLEL_URL`,
`pip install smdistributed_dataparallel-<v>-...whl`) and the Hugging Face training DLCs are built `FROM` those
images. Read in aws/deep-learning-containers, pytorch/training/docker/<version>/py3/<cuda>/Dockerfile.gpu: 1.13
ships 1.7.0, 2.0 ships 2.0.1, 2.1 ships 2.1.0, 2.2 ships 2.2.0, 2.3 ships 2.3.0, 2.4 ships 2.5.0, 2.5 ships
2.6.0; the 2.6, 2.7, 2.8 and 2.9 Dockerfiles install no SMDDP at all. So the pipeline's default image
(HF transformers 5.3.0 on PyTorch 2.9.0) has no SMDDP: use ddp (NCCL) there, which is also what the SDK v2
accepts for newer images (SMDDP through the SDK only for PyTorch <= 2.2 with `smdistributed`, through
`torch_distributed` after that).

Instance types: the library's documented set (P3 16xlarge / P3dn, P4d, P4de, P5).
"""

from __future__ import annotations

import re

# PyTorch minor version of the training image -> SMDDP version its Dockerfile installs.
SMDDP_BY_PYTORCH = {
    "1.13": "1.7.0",
    "2.0": "2.0.1",
    "2.1": "2.1.0",
    "2.2": "2.2.0",
    "2.3": "2.3.0",
    "2.4": "2.5.0",
    "2.5": "2.6.0",
}
INSTANCE_TYPES = ("ml.p3.16xlarge", "ml.p3dn.24xlarge", "ml.p4d.24xlarge", "ml.p4de.24xlarge", "ml.p5.48xlarge")

# `...-training:<pytorch>-transformers<x>-gpu-...` (HF) or `...-training:<pytorch>-gpu-...` (PyTorch)
_TAG = re.compile(r":(?P<major>\d+)\.(?P<minor>\d+)(\.\d+)?-")


def image_pytorch_version(image_uri: str) -> str | None:
    """'2.9' for ...huggingface-pytorch-training:2.9.0-transformers5.3.0-gpu-..., None when the tag says nothing."""
    match = _TAG.search(image_uri)
    return f"{match['major']}.{match['minor']}" if match else None


def image_problem(image_uri: str) -> str | None:
    """Why the image cannot run smddp (None: it ships the library)."""
    version = image_pytorch_version(image_uri)
    if version in SMDDP_BY_PYTORCH:
        return None
    shipped = ", ".join(f"PyTorch {v}" for v in SMDDP_BY_PYTORCH)
    return (f"the training image ({image_uri.rsplit('/', 1)[-1]}) has no SMDDP library; it ships only in the "
            f"training images of {shipped}; use ddp (NCCL) or an environment whose training image has it")


def instance_problem(instance_type: str) -> str | None:
    if instance_type in INSTANCE_TYPES:
        return None
    return f"SMDDP does not run on {instance_type}; supported: {', '.join(INSTANCE_TYPES)}; or use ddp"
