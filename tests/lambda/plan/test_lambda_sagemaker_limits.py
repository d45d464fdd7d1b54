"""The SageMaker limits the pipeline checks are the API's own: each equals the `max` of its shape in botocore's
service model (the one declaration of them is lambda/plan/sagemaker_limits.py; the spec's bounds and the pre-flight
checks use it)."""

from __future__ import annotations

import botocore.session
import pytest

from hfsm_lambda.plan import preflight, request_guard, sagemaker_limits
from hfsm_lambda.spec import run_spec


@pytest.mark.parametrize(("name", "shape"), sorted(sagemaker_limits.MODEL_SHAPES.items()))
def test_each_limit_is_the_service_models(name: str, shape: str) -> None:
    model = botocore.session.get_session().get_service_model("sagemaker")
    assert getattr(sagemaker_limits, name) == model.shape_for(shape).metadata["max"], name


def test_every_limit_is_checked_against_the_model_or_documented() -> None:
    declared = {n for n in vars(sagemaker_limits) if n.startswith(("MAX_", "PROCESSING_"))}
    assert declared - set(sagemaker_limits.MODEL_SHAPES) == {"MAX_RUNTIME_LIMIT"}  # documented quota, no shape max


def test_the_users_of_the_limits_hold_no_copy() -> None:
    for module in (preflight, request_guard, run_spec):
        for name in sagemaker_limits.MODEL_SHAPES:
            if hasattr(module, name):
                assert getattr(module, name) is getattr(sagemaker_limits, name), (module.__name__, name)
    assert run_spec.SPEC.fields["tokenizer"].fields["max_runtime_seconds"].high == \
        sagemaker_limits.PROCESSING_RUNTIME_LIMIT
