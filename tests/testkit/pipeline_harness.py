"""Harness for running the synthesized state machines in moto with the Lambda code in-process and SageMaker
job statuses scripted per job (what AWS would report), so every path of the pipeline can be driven offline."""

from __future__ import annotations

import copy
import json
import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import boto3
from moto.core.exceptions import JsonRESTError
from moto.core.responses import EmptyResult
from moto.sagemaker.models import SageMakerModelBackend
from moto.sagemaker.responses import SageMakerResponse

from cloud_assembly.reader import CloudAssembly
from local_mode.aws.emulator import Deployment, Emulator

COMPLETED = {"TrainingJobStatus": "Completed", "SecondaryStatus": "Completed", "BillableTimeInSeconds": 600,
             "TrainingTimeInSeconds": 1800,
             "FinalMetricDataList": [{"MetricName": "train_loss", "Value": 0.42},
                                     {"MetricName": "eval_accuracy", "Value": 0.91}]}
RUNNING = {"TrainingJobStatus": "InProgress", "SecondaryStatus": "Training"}
INTERRUPTED = {"TrainingJobStatus": "InProgress", "SecondaryStatus": "Interrupted"}
MAX_WAIT = {"TrainingJobStatus": "Stopped", "SecondaryStatus": "MaxWaitTimeExceeded",
            "FailureReason": "MaxWaitTimeExceeded: spot capacity did not become available in time"}
STOPPING = {"TrainingJobStatus": "Stopping", "SecondaryStatus": "Stopping"}
STOPPED = {"TrainingJobStatus": "Stopped", "SecondaryStatus": "Stopped"}
FAILED = {"TrainingJobStatus": "Failed", "SecondaryStatus": "Failed",
          "FailureReason": "AlgorithmError: ExecuteUserScriptError: CUDA out of memory"}


@dataclass
class ScriptedSageMaker:
    """Per training attempt (0, 1, ...) a list of describe results; the last one repeats."""

    attempts: list[list[dict[str, Any]]] = field(default_factory=lambda: [[RUNNING, COMPLETED]])
    refuse_creates: list[tuple[str, str]] = field(default_factory=list)  # (error code, message), in order
    refused: list[str] = field(default_factory=list)
    created: list[dict[str, Any]] = field(default_factory=list)
    describes: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    # Called before each describe with (attempt, describe index): e.g. to upload checkpoints or move a clock.
    on_describe: Callable[[int, int], None] | None = None
    after_stop: list[dict[str, Any]] = field(default_factory=lambda: [STOPPING, STOPPED])
    stopped: list[str] = field(default_factory=list)
    uploads: dict[str, tuple[datetime, datetime]] = field(default_factory=dict)  # job -> its upload window

    @contextmanager
    def installed(self):  # noqa: ANN201
        orig_create, orig_describe = SageMakerModelBackend.create_training_job, SageMakerModelBackend.describe_training_job
        script = self

        def create(backend: Any, *args: Any, **kwargs: Any) -> Any:
            if script.refuse_creates:
                code, message = script.refuse_creates.pop(0)
                script.refused.append(code)
                raise JsonRESTError(code, message)
            script.created.append(kwargs or {"args": args})
            return orig_create(backend, *args, **kwargs)

        def describe(backend: Any, name: str) -> dict[str, Any]:
            out = orig_describe(backend, name)
            names = [c.get("training_job_name") for c in script.created]
            attempt = names.index(name) if name in names else 0
            steps = script.attempts[min(attempt, len(script.attempts) - 1)]
            i = script.describes[name]
            script.describes[name] += 1
            if script.on_describe is not None:
                script.on_describe(attempt, i)
            if name in script.stopped:  # what SageMaker reports after StopTrainingJob
                done = script.stopped.count(name) - 1 + script.describes[f"stop:{name}"]
                script.describes[f"stop:{name}"] += 1
                return {**out, **script.after_stop[min(done, len(script.after_stop) - 1)]}
            result = {**out, **steps[min(i, len(steps) - 1)]}
            if result["TrainingJobStatus"] == "Completed":  # what SageMaker uploads at the end of the job, once
                if name not in script.uploads:
                    bucket, key = result["ModelArtifacts"]["S3ModelArtifacts"].removeprefix("s3:/" + "/").split("/", 1)
                    started = datetime.now(UTC)
                    boto3.client("s3", region_name=backend.region_name).put_object(Bucket=bucket, Key=key,
                                                                                   Body=b"model")
                    script.uploads[name] = (started, datetime.now(UTC))
                started, ended = script.uploads[name]
                result["TrainingEndTime"] = ended
                result["SecondaryStatusTransitions"] = [*(result.get("SecondaryStatusTransitions") or []), {
                    "Status": "Uploading", "StartTime": started, "EndTime": ended,
                    "StatusMessage": "Uploading generated training model"}]
            return result

        def stop_backend(backend: Any, training_job_name: str) -> None:
            script.stopped.append(training_job_name)

        def stop_response(response: Any) -> Any:
            response.sagemaker_backend.stop_training_job(response._get_param("TrainingJobName"))
            return EmptyResult()

        originals = {(SageMakerModelBackend, "stop_training_job"): getattr(SageMakerModelBackend, "stop_training_job",
                                                                          None),
                     (SageMakerResponse, "stop_training_job"): getattr(SageMakerResponse, "stop_training_job", None)}
        SageMakerModelBackend.create_training_job = create
        SageMakerModelBackend.describe_training_job = describe
        SageMakerModelBackend.stop_training_job = stop_backend
        SageMakerResponse.stop_training_job = stop_response
        try:
            yield self
        finally:
            SageMakerModelBackend.create_training_job = orig_create
            SageMakerModelBackend.describe_training_job = orig_describe
            for (cls, attr), original in originals.items():
                if original is None:
                    delattr(cls, attr)
                else:
                    setattr(cls, attr, original)


class Pipeline:
    """A deployed emulation of the dev app with helpers to start runs and read what happened."""

    def __init__(self, outdir: Path, **settings: Any) -> None:
        self.emulator = Emulator(CloudAssembly(outdir), settings_overrides={"poll_seconds": 1, **settings})
        self.dep: Deployment = self.emulator.deploy()
        self.region = self.dep.region
        self.s3 = boto3.client("s3", region_name=self.region)
        self.sfn = boto3.client("stepfunctions", region_name=self.region)
        self.sm = boto3.client("sagemaker", region_name=self.region)

    def put_dataset(self, prefix: str, n_objects: int = 4) -> None:
        for i in range(n_objects):
            self.s3.put_object(Bucket=self.dep.data_bucket, Key=f"{prefix}part-{i:03d}.jsonl",
                               Body=b'{"text": "a b c", "label": "x"}\n{"text": "c d", "label": "y"}\n')

    def start(self, spec: dict[str, Any], name: str = "run") -> str:
        return self.sfn.start_execution(stateMachineArn=self.dep.fine_tune_arn, name=name,
                                        input=json.dumps({"spec": spec}))["executionArn"]

    def wait(self, arn: str, timeout: float = 240) -> dict[str, Any]:
        deadline = time.time() + timeout
        while time.time() < deadline:
            desc = self.sfn.describe_execution(executionArn=arn)
            if desc["status"] != "RUNNING":
                return desc
            time.sleep(0.2)
        raise TimeoutError(f"{arn} still running after {timeout}s")

    def history(self, arn: str) -> list[dict[str, Any]]:
        return self.sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]

    def entered_states(self, arn: str) -> list[str]:
        return [e["stateEnteredEventDetails"]["name"] for e in self.history(arn)
                if "stateEnteredEventDetails" in e]

    def published(self) -> list[dict[str, Any]]:
        from moto.sns.models import sns_backends
        backend = sns_backends[self.dep.account][self.region]
        return [{"message_id": m[0], "message": m[1], "subject": m[2] or "", "attributes": m[3] or {}}
                for topic in backend.topics.values() for m in topic.sent_notifications]

    def model_packages(self) -> list[dict[str, Any]]:
        group = self.dep.outputs["ModelPackageGroupName"]
        return self.sm.list_model_packages(ModelPackageGroupName=group)["ModelPackageSummaryList"]


SPEC: dict[str, Any] = {
    "version": 1,
    "name": "tickets",
    "task": "text-classification",
    # dev has no NAT gateway: models come from S3 (a Hub id fails pre-flight)
    "model": "s3://hfsm-dev-data-111111111111-us-east-1/base-models/roberta/",
    "data": {"train": {"s3": "datasets/tickets/train/", "distribution": "ShardedByS3Key"},
             "validation": {"s3": "datasets/tickets/validation/"}},
    "compute": {"instance_type": "ml.g5.2xlarge", "instance_count": 2},
    "distribution": {"strategy": "ddp"},
    "spot": {"enabled": True},
    "max_runtime_seconds": 3600,
    "fallback": {"options": [{"spot": False}]},
    "hyperparameters": {"num_train_epochs": 1, "label_column": "label"},
}


def spec(**changes: Any) -> dict[str, Any]:
    out = copy.deepcopy(SPEC)
    out.update(changes)
    return out


def with_data(p: Pipeline) -> Pipeline:
    p.put_dataset("datasets/tickets/train/", 4)
    p.put_dataset("datasets/tickets/validation/", 1)
    p.s3.put_object(Bucket=p.dep.data_bucket, Key="base-models/roberta/config.json", Body=b"{}")
    return p
