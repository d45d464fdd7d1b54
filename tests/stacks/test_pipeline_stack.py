"""Pipeline stack (whole app): its Lambdas and their settings, the state machines' roles, the S3 trigger, topic,
model registry and the training code's deployment prefix. One Lambda alone: constructs/test_pipeline_functions.py;
the code bundle: constructs/test_code_asset.py."""

from __future__ import annotations

import json
from pathlib import Path

from testkit.synth import Synthesized, as_list, policy_statements, resources

from hfsm_lambda import HANDLER_MODULE
from stacks.assets.code_asset import build_code_bundle

REPO = Path(__file__).resolve().parents[2]
HANDLERS = {"prepare", "start_processing", "start_training", "check_job", "plan_fallback", "finish",
            "notify_failure", "trigger", "stop_run_jobs"}


def pipe(s: Synthesized) -> dict:
    return s.template_json("pipeline")


def _settings(s: Synthesized) -> dict:
    fn = next(iter(resources(pipe(s), "AWS::Lambda::Function").values()))
    raw = fn["Properties"]["Environment"]["Variables"]["PIPELINE_SETTINGS"]
    return json.loads(s.project.pipeline.resolve(raw)) if isinstance(raw, str) else raw


def test_one_function_per_handler_with_tracing_and_own_role(any_env: Synthesized) -> None:
    fns = [f for f in resources(pipe(any_env), "AWS::Lambda::Function").values()
           if f["Properties"]["Handler"].startswith(f"{HANDLER_MODULE}.")]
    assert {f["Properties"]["Handler"].rsplit(".", 1)[1] for f in fns} == HANDLERS
    roles = [json.dumps(f["Properties"]["Role"]) for f in fns]
    assert len(set(roles)) == len(roles), "each Lambda has its own role"
    for f in fns:  # tracing and runtime (every function is a PipelineFunction): constructs/test_pipeline_functions.py
        assert "PIPELINE_SETTINGS" in f["Properties"]["Environment"]["Variables"]
        # Environment variables are encrypted with the project key (imported from the storage stack).
        assert "KmsKeyArn" in f["Properties"] and "Fn::ImportValue" in json.dumps(f["Properties"]["KmsKeyArn"])


def test_settings_carry_resolved_images_and_environment_limits(any_env: Synthesized) -> None:
    t = pipe(any_env)
    fn = next(f for f in resources(t, "AWS::Lambda::Function").values()
              if f["Properties"]["Handler"] == f"{HANDLER_MODULE}.start_training")
    raw = json.dumps(fn["Properties"]["Environment"]["Variables"]["PIPELINE_SETTINGS"])
    images = any_env.project.images
    for uri in (images.training, images.processing, images.inference):
        assert uri in raw
    assert "huggingface-pytorch-training:2.9.0-transformers5.3.0-gpu" in images.training
    assert f'\\"max_instance_count\\":{any_env.config.max_instance_count}' in raw
    assert '\\"instance_prices\\":{\\"ml.' in raw
    c = any_env.config
    for fragment in (f'\\"max_run_cost_usd\\":{c.max_run_cost_usd}',
                     f'\\"max_concurrent_runs\\":{c.max_concurrent_runs}', f'stateMachine:{c.prefix}-fine-tune', f'stateMachine:{c.prefix}-tokenizer',
                     '\\"remote_code_hub_orgs\\":[]'):
        assert fragment in raw, fragment
    assert f'\\"inter_container_encryption\\":{str(any_env.config.inter_container_encryption).lower()}' in raw


def test_every_pipeline_log_group_is_encrypted(any_env: Synthesized) -> None:
    """The state machines' own settings: constructs/test_state_machine_construct.py."""
    groups = [g for lid, g in resources(pipe(any_env), "AWS::Logs::LogGroup").items()]
    assert all("KmsKeyId" in g["Properties"] for g in groups)


def test_state_machine_roles_invoke_only_project_functions(any_env: Synthesized) -> None:
    t = pipe(any_env)
    machine_roles = {m["Properties"]["RoleArn"]["Fn::GetAtt"][0]
                     for m in resources(t, "AWS::StepFunctions::StateMachine").values()}
    for lid, st in policy_statements(t):
        roles = json.dumps(t["Resources"][lid]["Properties"].get("Roles", []))
        if not any(r in roles for r in machine_roles):
            continue
        if "lambda:InvokeFunction" in as_list(st["Action"]):
            for r in as_list(st["Resource"]):
                assert "Function" in json.dumps(r), r


def test_trigger_rule_matches_run_specs_in_data_bucket(any_env: Synthesized) -> None:
    (rule,) = [r for r in resources(pipe(any_env), "AWS::Events::Rule").values()
               if r["Properties"]["EventPattern"]["source"] == ["aws.s3"]]
    pattern = rule["Properties"]["EventPattern"]
    c = any_env.config
    assert pattern["source"] == ["aws.s3"] and pattern["detail-type"] == ["Object Created"]
    assert pattern["detail"]["bucket"]["name"] == [f"{c.prefix}-data-{c.account}-{c.region}"]
    assert pattern["detail"]["object"]["key"] == [{"wildcard": "runs/*.json"}]


def test_topic_encrypted_and_model_group(any_env: Synthesized) -> None:
    (topic,) = resources(pipe(any_env), "AWS::SNS::Topic").values()
    assert "KmsMasterKeyId" in topic["Properties"]
    subs = resources(pipe(any_env), "AWS::SNS::Subscription")
    assert len(subs) == len(any_env.config.notification_emails)
    any_env.templates["pipeline"].has_resource_properties(
        "AWS::SageMaker::ModelPackageGroup", {"ModelPackageGroupName": f"{any_env.config.prefix}-models"})


def test_code_deployed_under_content_addressed_prefix(any_env: Synthesized) -> None:
    (dep,) = resources(pipe(any_env), "Custom::CDKBucketDeployment").values()
    from stacks.assets import job_wheels

    wheels = job_wheels.wheel_files(job_wheels.wheel_dir())
    _, sha = build_code_bundle(REPO / "training_code", REPO / "build" / "code", wheels=wheels)
    assert dep["Properties"]["DestinationBucketKeyPrefix"] == f"code/{sha}/"
