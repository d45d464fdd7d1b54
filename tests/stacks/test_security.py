"""Security guardrails of the synthesized templates: the bucket policies (evaluated). Network egress and endpoint
policies: test_security_network.py; the failed-event path, the orphaned-job rule, the budget, log groups and the
code deployment role: test_security_pipeline.py; trust policies and the key policy: test_security_trust.py."""

from __future__ import annotations

import fnmatch
from typing import Any

from testkit.policy_walk import as_list, normalize
from testkit.synth import Synthesized, resources

from stacks import names


# --- a small evaluator for the buckets' Deny statements (the operators they use) ----------------------------
def _condition_holds(op: str, key: str, want: Any, context: dict[str, Any]) -> bool:
    wants = [normalize(w) for w in as_list(want)]
    have = context.get(key)
    if op == "Null":
        return (have is None) == (str(want).lower() == "true")
    if op in ("StringNotEquals", "ArnNotEquals"):
        return have is None or have not in wants  # negated operators hold when the key is absent
    if op in ("StringEquals", "ArnEquals"):
        return have in wants
    if op == "Bool":
        return str(have).lower() == str(want).lower()
    raise AssertionError(f"operator {op} not modelled")


def denied(statements: list[dict[str, Any]], action: str, resource: str, context: dict[str, Any]) -> list[str]:
    """Sids of the Deny statements that apply to this request."""
    out = []
    for st in statements:
        if st["Effect"] != "Deny":
            continue
        if not any(fnmatch.fnmatchcase(action, a) for a in as_list(st["Action"])):
            continue
        if not any(fnmatch.fnmatchcase(resource, normalize(r)) for r in as_list(st["Resource"])):
            continue
        if all(_condition_holds(op, k, v, context) for op, kv in st.get("Condition", {}).items()
               for k, v in kv.items()):
            out.append(st.get("Sid", "?"))
    return out


def bucket_statements(s: Synthesized, purpose: str) -> list[dict[str, Any]]:
    t = s.template_json("storage")
    bucket_lid = next(lid for lid, r in resources(t, "AWS::S3::Bucket").items()
                      if r["Properties"]["BucketName"].startswith(f"{s.config.prefix}-{purpose}-"))
    (policy,) = [r for r in resources(t, "AWS::S3::BucketPolicy").values()
                 if r["Properties"]["Bucket"] == {"Ref": bucket_lid}]
    return policy["Properties"]["PolicyDocument"]["Statement"]


def bucket_ref(purpose: str) -> str:
    """How the storage stack's own policies name the bucket (policy_walk.normalize of its GetAtt Arn)."""
    return {"data": "ref:Data", "artifacts": "ref:Artifacts"}[purpose]


def ctx(s: Synthesized, role: str, **extra: Any) -> dict[str, Any]:
    return {"aws:PrincipalArn": names.role_arn(s.config, role), "aws:SecureTransport": "true", **extra}


def test_only_run_submitters_can_write_run_specs(any_env: Synthesized) -> None:
    c = any_env.config
    data = bucket_statements(any_env, "data")
    spec = f"{bucket_ref('data')}/runs/imdb.json"
    assert denied(data, "s3:PutObject", spec, ctx(any_env, names.dataset_uploader_role_name(c))) == [
        "RunSpecsOnlyFromRunSubmitters"]
    assert denied(data, "s3:PutObject", spec, ctx(any_env, names.sagemaker_role_name(c)))
    assert denied(data, "s3:PutObject", spec, ctx(any_env, names.run_submitter_role_name(c))) == []
    dataset = f"{bucket_ref('data')}/datasets/imdb/train.jsonl"
    assert denied(data, "s3:PutObject", dataset, ctx(any_env, names.dataset_uploader_role_name(c))) == []


def test_uploads_must_use_the_project_key(any_env: Synthesized) -> None:
    c = any_env.config
    key = "ref:Key"  # the key's ARN, as the storage stack's bucket policies name it
    for purpose in ("data", "artifacts"):
        statements = bucket_statements(any_env, purpose)
        obj = f"{bucket_ref(purpose)}/datasets/x" if purpose == "data" else \
            f"{bucket_ref(purpose)}/outputs/r/x"
        who = ctx(any_env, names.function_role_name(c, "finish"))
        assert denied(statements, "s3:PutObject", obj, {**who, "s3:x-amz-server-side-encryption": "AES256"}) == [
            "DenyOtherEncryption"]
        other = {**who, "s3:x-amz-server-side-encryption": "aws:kms",
                 "s3:x-amz-server-side-encryption-aws-kms-key-id": "arn:aws:kms:us-east-1:999999999999:key/other"}
        assert denied(statements, "s3:PutObject", obj, other) == ["DenyOtherKeys"]
        ours = {**who, "s3:x-amz-server-side-encryption": "aws:kms",
                "s3:x-amz-server-side-encryption-aws-kms-key-id": key}
        assert denied(statements, "s3:PutObject", obj, ours) == []
        # No header at all: the bucket's default encryption (the project key) applies.
        assert denied(statements, "s3:PutObject", obj, who) == []
        # SSE-C (issue 23): a key the uploader keeps, with or without an SSE header next to it
        sse_c = {**who, "s3:x-amz-server-side-encryption-customer-algorithm": "AES256"}
        assert denied(statements, "s3:PutObject", obj, sse_c) == ["DenyCustomerProvidedKeys"]
        assert "DenyCustomerProvidedKeys" in denied(statements, "s3:PutObject", obj, {**ours, **sse_c})
        assert denied(statements, "s3:PutObject", obj, {**who, "aws:SecureTransport": "false"})


def test_registered_models_and_code_have_one_writer_each(any_env: Synthesized) -> None:
    c = any_env.config
    arts = bucket_statements(any_env, "artifacts")
    registered = f"{bucket_ref('artifacts')}/registry/run-1/job/model.tar.gz"
    for role in (names.sagemaker_role_name(c), names.run_submitter_role_name(c),
                 names.function_role_name(c, "notify_failure")):
        assert denied(arts, "s3:PutObject", registered, ctx(any_env, role)), role
        assert denied(arts, "s3:DeleteObject", registered, ctx(any_env, role)), role
    finish = ctx(any_env, names.function_role_name(c, "finish"))
    assert denied(arts, "s3:PutObject", registered, finish) == []
    assert denied(arts, "s3:DeleteObjectVersion", registered, finish), "no one deletes a registered version"
    claim = f"{bucket_ref('artifacts')}/claims/run-20250101000000-0123456789abcdef.json"  # issue 23
    for role in (names.sagemaker_role_name(c), names.run_submitter_role_name(c),
                 names.function_role_name(c, "finish")):
        assert denied(arts, "s3:PutObject", claim, ctx(any_env, role)), role
    prepare = ctx(any_env, names.function_role_name(c, "prepare"))
    assert denied(arts, "s3:PutObject", claim, prepare) == []
    assert denied(arts, "s3:DeleteObject", claim, prepare) and denied(arts, "s3:DeleteObjectVersion", claim, prepare)
    code = f"{bucket_ref('artifacts')}/code/0123/sourcedir.tar.gz"
    assert denied(arts, "s3:PutObject", code, ctx(any_env, names.sagemaker_role_name(c)))
    assert denied(arts, "s3:PutObject", code, ctx(any_env, names.code_deployment_role_name(c))) == []
