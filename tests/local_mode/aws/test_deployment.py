"""The emulated deployment names its resources by the stacks' outputs, not by matching resource names."""

from __future__ import annotations

import pytest

from local_mode.aws.emulator import OUTPUTS, Deployment

ARN = "arn:aws:states:us-east-1:111111111111:stateMachine:{}"


def test_resources_come_from_the_outputs_whatever_their_names() -> None:
    # Names that a suffix match would get wrong: the outputs decide.
    machines = {"x-fine-tune": ARN.format("x-fine-tune"), "a": ARN.format("a"), "b": ARN.format("b")}
    dep = Deployment(account="111111111111", region="us-east-1", state_machines=machines,
                     outputs={"FineTuneStateMachineArn": machines["a"], "TokenizerStateMachineArn": machines["b"],
                              "DataBucketName": "d", "ArtifactsBucketName": "art", "NotificationTopicArn": "t"})
    assert (dep.fine_tune_arn, dep.tokenizer_arn) == (machines["a"], machines["b"])
    assert (dep.data_bucket, dep.artifacts_bucket, dep.topic_arn) == ("d", "art", "t")


def test_a_missing_output_is_named() -> None:
    dep = Deployment(account="111111111111", region="us-east-1", outputs={"CodeS3Prefix": "s3://x/code/"})
    with pytest.raises(KeyError, match="no output FineTuneStateMachineArn .*make synth"):
        dep.fine_tune_arn  # noqa: B018 - the property raises


def test_the_pipeline_stack_has_every_output_local_mode_reads(dev_outdir) -> None:
    from cloud_assembly.reader import CloudAssembly

    outputs = {name for stack in CloudAssembly(dev_outdir).stacks for name in stack.template.get("Outputs", {})}
    assert set(OUTPUTS.values()) <= outputs, set(OUTPUTS.values()) - outputs
