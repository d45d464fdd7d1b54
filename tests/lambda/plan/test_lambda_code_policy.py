"""No code execution from a run spec by default: what a spec may make a job import, fetch or send out."""

from __future__ import annotations

import json
from typing import Any

import pytest
from testkit.lambdas import sagemaker_request_errors, settings_dict

from hfsm_lambda import settings as settings_module
from hfsm_lambda.errors import PreflightError, SpecError
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.spec import hyperparameters

COMMIT = "0123456789abcdef0123456789abcdef01234567"
S3_MODEL = "s3://hfsm-dev-data/base-models/bert/"
BASE: dict[str, Any] = {
    "version": 1, "name": "qa", "task": "question-answering", "model": "acme/bert-qa",
    "data": {"train": {"s3": "datasets/squad/train/"}},
}


def env(**overrides: Any) -> settings_module.Settings:
    return settings_module.Settings.from_dict(settings_dict(**overrides))


def spec(**hyperparameters: Any) -> dict[str, Any]:
    model = hyperparameters.pop("model", BASE["model"])
    return {**BASE, "model": model, "hyperparameters": hyperparameters}


def refused(raw: dict[str, Any], settings: settings_module.Settings) -> list[str]:
    # SpecError: what no environment allows (e.g. paths, lambda/spec/hp_paths.py); PreflightError: this environment's
    with pytest.raises((PreflightError, SpecError)) as info:
        prepare_run(raw, settings)
    return info.value.problems


def test_trust_remote_code_is_refused_by_default_for_hub_and_s3_models() -> None:
    for model in ("acme/bert-qa", S3_MODEL):
        problems = refused(spec(model=model, trust_remote_code=True), env())
        assert any(p.startswith("hyperparameters.trust_remote_code:") and "remote_code_hub_orgs" in p
                   for p in problems), problems


def test_trust_remote_code_needs_an_allowed_org_and_a_pinned_commit() -> None:
    allowed = env(remote_code_hub_orgs=["acme"])
    run = prepare_run(spec(trust_remote_code=True, model_revision=COMMIT), allowed)
    assert json.loads(code_policy_hp(run, "trust_remote_code")) is True
    problems = refused(spec(trust_remote_code=True, model_revision="main"), allowed)
    assert any(p.startswith("hyperparameters.model_revision:") and "40 hex" in p for p in problems)
    problems = refused(spec(model="evil/bert", trust_remote_code=True, model_revision=COMMIT), allowed)
    assert any("evil/bert" in p and "acme" in p for p in problems)
    # An S3 folder's code is whatever its last writer put there: never, even where orgs are allowed.
    problems = refused(spec(model=S3_MODEL, trust_remote_code=True, model_revision=COMMIT), allowed)
    assert any("S3 model" in p for p in problems)
    # AutoTokenizer would import a second repository's code.
    problems = refused(spec(trust_remote_code=True, model_revision=COMMIT, tokenizer_name_or_path="evil/tok"),
                       allowed)
    assert any(p.startswith("hyperparameters.tokenizer_name_or_path:") for p in problems)


def code_policy_hp(run: dict[str, Any], name: str) -> str:
    from hfsm_lambda.plan import job_requests

    return job_requests.training_request(run, env(remote_code_hub_orgs=["acme"]))["HyperParameters"][name]


@pytest.mark.parametrize("hyperparameters", [
    {"push_to_hub": True}, {"hub_model_id": "acme/out"}, {"hub_strategy": "every_save"},
    {"hub_private_repo": True}, {"hub_always_push": True}, {"hub_revision": "main"},
    {"trackio_space_id": "acme/metrics"},
])
def test_sending_the_model_to_the_hub_is_always_refused(hyperparameters: dict[str, Any]) -> None:
    problems = refused(spec(**hyperparameters), env(remote_code_hub_orgs=["acme"], allowed_report_to=["wandb"]))
    (name,) = hyperparameters
    assert any(p.startswith(f"hyperparameters.{name}:") and "Hub" in p for p in problems), problems


def test_push_to_hub_false_is_harmless() -> None:
    assert prepare_run(spec(push_to_hub=False), env())


@pytest.mark.parametrize(("value", "bad"), [("wandb", "wandb"), ("all", "all"), ("tensorboard,mlflow", "mlflow"),
                                            ("comet_ml", "comet_ml")])
def test_report_to_remote_services_needs_the_environment(value: Any, bad: str) -> None:
    problems = refused(spec(report_to=value), env())
    assert any(p.startswith("hyperparameters.report_to:") and bad in p for p in problems), problems


def test_report_to_local_or_allowed_services_passes() -> None:
    assert prepare_run(spec(report_to="tensorboard"), env())
    assert prepare_run(spec(report_to="none"), env())
    assert prepare_run(spec(report_to="mlflow"), env(allowed_report_to=["mlflow"]))


@pytest.mark.parametrize("value", ["acme/gen-config", "https://example.com/generation_config.json"])
def test_remote_generation_config_is_refused(value: str) -> None:
    summ = {**spec(generation_config=value), "task": "summarization"}
    assert any(p.startswith("hyperparameters.generation_config:") for p in refused(summ, env()))


def test_local_generation_config_passes() -> None:
    summ = {**spec(generation_config="/opt/ml/input/data/model/generation_config.json"), "task": "summarization"}
    assert prepare_run(summ, env())


def test_hub_downloads_are_refused_without_internet() -> None:
    offline = env(internet_access=False)
    problems = refused(spec(model=S3_MODEL, tokenizer_name_or_path="acme/tok", dataset_name="acme/data"), offline)
    assert {p.split(":")[0] for p in problems} >= {"hyperparameters.tokenizer_name_or_path",
                                                   "hyperparameters.dataset_name"}
    # A local path is fine.
    assert prepare_run(spec(model=S3_MODEL, tokenizer_name_or_path="/opt/ml/input/data/tokenizer"), offline)


def test_a_job_that_needs_no_internet_runs_network_isolated_with_its_code_as_a_channel() -> None:
    from hfsm_lambda.plan import job_requests

    settings = env()
    run = prepare_run(spec(model=S3_MODEL), settings)
    request = job_requests.training_request(run, settings)
    assert request["EnableNetworkIsolation"] is True
    channels = {c["ChannelName"]: c for c in request["InputDataConfig"]}
    assert channels["code"]["DataSource"]["S3DataSource"]["S3Uri"] == \
        f"{settings.code_s3_prefix}sourcedir.tar.gz"
    assert json.loads(request["HyperParameters"]["sagemaker_submit_directory"]) == \
        "/opt/ml/input/data/code/sourcedir.tar.gz"
    assert sagemaker_request_errors("CreateTrainingJob", request) == []
    for needs in (spec(), spec(model=S3_MODEL, report_to="mlflow"), spec(model=S3_MODEL, dataset_name="a/b"),
                  spec(model=S3_MODEL, tokenizer_name_or_path="acme/tok")):
        hp = needs["hyperparameters"]
        assert hyperparameters.needs_internet(needs["model"], hp), needs
    hub = job_requests.training_request(prepare_run(spec(), settings), settings)
    assert hub["EnableNetworkIsolation"] is False and "code" not in {c["ChannelName"] for c in
                                                                      hub["InputDataConfig"]}
    assert json.loads(hub["HyperParameters"]["sagemaker_submit_directory"]).startswith("s3://")
