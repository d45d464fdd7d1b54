"""Storage stack, built alone: KMS key with rotation, three locked-down buckets, lifecycle rules, retention per
environment."""

from __future__ import annotations

from aws_cdk.assertions import Template
from testkit.constructs import Built, bare_app, env_config, env_fixtures
from testkit.synth import resources

from stacks.storage_stack import StorageStack


def _build(name: str) -> Built:
    config = env_config(name)
    app, env = bare_app(config)
    stack = StorageStack(app, "Storage", config=config, env=env)
    return Built(config, stack, Template.from_stack(stack))


dev, prod, any_env = env_fixtures(_build)


def buckets(s: Built) -> dict[str, dict]:
    return resources(s.json, "AWS::S3::Bucket")


def bucket(s: Built, logical_prefix: str) -> dict:
    (props,) = [b["Properties"] for lid, b in buckets(s).items() if lid.startswith(logical_prefix)]
    return props


def test_customer_managed_key_with_rotation(any_env: Built) -> None:
    any_env.template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
    any_env.template.has_resource_properties("AWS::KMS::Alias",
                                                         {"AliasName": f"alias/{any_env.config.prefix}"})


def test_every_bucket_blocks_public_access_logs_and_encrypts(any_env: Built) -> None:
    assert len(buckets(any_env)) == 3
    (access_logs,) = [lid for lid in buckets(any_env) if lid.startswith("AccessLogs")]
    for lid, b in buckets(any_env).items():
        p = b["Properties"]
        assert p["PublicAccessBlockConfiguration"] == {
            "BlockPublicAcls": True, "BlockPublicPolicy": True, "IgnorePublicAcls": True,
            "RestrictPublicBuckets": True}, lid
        assert p["BucketEncryption"]["ServerSideEncryptionConfiguration"], lid
        if lid != access_logs:
            assert p["LoggingConfiguration"]["DestinationBucketName"] == {"Ref": access_logs}, lid


def test_data_and_artifacts_use_sse_kms_with_bucket_keys(any_env: Built) -> None:
    for name in ("Data", "Artifacts"):
        rule = bucket(any_env, name)["BucketEncryption"]["ServerSideEncryptionConfiguration"][0]
        assert rule["BucketKeyEnabled"] is True
        assert rule["ServerSideEncryptionByDefault"]["SSEAlgorithm"] == "aws:kms"
        assert "KMSMasterKeyID" in rule["ServerSideEncryptionByDefault"]


def test_every_bucket_denies_plain_http(any_env: Built) -> None:
    policies = resources(any_env.json, "AWS::S3::BucketPolicy")
    tls_denied = set()
    for p in policies.values():
        for st in p["Properties"]["PolicyDocument"]["Statement"]:
            if st["Effect"] == "Deny" and st.get("Condition") == {"Bool": {"aws:SecureTransport": "false"}}:
                tls_denied.add(p["Properties"]["Bucket"]["Ref"])
    assert tls_denied == set(buckets(any_env))


def test_data_bucket_versioned_and_sends_events_to_eventbridge(any_env: Built) -> None:
    data = bucket(any_env, "Data")
    assert data["VersioningConfiguration"] == {"Status": "Enabled"}
    assert data["NotificationConfiguration"]["EventBridgeConfiguration"]["EventBridgeEnabled"] is True
    assert data["BucketName"] == f"{any_env.config.prefix}-data-{any_env.config.account}-{any_env.config.region}"


def test_artifacts_lifecycle(any_env: Built) -> None:
    rules = {r["Id"]: r for r in bucket(any_env, "Artifacts")["LifecycleConfiguration"]["Rules"]}
    assert rules["expire-checkpoints"]["Prefix"] == "checkpoints/"
    assert rules["expire-checkpoints"]["ExpirationInDays"] == any_env.config.checkpoint_expiry_days
    assert rules["abort-incomplete-uploads"]["AbortIncompleteMultipartUpload"] == {"DaysAfterInitiation": 7}
    assert rules["expire-old-versions"]["NoncurrentVersionExpiration"]["NoncurrentDays"] == \
        any_env.config.noncurrent_version_expiry_days
    assert bucket(any_env, "Artifacts")["VersioningConfiguration"] == {"Status": "Enabled"}


def test_prod_retains_buckets_and_key_dev_deletes(dev: Built, prod: Built) -> None:
    for s, policy in ((prod, "Retain"), (dev, "Delete")):
        t = s.json
        for lid, res in t["Resources"].items():
            if res["Type"] in ("AWS::S3::Bucket", "AWS::KMS::Key"):
                assert res.get("DeletionPolicy") == policy, (s.config.name, lid)
