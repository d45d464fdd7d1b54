"""The model package's inference specification: what the HF inference toolkit needs to serve the model.

The Hugging Face inference DLC runs `sagemaker-huggingface-inference-toolkit`: it loads /opt/ml/model (the
extracted model.tar.gz) into `transformers.pipeline(HF_TASK, ...)` and answers JSON requests
(`{"inputs": ..., "parameters": {...}}`) with JSON. The image must read what training wrote: the environment's
inference transformers version is checked against the training one at synth time (stacks/inference_compat.py), and the training code writes tokenizer files that 4.x reads
(training_code/hftrain/export.py).
"""

from __future__ import annotations

from typing import Any

CONTENT_TYPE = "application/json"


def inference_specification(image_uri: str, model_data_url: str, task: str) -> dict[str, Any]:
    return {
        "Containers": [{"Image": image_uri, "ModelDataUrl": model_data_url, "Environment": {"HF_TASK": task}}],
        "SupportedContentTypes": [CONTENT_TYPE],
        "SupportedResponseMIMETypes": [CONTENT_TYPE],
    }
