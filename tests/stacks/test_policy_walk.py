"""Every policy statement of every synthesized template, against the calls each principal makes.

Identity policies: each (principal, action, resource) granted must be a call in tests/testkit/principal_calls.py
(a grant nothing uses fails), and each call there must be granted (a missing grant fails); a call whose evidence
is the Lambda code or runctl must appear in that code. Resource policies (key, buckets, topic, queue, VPC
endpoints): each Allow is one of the known service deliveries or conditioned to this account.
"""

from __future__ import annotations

import fnmatch
import json
import re
from pathlib import Path

import pytest
from testkit.policy_walk import Grant, as_list, identity_grants, resource_statements
from testkit.principal_calls import expand, principal_calls, substitutions
from testkit.synth import Synthesized

REPO = Path(__file__).resolve().parents[2]
ENVS = ["dev", "prod", "dev_scratch_fsx"]


def _matches(pattern: str, resource: str) -> bool:
    return resource == "*" if pattern == "*" else fnmatch.fnmatchcase(resource, pattern)


def _table(s: Synthesized) -> dict[str, list[tuple[str, str, str]]]:
    subs = substitutions(s.config)
    raw = principal_calls(fsx=s.config.fsx.enabled,
                          create_sagemaker_log_groups=not s.config.manage_sagemaker_log_groups,
                          tracking=s.config.tracking.enabled)
    return {expand(p, subs): [(a, expand(r, subs), why) for a, r, why in calls] for p, calls in raw.items()}


def _grants(s: Synthesized) -> list[Grant]:
    return [g for name in ("storage", "network", "pipeline") for g in identity_grants(name, s.template_json(name))]


@pytest.fixture(params=ENVS)
def env(request: pytest.FixtureRequest) -> Synthesized:
    return request.getfixturevalue(request.param)


def test_every_grant_is_a_call_its_principal_makes(env: Synthesized) -> None:
    table = _table(env)
    unused = []
    for g in _grants(env):
        assert g.effect == "Allow", g
        calls = table.get(g.principal)
        assert calls is not None, f"{g.principal}: a principal the table does not know ({g.template}/{g.policy})"
        if not any(a == g.action and _matches(r, g.resource) for a, r, _ in calls):
            unused.append(f"{g.principal}: {g.action} on {g.resource} (sid {g.sid})")
    assert unused == [], "grants nothing uses:\n" + "\n".join(unused)


def test_every_call_is_granted(env: Synthesized) -> None:
    grants = _grants(env)
    missing = []
    for principal, calls in _table(env).items():
        held = [g for g in grants if g.principal == principal]
        for action, pattern, _ in calls:
            if not any(g.action == action and _matches(pattern, g.resource) for g in held):
                missing.append(f"{principal}: {action} on {pattern}")
    assert missing == [], "calls with no grant:\n" + "\n".join(missing)


def test_code_evidence_is_in_the_code(dev: Synthesized) -> None:
    lambda_dir = REPO / "lambda"
    sources = {".".join(p.relative_to(lambda_dir).with_suffix("").parts): p.read_text()
               for p in lambda_dir.rglob("*.py")}
    runctl = "\n".join(p.read_text() for d in ("runctl", "pipeline_runs") for p in sorted((REPO / d).glob("*.py")))
    for principal, calls in _table(dev).items():
        for action, _, why in calls:
            if why.startswith("code:"):
                module, method = why[5:].rsplit(".", 1)
                assert re.search(rf"\.{method}\b", sources[module]), (principal, action, why)
            elif why.startswith("runctl:"):
                method = why[7:]
                # runctl's paginated calls name the operation as a string.
                assert re.search(rf"\.{method}\b|\"{method}\"", runctl), (principal, action, why)
            else:
                assert why.startswith("sdk:") and len(why) > 20, (principal, action, why)


def test_every_create_grant_is_for_aws_resources_only(env: Synthesized) -> None:
    for g in _grants(env):
        if g.action == "kms:CreateGrant":
            assert g.statement.get("Condition", {}).get("Bool") == {"kms:GrantIsForAWSResource": "true"}, g
    for kind, _, st in resource_statements("storage", env.template_json("storage")):
        if kind == "AWS::KMS::Key" and "kms:CreateGrant" in as_list(st["Action"]):
            assert st["Condition"]["Bool"] == {"kms:GrantIsForAWSResource": "true"}, st


def _principal(st: dict) -> str:
    return json.dumps(st.get("Principal"), sort_keys=True)


def test_key_policy_is_explicit_and_conditioned(env: Synthesized) -> None:
    keys = [r for r in env.template_json("storage")["Resources"].values() if r["Type"] == "AWS::KMS::Key"]
    assert len(keys) == 1
    statements = keys[0]["Properties"]["KeyPolicy"]["Statement"]
    crypto = {"kms:Encrypt", "kms:Decrypt", "kms:GenerateDataKey", "kms:ReEncryptFrom", "kms:ReEncryptTo",
              "kms:GenerateDataKeyWithoutPlaintext", "kms:CreateGrant"}
    for st in statements:
        actions = set(as_list(st["Action"]))
        assert not any(a == "kms:*" or a.endswith("*") for a in actions), st
        if st["Sid"] == "KeyAdministration":
            assert not actions & crypto, "administrators manage the key but use it only through the statements below"
            continue
        conditions = st.get("Condition", {})
        via = conditions.get("StringEquals", {}).get("kms:ViaService")
        context = [k for op in conditions.values() for k in op if k.startswith("kms:EncryptionContext:")]
        source = conditions.get("StringEquals", {}).get("aws:SourceAccount")
        assert via or context or source == env.config.account, f"{st['Sid']}: unconditioned use of the key"
        if "AWS" in (st.get("Principal") or {}):
            assert via, f"{st['Sid']}: the account's principals use the key only through a named service"
    logs = next(st for st in statements if st["Sid"] == "CloudWatchLogs")
    arns = logs["Condition"]["ArnLike"]["kms:EncryptionContext:aws:logs:arn"]
    assert all(":log-group:*" not in a for a in arns), "only the project's own log groups"


# Allow statements of resource policies: (resource type, principal, action) -> why.
RESOURCE_ALLOWS = {
    ("AWS::S3::BucketPolicy", '{"Service": "logging.s3.amazonaws.com"}', "s3:PutObject"):
        "S3 server access log delivery into the access-log bucket (aws:SourceAccount/SourceArn conditions)",
    ("AWS::SNS::TopicPolicy", '{"Service": "budgets.amazonaws.com"}', "sns:Publish"): "the monthly budget's alerts",
    ("AWS::SNS::TopicPolicy", '{"Service": "cloudwatch.amazonaws.com"}', "sns:Publish"): "the failed-events alarm",
    ("AWS::SQS::QueuePolicy", '{"Service": "events.amazonaws.com"}', "sqs:SendMessage"):
        "EventBridge dead-letter delivery of the two rules' targets (aws:SourceArn = the rule)",
}


def test_resource_policy_allows_are_known_and_conditioned(env: Synthesized) -> None:
    for name in ("storage", "network", "pipeline"):
        for kind, stem, st in resource_statements(name, env.template_json(name)):
            if st.get("Effect") != "Allow" or kind == "AWS::KMS::Key":
                continue
            if kind == "AWS::EC2::VPCEndpoint":
                conditions = json.dumps(st.get("Condition", {}))
                layers = all("starport-layer-bucket" in json.dumps(r) for r in as_list(st["Resource"]))
                assert env.config.account in conditions or layers, (stem, st)
                continue
            for action in as_list(st["Action"]):
                assert (kind, _principal(st), action) in RESOURCE_ALLOWS, (kind, stem, st)
            assert "SourceArn" in json.dumps(st.get("Condition", {})) or "SourceAccount" in json.dumps(
                st.get("Condition", {})), (kind, stem, st)
