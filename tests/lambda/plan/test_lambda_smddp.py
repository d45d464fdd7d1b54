"""smddp is allowed only where the library ships: the training image's PyTorch version and the instance type,
both from lambda/plan/smddp_support.py's table."""

from __future__ import annotations

import pytest
from testkit.lambdas import SMDDP_IMAGE, settings_dict

from hfsm_lambda import settings as settings_module
from hfsm_lambda.errors import PreflightError
from hfsm_lambda.plan import smddp_support
from hfsm_lambda.runs.prepare import prepare_run

SPEC = {"version": 1, "name": "smddp", "task": "text-classification", "model": "bert-base-uncased",
        "data": {"train": {"s3": "s3://hfsm-dev-data/datasets/x/"}},
        "compute": {"instance_type": "ml.p4d.24xlarge", "instance_count": 2}, "distribution": {"strategy": "smddp"}}
REGISTRY = "763104351884.dkr.ecr.us-east-1.amazonaws.com"
WITH_SMDDP = SMDDP_IMAGE
WITHOUT = f"{REGISTRY}/huggingface-pytorch-training:2.9.0-transformers5.3.0-gpu-py312-cu130-ubuntu22.04"


def _settings(image: str) -> settings_module.Settings:
    return settings_module.Settings.from_dict(settings_dict(training_image_uri=image))


@pytest.mark.parametrize(("uri", "version"), [
    (WITHOUT, "2.9"), (WITH_SMDDP, "2.5"), (f"{REGISTRY}/pytorch-training:2.2.0-gpu-py310-cu121-ubuntu20.04-sagemaker",
                                           "2.2"), ("localhost/custom:latest", None)])
def test_the_pytorch_version_is_read_from_the_image_tag(uri, version):
    assert smddp_support.image_pytorch_version(uri) == version


def test_smddp_on_an_image_that_ships_it_and_a_supported_instance_passes():
    run = prepare_run(SPEC, _settings(WITH_SMDDP))
    assert run.spec.distribution.strategy == "smddp"


def test_smddp_on_the_default_image_is_refused_before_any_job_starts():
    with pytest.raises(PreflightError) as info:
        prepare_run(SPEC, _settings(WITHOUT))
    text = "\n".join(info.value.problems)
    assert "distribution.strategy: smddp: the training image (huggingface-pytorch-training:2.9.0-" in text
    assert "has no SMDDP library" in text and "PyTorch 2.5" in text and "use ddp" in text


def test_smddp_on_an_unsupported_instance_type_is_refused():
    spec = {**SPEC, "compute": {"instance_type": "ml.g5.12xlarge", "instance_count": 2}}
    with pytest.raises(PreflightError) as info:
        prepare_run(spec, _settings(WITH_SMDDP))
    assert any(p.startswith("compute.instance_type:") and "SMDDP does not run on ml.g5.12xlarge" in p
               for p in info.value.problems)


def test_every_supported_instance_type_is_allowed_by_some_environment_type_rule():
    assert all(t.startswith("ml.p") for t in smddp_support.INSTANCE_TYPES)
    assert all(smddp_support.instance_problem(t) is None for t in smddp_support.INSTANCE_TYPES)
