"""SageMaker's request limits, declared once: run_spec (the spec's bounds), preflight and request_guard use them.

Each is the API's own limit: the `max` of its shape in botocore's SageMaker service model where the model has one
(tests/lambda/test_lambda_sagemaker_limits.py compares every one with the model), else the documented quota named
beside it. Plain numbers here, not read from the model at run time: the spec's declaration is built at import, and
the pure modules import no botocore.
"""

from __future__ import annotations

MAX_HYPERPARAMETERS = 100  # CreateTrainingJob HyperParameters (shape HyperParameters)
MAX_HYPERPARAMETER_KEY = 256  # HyperParameterKey
MAX_HYPERPARAMETER_VALUE = 2500  # HyperParameterValue
MAX_CHANNELS = 20  # InputDataConfig
MAX_TAGS = 50  # TagList
MAX_CONTAINER_ARGUMENT = 256  # CreateProcessingJob ContainerArguments items (ContainerArgument)
PROCESSING_RUNTIME_LIMIT = 777_600  # ProcessingMaxRuntimeInSeconds (9 days)
# Training's MaxRuntimeInSeconds has no max in the model: 28 days is SageMaker's documented limit for a training job
# (Amazon SageMaker endpoints and quotas, "Longest run time for a training job").
MAX_RUNTIME_LIMIT = 28 * 24 * 3600

# name -> the service model shape whose `max` it is
MODEL_SHAPES = {"MAX_HYPERPARAMETERS": "HyperParameters", "MAX_HYPERPARAMETER_KEY": "HyperParameterKey",
                "MAX_HYPERPARAMETER_VALUE": "HyperParameterValue", "MAX_CHANNELS": "InputDataConfig",
                "MAX_TAGS": "TagList", "MAX_CONTAINER_ARGUMENT": "ContainerArgument",
                "PROCESSING_RUNTIME_LIMIT": "ProcessingMaxRuntimeInSeconds"}
