"""The outputs the emulator resolves name the resources the settings name (one deployment, two views)."""

from __future__ import annotations


def test_outputs_and_settings_name_the_same_resources(pipeline) -> None:
    dep = pipeline.dep
    assert (dep.data_bucket, dep.artifacts_bucket, dep.topic_arn) == (
        dep.settings["data_bucket"], dep.settings["artifacts_bucket"], dep.settings["topic_arn"])
    assert dep.data_bucket in dep.buckets and dep.artifacts_bucket in dep.buckets
    names = {arn: name for name, arn in dep.state_machines.items()}
    assert names[dep.fine_tune_arn].endswith("-fine-tune") and names[dep.tokenizer_arn].endswith("-tokenizer")
    assert set(dep.settings["state_machine_arns"]) == {dep.fine_tune_arn, dep.tokenizer_arn}
