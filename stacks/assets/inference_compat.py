"""Can the inference image registered with a model read and serve what training writes? Checked at synth time.

A model package names an inference image; the model inside was saved by the training image's transformers.
Facts this rests on (transformers 5.3.0 / 5.5.3 / 4.51.3, checked in the installed packages; tests/integration/
test_inference_image.py serves each task's saved model in a venv with the inference image's versions):

* transformers 5.x writes `"tokenizer_class": "TokenizersBackend"`, which 4.x cannot load; the training code
  rewrites it to `PreTrainedTokenizerFast` (the same class in 5.x, known to 4.x: training_code/hftrain/run/export.py).
* transformers 5 has no `question-answering` or `summarization` pipeline (`transformers.pipelines.SUPPORTED_TASKS`
  in 5.3.0 and 5.5.3), and the HF inference toolkit serves a model with `pipeline(HF_TASK, ...)`; PyPI's toolkit
  (2.6.0, the one the 4.51.3 image installs) does not even import under transformers 5.
* the SageMaker SDK's image config (sagemaker-core 2.27) lists HF inference transformers 4.48.0 (PyTorch 2.3.0),
  4.49.0, 4.51.3 and 5.5.3 (PyTorch 2.6.0).

Hence: training with 5.x registers a 4.x inference image no older than the one tested (4.51.3); training with
4.x needs an inference version of the same major version, at least as new.
"""

from __future__ import annotations

from stacks.settings.environment import ConfigError, EnvironmentConfig


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


TESTED_4X_FOR_5X = (4, 51, 3)  # the 4.x inference version the exported 5.x models are served with in the tests


def problem(training_transformers: str, inference_transformers: str) -> str | None:
    """Why a model saved by `training_transformers` may not serve under `inference_transformers` (None: it does)."""
    train, serve = _version(training_transformers), _version(inference_transformers)
    if serve[0] >= 5:
        return (f"the inference image's transformers {inference_transformers} has no question-answering or "
                "summarization pipeline (transformers 5 removed them), which the HF inference toolkit builds from "
                "HF_TASK")
    if train[0] == 5 and serve[0] == 4:
        if serve < TESTED_4X_FOR_5X:
            return (f"models saved by transformers {training_transformers} are exported for 4.x and served in the "
                    f"tests with {'.'.join(map(str, TESTED_4X_FOR_5X))}; {inference_transformers} is older")
        return None
    if serve[0] != train[0] or serve < train:
        return (f"the inference image's transformers {inference_transformers} may not read models saved by "
                f"transformers {training_transformers} (use the same major version, at least as new)")
    return None


def check(cfg: EnvironmentConfig) -> None:
    """ConfigError (fails synth) when the environment registers models with an image that cannot load them."""
    reason = problem(cfg.transformers_version, cfg.inference_transformers_version)
    if reason:
        raise ConfigError(
            f"environments.{cfg.name}.inference_transformers_version={cfg.inference_transformers_version!r}: "
            f"{reason}; see README, Deploying, for the versions that serve what training writes"
        )
