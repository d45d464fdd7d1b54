"""Can the inference image registered with a model read what the training image writes? Checked at synth time.

A model package names an inference image; the model inside was saved by the training image's transformers.
transformers 5.x's `save_pretrained` writes `tokenizer_config.json` with `"tokenizer_class": "TokenizersBackend"`,
a class 4.x does not have (`ValueError: Tokenizer class TokenizersBackend does not exist or is not currently
imported` when the 4.51.3 inference image loads it), and newer releases may write fields older ones reject.
So the rule is: the inference image's transformers has the training image's major version and is at least as
new. The HF inference DLCs in the SageMaker SDK's image config (sagemaker-core 2.27: transformers 4.48.0 on
PyTorch 2.3.0; 4.49.0, 4.51.3 and 5.5.3 on PyTorch 2.6.0) leave exactly one choice for training with 5.3.0:
5.5.3 / PyTorch 2.6.0. tests/infra/test_inference_compat.py loads each task's saved model with that version.
"""

from __future__ import annotations

from stacks.config import ConfigError, EnvironmentConfig


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def problem(training_transformers: str, inference_transformers: str) -> str | None:
    """Why a model saved by `training_transformers` may not load under `inference_transformers` (None: it does)."""
    train, serve = _version(training_transformers), _version(inference_transformers)
    if serve[0] != train[0]:
        return (f"the inference image's transformers {inference_transformers} cannot read models saved by "
                f"transformers {training_transformers} (major versions differ: 5.x writes tokenizer_class "
                "TokenizersBackend, which 4.x cannot load)")
    if serve < train:
        return (f"the inference image's transformers {inference_transformers} is older than the training image's "
                f"{training_transformers}: it may not read what the newer version writes")
    return None


def check(cfg: EnvironmentConfig) -> None:
    """ConfigError (fails synth) when the environment registers models with an image that cannot load them."""
    reason = problem(cfg.transformers_version, cfg.inference_transformers_version)
    if reason:
        raise ConfigError(
            f"environments.{cfg.name}.inference_transformers_version={cfg.inference_transformers_version!r}: "
            f"{reason}; pick an HF inference version of the same major version, at least "
            f"{cfg.transformers_version} (see README, Deploying)"
        )
