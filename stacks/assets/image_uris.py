"""Container image URIs, resolved at synth time from the SageMaker Python SDK's image-URI configuration.

Nothing here is hand-written: registry accounts and tags come from `sagemaker-core`'s JSON config, so a region
or version the SDK does not know fails synth with the versions it does know.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sagemaker.core import image_uris

from stacks.assets import inference_compat, job_images
from stacks.settings.environment import ConfigError, EnvironmentConfig

_ECR = re.compile(r"^(?P<account>\d{12})\.dkr\.ecr\.(?P<region>[a-z0-9-]+)\.amazonaws\.com(\.cn)?/(?P<repo>[^:]+):")


@dataclass(frozen=True)
class ImageUris:
    training: str  # Hugging Face PyTorch training DLC (GPU)
    processing: str  # PyTorch training DLC (CPU), for the tokenizer processing jobs
    inference: str  # Hugging Face PyTorch inference DLC, for the registered model package

    def repositories(self) -> list[tuple[str, str, str]]:
        """(account, region, repository) of every image: the ECR ARNs the SageMaker role may pull from."""
        out = []
        for uri in (self.training, self.processing, self.inference):
            m = _ECR.match(uri)
            if not m:
                raise ConfigError(f"image URI {uri!r} is not an ECR URI")
            out.append((m["account"], m["region"], m["repo"]))
        return sorted(set(out))


def _retrieve(key: str, **kwargs: str) -> str:
    try:
        return image_uris.retrieve(**kwargs)
    except ValueError as exc:
        raise ConfigError(f"{key}: no image for {kwargs}: {exc}") from exc


def resolve_images(cfg: EnvironmentConfig) -> ImageUris:
    inference_compat.check(cfg)  # the registered model must load in the inference image
    job_images.check(cfg)  # what the jobs ship was decided from these images' package lists
    gpu_type = next((t for t in cfg.training_instance_types if not t.startswith(("ml.c", "ml.m", "ml.t", "ml.r"))),
                    "ml.g5.2xlarge")
    return ImageUris(
        training=_retrieve(
            "transformers_version/pytorch_version", framework="huggingface", region=cfg.region,
            version=cfg.transformers_version, base_framework_version=f"pytorch{cfg.pytorch_version}",
            image_scope="training", instance_type=gpu_type),
        processing=_retrieve(
            "processing_pytorch_version", framework="pytorch", region=cfg.region,
            version=cfg.processing_pytorch_version, py_version="py312", image_scope="training",
            instance_type=cfg.processing_instance_types[0]),
        inference=_retrieve(
            "inference_transformers_version/inference_pytorch_version", framework="huggingface",
            region=cfg.region, version=cfg.inference_transformers_version,
            base_framework_version=f"pytorch{cfg.inference_pytorch_version}", image_scope="inference",
            instance_type=gpu_type),
    )
