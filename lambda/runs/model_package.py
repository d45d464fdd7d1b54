"""The model package's inference specification: what the HF inference toolkit needs to serve the model.

The Hugging Face inference DLC runs `sagemaker-huggingface-inference-toolkit`: it loads /opt/ml/model (the
extracted model.tar.gz) into `transformers.pipeline(HF_TASK, ...)` and answers JSON requests
(`{"inputs": ..., "parameters": {...}}`) with JSON. The image must read what training wrote: the environment's
inference transformers version is checked against the training one at synth time (stacks/assets/inference_compat.py), and the training code writes tokenizer files that 4.x reads
(training_code/hftrain/run/export.py).

`package_request` is Finish's whole CreateModelPackage request: the frozen model (registry.py), the verdict first
in the description, the run's metadata and metrics, one package per training job (ClientToken).
"""

from __future__ import annotations

from hashlib import sha256
from typing import Any

from hfsm_lambda.plan import job_requests
from hfsm_lambda.plan.run import Run
from hfsm_lambda.runs import registry
from hfsm_lambda.settings import Settings

CONTENT_TYPE = "application/json"
MAX_DESCRIPTION = 1024  # ModelPackageDescription's limit
MAX_METADATA = 50  # CustomerMetadataProperties entries


def inference_specification(image_uri: str, model_data_url: str, task: str) -> dict[str, Any]:
    return {
        "Containers": [{"Image": image_uri, "ModelDataUrl": model_data_url, "Environment": {"HF_TASK": task}}],
        "SupportedContentTypes": [CONTENT_TYPE],
        "SupportedResponseMIMETypes": [CONTENT_TYPE],
    }


def _metadata_value(value: Any) -> str:
    text = f"{value:.6g}" if isinstance(value, float) else str(value)
    return text[:256] or "-"


def _metadata(run: Run, job_name: str, attempt: int, metrics: dict[str, Any], judged: dict[str, Any],
              frozen: dict[str, Any]) -> dict[str, str]:
    """The run's identity, then as many final metrics as the entry limit leaves room for."""
    spec = run.spec
    metadata = {"run_id": run.run_id, "training_job": job_name, "task": spec.task,
                "base_model": spec.model, "attempts": str(attempt + 1), "verdict": judged["verdict"],
                "model_etag": frozen["etag"] or "-", "model_version_id": frozen["version_id"] or "-",
                "source_version_id": frozen["source_version_id"] or "-"}
    for name, value in list(metrics.items())[: MAX_METADATA - len(metadata)]:
        metadata[name] = _metadata_value(value)
    return metadata


def _description(run: Run, judged: dict[str, Any]) -> str:
    spec = run.spec
    description = f"{spec.task} fine-tune of {spec.model}, run {run.run_id}"
    if spec.description:
        description += f": {spec.description}"
    description = f"[{judged['text']}] {description}"  # the verdict first: the description is cut at 1024
    return description[:MAX_DESCRIPTION]


def package_request(settings: Settings, run: Run, job_name: str, attempt: int, metrics: dict[str, Any],
                    judged: dict[str, Any], frozen: dict[str, Any]) -> dict[str, Any]:
    """The CreateModelPackage request for the model training job `job_name` (attempt `attempt`) of `run` made:
    `metrics` its final metrics, `judged` their verdict (verdict.judge), `frozen` the model's frozen copy
    (registry.freeze_model_artifact)."""
    return {
        "ModelPackageGroupName": settings.model_package_group,
        "ModelPackageDescription": _description(run, judged),
        "ModelApprovalStatus": "PendingManualApproval",
        "InferenceSpecification": registry.pinned(inference_specification(
            settings.inference_image_uri, frozen["uri"], run.spec.task), frozen),
        # the frozen copy under registry/ and its digest (registry.freeze_metrics), not outputs/ (jobs write there)
        "ModelMetrics": {"ModelQuality": {"Statistics": {"ContentType": "application/json",
                                                         "S3Uri": frozen["metrics_uri"],
                                                         "ContentDigest": f"sha256:{frozen['metrics_sha256']}"}}},
        "CustomerMetadataProperties": _metadata(run, job_name, attempt, metrics, judged, frozen),
        "ClientToken": sha256(job_name.encode()).hexdigest()[:32],  # one package per job, even on retry
        "Tags": job_requests.tags(settings, run),
    }
