"""Security guardrails of the synthesized templates (issue 23): the service roles' trust policies and the key
policy's Lambda and FSx statements."""

from __future__ import annotations

from testkit.policy_walk import as_list
from testkit.synth import Synthesized, resources

from stacks import names


def test_service_roles_trust_only_this_account_s_resources(any_env: Synthesized) -> None:
    """Issue 23: the flow-logs role trusted the service with no condition, the state machine roles any state machine
    of the account (`stateMachine:*`). Every role a service other than Lambda assumes names the source account, and
    these two their source."""
    c = any_env.config
    want_source = {"vpc-flow-logs.amazonaws.com": f"arn:aws:ec2:{c.region}:{c.account}:vpc-flow-log/*"}
    machines = {f"arn:aws:states:{c.region}:{c.account}:stateMachine:{n}" for n in names.state_machine_names(c)}
    seen = set()
    for stack in ("storage", "network", "pipeline"):
        for lid, role in resources(any_env.template_json(stack), "AWS::IAM::Role").items():
            for st in role["Properties"]["AssumeRolePolicyDocument"]["Statement"]:
                service = (st.get("Principal") or {}).get("Service")
                if service in (None, "lambda.amazonaws.com"):
                    continue
                seen.add(service)
                condition = st.get("Condition", {})
                assert condition.get("StringEquals", {}).get("aws:SourceAccount") == c.account, (lid, st)
                source = condition.get("ArnLike", {}).get("aws:SourceArn")
                if service == "states.amazonaws.com":
                    assert source in machines, (lid, source)
                    machines.discard(source)
                elif service in want_source:
                    assert source == want_source[service], (lid, source)
    assert machines == set(), "each state machine's role trusts that machine only"
    assert {"vpc-flow-logs.amazonaws.com", "states.amazonaws.com", "sagemaker.amazonaws.com"} <= seen


def test_the_key_s_lambda_and_fsx_statements_are_pinned(dev: Synthesized, prod: Synthesized) -> None:
    """Issue 23: LambdaEnvironment named no encryption context (any function of the account through Lambda), and the
    FSx statement no caller account."""
    for s in (dev, prod):
        (key,) = resources(s.template_json("storage"), "AWS::KMS::Key").values()
        statements = {st["Sid"]: st for st in key["Properties"]["KeyPolicy"]["Statement"]}
        env = statements["LambdaEnvironment"]
        assert set(as_list(env["Action"])) == {"kms:Encrypt", "kms:Decrypt"}
        assert env["Condition"]["ArnLike"] == {"kms:EncryptionContext:aws:lambda:FunctionArn":
                                               f"arn:aws:lambda:{s.config.region}:{s.config.account}:function:"
                                               f"{s.config.prefix}-*"}
        assert env["Condition"]["StringEquals"]["kms:CallerAccount"] == s.config.account
        if "FsxDescribeKey" in statements:
            assert statements["FsxDescribeKey"]["Condition"]["StringEquals"]["kms:CallerAccount"] == s.config.account
    assert "FsxDescribeKey" in {st["Sid"] for st in next(iter(resources(prod.template_json("storage"),
                                                                       "AWS::KMS::Key").values()))[
        "Properties"]["KeyPolicy"]["Statement"]}, "prod has a PERSISTENT FSx file system"
    for fn in resources(dev.template_json("pipeline"), "AWS::Lambda::Function").values():
        name = fn["Properties"].get("FunctionName", f"{dev.config.prefix}-pipeline-<generated>")
        assert name.startswith(f"{dev.config.prefix}-"), name  # covered by the encryption-context pattern
