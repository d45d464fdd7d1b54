"""The two state machines, built alone in a bare stack (Lambda functions imported by ARN, a bare key): types,
logging, tracing, timeouts, retry/catch on every task and the wiring of the choice states."""

from __future__ import annotations

import json

import aws_cdk as cdk
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk.assertions import Template
from testkit.constructs import Built, bare_app, env_config, env_fixtures
from testkit.synth import resources

from stacks.state_machines import PipelineStateMachines

HANDLERS = ("prepare", "start_processing", "start_training", "check_job", "plan_fallback", "finish", "notify_failure")


def _build(name: str) -> Built:
    config = env_config(name)
    app, env = bare_app(config)
    stack = cdk.Stack(app, "Machines", env=env)
    functions = {h: lambda_.Function.from_function_arn(
        stack, f"Fn{h}", f"arn:aws:lambda:{config.region}:{config.account}:function:{config.prefix}-{h}")
        for h in HANDLERS}
    machines = PipelineStateMachines(stack, "StateMachines", config=config, key=kms.Key(stack, "Key"),
                                     functions=functions)
    return Built(config, machines, Template.from_stack(stack))


_, _, any_env = env_fixtures(_build)


def _definitions(s: Built) -> dict[str, dict]:
    out = {}
    for lid, m in resources(s.json, "AWS::StepFunctions::StateMachine").items():
        body = m["Properties"]["DefinitionString"]
        parts = body["Fn::Join"][1] if isinstance(body, dict) else [body]
        text = "".join(p if isinstance(p, str) else "ARN" for p in parts)  # tokens (ARNs) -> "ARN"
        out[lid] = json.loads(text)
    return out


def _wiring(state: dict) -> dict:
    """A Choice state as {condition: next state} plus {"Default": next}; conditions as (operator, variable, value)."""
    out = {}
    for c in state["Choices"]:
        (op,) = [k for k in c if k not in ("Variable", "Next")]
        out[(op, c["Variable"], c[op])] = c["Next"]
    out["Default"] = state.get("Default")
    return out


def test_state_machines_standard_logged_traced_and_bounded(any_env: Built) -> None:
    machines = resources(any_env.json, "AWS::StepFunctions::StateMachine")
    assert len(machines) == 2
    for m in machines.values():
        p = m["Properties"]
        assert p["StateMachineType"] == "STANDARD"
        assert p["TracingConfiguration"] == {"Enabled": True}
        assert p["LoggingConfiguration"]["Level"] == "ALL"
        assert p["LoggingConfiguration"]["IncludeExecutionData"] is True
    groups = resources(any_env.json, "AWS::Logs::LogGroup").values()
    assert groups and all("KmsKeyId" in g["Properties"] for g in groups)


def test_definitions_retry_catch_timeout_on_every_task(any_env: Built) -> None:
    for lid, d in _definitions(any_env).items():
        assert d["TimeoutSeconds"] > 0, lid
        tasks = {n: st for n, st in d["States"].items() if st["Type"] == "Task"}
        assert tasks
        for name, st in tasks.items():
            assert st.get("TimeoutSeconds"), (lid, name)
            assert st.get("Catch"), (lid, name)
            if "lambda" in json.dumps(st).lower() or st["Resource"] == "ARN":
                errors = {e for r in st["Retry"] for e in r["ErrorEquals"]}
                assert {"Lambda.ServiceException", "Lambda.TooManyRequestsException", "ThrottlingException",
                        "ResourceLimitExceeded"} <= errors, (lid, name)
                assert all(r.get("BackoffRate", 1) >= 2 for r in st["Retry"])
        fail = [st for st in d["States"].values() if st["Type"] == "Fail"]
        assert fail and fail[0]["ErrorPath"] == "$.error.Error" and fail[0]["CausePath"] == "$.error.Cause"


def _status(state: str) -> tuple[str, str, str]:
    return ("StringEquals", "$.status.state", state)


def test_fine_tune_runs_tokenizer_stage_and_loops_on_jobs(any_env: Built) -> None:
    defs = list(_definitions(any_env).values())
    fine = next(d for d in defs if "StartTraining" in d["States"])
    tok = next(d for d in defs if "StartTraining" not in d["States"])
    assert _wiring(fine["States"]["TokenizerStage?"]) == {
        ("BooleanEquals", "$.tokenizer_enabled", True): "StartTokenizerMap", "Default": "StartTraining"}
    assert _wiring(fine["States"]["TokenizerReduceStatus"]) == {
        _status("running"): "WaitTokenizerReduce", _status("completed"): "StartTraining",
        "Default": "TokenizerReduceFailed"}
    assert set(tok["States"]) < set(fine["States"]) | {"TokenizerReady"}
    # No state machine skips Prepare: both start with it, whatever the input holds.
    assert fine["StartAt"] == tok["StartAt"] == "Prepare"
    assert not any(s["Type"] == "Choice" and "$.run" in json.dumps(s) for d in defs for s in d["States"].values())
    assert fine["States"]["WaitTraining"]["SecondsPath"] == "$.poll_seconds"
    assert _wiring(fine["States"]["TrainingStatus"]) == {
        _status("running"): "WaitTraining", _status("completed"): "Finish", _status("retryable"): "PlanFallback",
        "Default": "TrainingFailed"}
    assert fine["States"]["PlanFallback"]["Next"] == "StartTraining"
    for machine in (fine, tok):
        assert _wiring(machine["States"]["TokenizerMapStatus"]) == {
            _status("running"): "WaitTokenizerMap", _status("completed"): "StartTokenizerReduce",
            "Default": "TokenizerMapFailed"}
    assert _wiring(tok["States"]["TokenizerReduceStatus"]) == {
        _status("running"): "WaitTokenizerReduce", _status("completed"): "TokenizerReady",
        "Default": "TokenizerReduceFailed"}
