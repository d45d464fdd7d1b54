"""The tracking server (cdk.json `tracking`: on in prod, off in dev): SageMaker's managed MLflow with its artifact
store under the artifacts bucket's mlflow/ prefix, its own role limited to that prefix and the key, automatic model
registration off; the SageMaker Experiments interface endpoint in the network stack whose policy admits this
server only; the job role and Finish's role may log to this server only; the Lambdas' settings name it."""

from __future__ import annotations

import json

from testkit.synth import Synthesized, as_list, policy_statements, resources, sagemaker_role

from stacks import names
from stacks.storage_stack import bucket_name
from stacks.tracking_server import FINISH_ACTIONS, JOB_ACTIONS, PREPARE_ACTIONS


def _settings_text(s: Synthesized) -> str:
    """The Lambdas' PIPELINE_SETTINGS as the template holds it (JSON text, or a join around the key's ARN)."""
    fn = next(f for f in resources(s.template_json("pipeline"), "AWS::Lambda::Function").values()
              if "PIPELINE_SETTINGS" in (f["Properties"].get("Environment") or {}).get("Variables", {}))
    return json.dumps(fn["Properties"]["Environment"]["Variables"]["PIPELINE_SETTINGS"])


def _mlflow_statements(template: dict) -> list[tuple[str, dict]]:
    return [(lid, st) for lid, st in policy_statements(template)
            if any(str(a).startswith("sagemaker-mlflow") for a in as_list(st.get("Action")))]


def test_prod_has_one_tracking_server_on_its_own_prefix_without_model_registration(prod: Synthesized) -> None:
    pipe = prod.template_json("pipeline")
    (server,) = resources(pipe, "AWS::SageMaker::MlflowTrackingServer").values()
    props = server["Properties"]
    artifacts = bucket_name(prod.config, "artifacts")
    assert props["ArtifactStoreUri"] == f"s3://{artifacts}/mlflow/"
    assert props["AutomaticModelRegistration"] is False and props["TrackingServerSize"] == "Small"
    assert props["TrackingServerName"] == names.tracking_server_name(prod.config)
    role_id = props["RoleArn"]["Fn::GetAtt"][0]
    role = pipe["Resources"][role_id]["Properties"]
    assert role["AssumeRolePolicyDocument"]["Statement"][0]["Principal"] == {"Service": "sagemaker.amazonaws.com"}
    statements = [st for lid, st in policy_statements(pipe) if role_id in json.dumps(pipe["Resources"][lid])]
    resources_named = {str(r) for st in statements for r in as_list(st["Resource"])}
    objects = {r for r in resources_named if r.startswith("arn:aws:s3:::") and "/" in r}
    assert objects == {f"arn:aws:s3:::{artifacts}/mlflow/*"}  # no other prefix, no other bucket
    listing = next(st for st in statements if "s3:ListBucket" in as_list(st["Action"]))
    assert listing["Condition"] == {"StringLike": {"s3:prefix": ["mlflow/*"]}}


def test_prod_endpoint_admits_this_tracking_server_only(prod: Synthesized) -> None:
    net = prod.template_json("network")
    experiments = [e for e in resources(net, "AWS::EC2::VPCEndpoint").values()
                   if "experiments" in json.dumps(e["Properties"]["ServiceName"])]
    (endpoint,) = experiments
    assert endpoint["Properties"]["VpcEndpointType"] == "Interface" and endpoint["Properties"]["PrivateDnsEnabled"]
    (statement,) = endpoint["Properties"]["PolicyDocument"]["Statement"]
    assert sorted(as_list(statement["Action"])) == sorted(JOB_ACTIONS)  # no sagemaker-mlflow:* either
    assert statement["Resource"] == names.tracking_server_arn(prod.config)
    assert statement["Condition"] == {"StringEquals": {"aws:PrincipalAccount": prod.config.account}}


def test_prod_job_role_and_finish_log_to_this_server_only(prod: Synthesized) -> None:
    pipe = prod.template_json("pipeline")
    arn = names.tracking_server_arn(prod.config)
    found = _mlflow_statements(pipe)
    assert found and all(st["Resource"] == arn and st["Effect"] == "Allow" for _, st in found)
    job_role, job_statements = sagemaker_role(pipe)
    assert any(set(JOB_ACTIONS) <= set(as_list(st.get("Action"))) and st["Resource"] == arn
               for st in job_statements)
    finish_actions = {a for lid, st in found if "finish" in lid.lower() for a in as_list(st["Action"])}
    assert finish_actions == set(FINISH_ACTIONS)
    prepare_actions = {a for lid, st in found if "prepare" in lid.lower() for a in as_list(st["Action"])}
    assert prepare_actions == set(PREPARE_ACTIONS)  # opens the run: no logging, no ending
    assert not {"sagemaker-mlflow:LogBatch", "sagemaker-mlflow:UpdateRun"} & prepare_actions
    holders = {lid for lid, _ in found}
    assert [lid for lid in holders if "finish" in lid.lower()], holders
    # Prepare opens the run, Finish ends it, the job role logs: no other handler may reach the server
    assert all("finish" in lid.lower() or "prepare" in lid.lower() or job_role in json.dumps(pipe["Resources"][lid])
               or lid == job_role for lid in holders), holders
    assert json.dumps(f'"tracking_uri":"{arn}"')[1:-1] in _settings_text(prod)


def test_dev_has_no_tracking_server_endpoint_or_permission(dev: Synthesized) -> None:
    pipe, net = dev.template_json("pipeline"), dev.template_json("network")
    assert not resources(pipe, "AWS::SageMaker::MlflowTrackingServer")
    assert not any("experiments" in json.dumps(e["Properties"]["ServiceName"])
                   for e in resources(net, "AWS::EC2::VPCEndpoint").values())
    assert not _mlflow_statements(pipe)
    assert json.dumps('"tracking_uri":""')[1:-1] in _settings_text(dev)


def test_jobs_may_upload_tensorboard_event_files(any_env: Synthesized) -> None:
    _, statements = sagemaker_role(any_env.template_json("pipeline"))
    artifacts = bucket_name(any_env.config, "artifacts")
    upload = next(st for st in statements if st.get("Sid") == "WriteModelsAndOutputs")
    assert f"arn:aws:s3:::{artifacts}/tensorboard/*" in as_list(upload["Resource"])
    assert "s3:DeleteObject" not in as_list(upload["Action"])
