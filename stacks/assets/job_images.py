"""What the pinned job images hold, as read in their Dockerfiles: the source for what the jobs must ship.

Source: github.com/aws/deep-learning-containers at commit ca82ce3f68 (2026-05-14, "Patch diffusers in Hugging
Face PyTorch DLCs") for the Hugging Face images and 0f8bea76e8 (2026-07-30) for the PyTorch CPU image; the
version each Dockerfile pins (`ARG ..._VERSION=`) or installs by name. "unpinned" packages are installed by
name (or as a dependency) and resolved when the image was built, so only their presence is known.

* training, huggingface-pytorch-training 2.9.0-transformers5.3.0-gpu-py312-cu130-ubuntu22.04:
  huggingface/pytorch/training/docker/2.9/py3/cu130/Dockerfile.gpu (FROM pytorch-training 2.9.0 GPU).
* processing, pytorch-training 2.8.0-cpu-py312 (sagemaker stage): pytorch/training/docker/2.8/py3/Dockerfile.cpu.
* inference, huggingface-pytorch-inference 2.6.0-transformers4.51.3-gpu-py312-cu124-ubuntu22.04:
  huggingface/pytorch/inference/docker/2.6/py3/cu124/Dockerfile.gpu at 84ca1dfae0 (2025-04-25).

`check(cfg)` fails synth when cdk.json names an image version not described here: the wheels shipped with the
code (stacks/assets/job_wheels.lock) were decided from these lists, so a new image needs a new look (README, Deploying).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from stacks.settings.environment import ConfigError, EnvironmentConfig

UNPINNED = "unpinned"


@dataclass(frozen=True)
class ImageContents:
    repository: str
    tag: str
    python: str
    source: str
    packages: dict[str, str]  # distribution name -> version pinned in the Dockerfile, or UNPINNED
    lacks: tuple[str, ...] = ()  # what the jobs need that the image does not have (shipped as wheels)
    notes: tuple[str, ...] = field(default_factory=tuple)


TRAINING = {
    ("5.3.0", "2.9.0"): ImageContents(
        repository="huggingface-pytorch-training",
        tag="2.9.0-transformers5.3.0-gpu-py312-cu130-ubuntu22.04",
        python="3.12",
        source="aws/deep-learning-containers@ca82ce3f68 huggingface/pytorch/training/docker/2.9/py3/cu130/Dockerfile.gpu",
        packages={"torch": "2.9.0", "transformers": "5.3.0", "datasets": "4.5.0", "accelerate": "1.12.0",
                  "huggingface-hub": "1.10.0", "evaluate": "0.4.6", "peft": "0.18.1", "trl": "0.28.0",
                  "diffusers": "0.38.0", "dill": "0.3.8", "multiprocess": "0.70.16", "numpy": "<2",
                  "tokenizers": UNPINNED, "safetensors": UNPINNED, "pyarrow": UNPINNED, "scikit-learn": UNPINNED,
                  "sagemaker-training": UNPINNED, "sagemaker-pytorch-training": UNPINNED,
                  "tensorboard": UNPINNED},
        lacks=("rouge-score", "nltk", "mlflow-skinny", "sagemaker-mlflow"),
        notes=("mlflow-skinny and sagemaker-mlflow (hftrain/tracking) ship with all their dependencies as wheels: "
               "pip installs only those the image does not satisfy",
               "tokenizers comes with transformers[tokenizers] (a 0.22.x); the jobs pin 0.22.2 from the wheels",
               "accelerate 1.12.0 is replaced by the shipped 1.15.0: with 1.12.0 an FSDP2 run resumed from its "
               "sharded checkpoint ends on weights 5e-3 away from the uninterrupted run (0.0 with 1.15.0)",
               "no smdistributed.dataparallel: the PyTorch 2.9 base installs no SMDDP (lambda/plan/smddp_support.py)"),
    ),
}
PROCESSING = {
    "2.8.0": ImageContents(
        repository="pytorch-training",
        tag="2.8.0-cpu-py312",
        python="3.12",
        source="aws/deep-learning-containers@0f8bea76e8 pytorch/training/docker/2.8/py3/Dockerfile.cpu",
        packages={"torch": "2.8.0", "numpy": UNPINNED, "pandas": UNPINNED, "pyarrow": UNPINNED,
                  "sagemaker-training": UNPINNED, "accelerate": UNPINNED},
        lacks=("tokenizers",),
        notes=("pyarrow is there as a dependency of smclarify (installed in the sagemaker stage)",
               "no transformers, datasets or tokenizers: the tokenizer jobs import only tokenizers, pyarrow, numpy"),
    ),
}
INFERENCE = {
    ("4.51.3", "2.6.0"): ImageContents(
        repository="huggingface-pytorch-inference",
        tag="2.6.0-transformers4.51.3-gpu-py312-cu124-ubuntu22.04",
        python="3.12",
        source="aws/deep-learning-containers@84ca1dfae0 huggingface/pytorch/inference/docker/2.6/py3/cu124/Dockerfile.gpu",
        packages={"torch": "2.6.0", "transformers": "4.51.3", "huggingface-hub": "0.30.0", "accelerate": "1.6.0",
                  "multi-model-server": "1.1.11", "sagemaker-huggingface-inference-toolkit": "2.6.0",
                  "tokenizers": UNPINNED, "Pillow": UNPINNED},
        notes=("the 5.5.3 image (same Dockerfile at ca82ce3f68) cannot serve question answering or summarization: "
               "transformers 5 has no such pipelines",),
    ),
}


def training_image(cfg: EnvironmentConfig) -> ImageContents | None:
    return TRAINING.get((cfg.transformers_version, cfg.pytorch_version))


def check(cfg: EnvironmentConfig) -> None:
    """ConfigError when an image version has no recorded package list (the shipped wheels were decided from it)."""
    where = f"environments.{cfg.name}"
    missing = []
    if training_image(cfg) is None:
        missing.append(f"{where}.transformers_version/pytorch_version={cfg.transformers_version}/"
                       f"{cfg.pytorch_version} (known: {', '.join('/'.join(k) for k in TRAINING)})")
    if cfg.processing_pytorch_version not in PROCESSING:
        missing.append(f"{where}.processing_pytorch_version={cfg.processing_pytorch_version} "
                       f"(known: {', '.join(PROCESSING)})")
    if (cfg.inference_transformers_version, cfg.inference_pytorch_version) not in INFERENCE:
        missing.append(f"{where}.inference_transformers_version/inference_pytorch_version="
                       f"{cfg.inference_transformers_version}/{cfg.inference_pytorch_version} "
                       f"(known: {', '.join('/'.join(k) for k in INFERENCE)})")
    if missing:
        raise ConfigError(
            "no recorded package list for: " + "; ".join(missing) + ". The jobs install nothing from the internet, "
            "so what an image lacks must be known: read the image's Dockerfile in aws/deep-learning-containers, "
            "add it to stacks/assets/job_images.py, update stacks/assets/job_wheels.lock and the pins (README, Deploying)"
        )
