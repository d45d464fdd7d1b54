"""The local SageMaker: moto's SageMaker API, with training and processing jobs run on this machine.

Routing is a moto backend extension, not an endpoint override: the whole local mode runs in one process
under `moto.mock_aws()`, and the Lambda handlers' boto3 SageMaker calls already land in moto. install()
patches moto's SageMaker response/backend classes so that

- CreateTrainingJob / CreateProcessingJob let moto validate and record the job (ARN, tags, List*), then
  hand the request exactly as sent (the JSON body) to a job thread;
- DescribeTrainingJob / DescribeProcessingJob answer from the live job (status, secondary status and its
  transitions, FailureReason, metrics, billable and training seconds);
- StopTrainingJob (absent from moto) and StopProcessingJob stop the job's processes;
- List* keep moto's code: the job keeps moto's record's status fields current.

Responses go through moto's own serializer for botocore's output shapes, so boto3 parses them as it
parses AWS's. uninstall() stops running jobs and restores moto's classes.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from moto.core.responses import ActionResult, EmptyResult
from moto.sagemaker.exceptions import ResourceInUseException, ValidationError
from moto.sagemaker.models import FakeProcessingJob, FakeTrainingJob, SageMakerModelBackend
from moto.sagemaker.responses import SageMakerResponse

from local_mode.sagemaker.job import LocalJob
from local_mode.sagemaker.processing_job import ProcessingJob
from local_mode.sagemaker.settings import Interruption, LocalSageMakerSettings
from local_mode.sagemaker.training_job import TrainingJob

_MISSING = object()


@dataclass
class _InterruptRule:
    interruption: Interruption
    name_contains: str


class LocalSageMaker:
    """The jobs started while installed, and the knobs the local mode's caller turns."""

    def __init__(self, settings: LocalSageMakerSettings | None = None) -> None:
        settings = settings or LocalSageMakerSettings()
        if settings.host_env is None:  # taken once, here: job threads never read the live environment
            settings = dataclasses.replace(settings, host_env=os.environ.copy())
        self.settings = settings
        self._jobs: dict[str, LocalJob] = {}  # by ARN
        self._rules: list[_InterruptRule] = []
        self._stall_rules: list[tuple[str, str]] = []  # (HFTRAIN_INJECT_STALL value, name_contains)
        self._lock = threading.Lock()

    # ---- for the local mode's caller ---------------------------------------------------------------
    def interrupt_training(self, at_step: int, name_contains: str = "", *, abrupt: bool = False,
                           during_save: bool = False) -> None:
        """Interrupt the next managed-spot training job whose name contains name_contains once its leader
        reports PROGRESS global_step >= at_step (then it restarts from its checkpoints); see Interruption for
        `abrupt` and `during_save`. Each call is used by one job, once; call again for several interruptions."""
        if at_step < 0:
            raise ValueError("at_step must be >= 0")
        with self._lock:
            self._rules.append(_InterruptRule(Interruption(at_step, abrupt, during_save), name_contains))

    def inject_stall(self, fault: str, name_contains: str = "") -> None:
        """Give the next training job whose name contains name_contains (its first attempt) a stall fault:
        training_code/hftrain/stall/injection.py reads it (RANK@STEP, RANK@STEP:sigstop, RANK@STEP:loader,
        RANK@startup). Each call is used by one job; call again for the next one (a retry is a new job)."""
        with self._lock:
            self._stall_rules.append((fault, name_contains))

    def request_interrupt(self, job_name: str, at_step: int) -> None:
        """Interrupt a training job that already exists at global step at_step."""
        job = self.job(job_name)
        if not isinstance(job, TrainingJob):
            raise KeyError(f"no local training job {job_name!r}")
        job.request_interrupt(at_step)

    def job(self, name: str) -> LocalJob:
        with self._lock:
            matches = [job for job in self._jobs.values() if job.name == name]
        if not matches:
            raise KeyError(f"no local job {name!r}")
        return matches[-1]

    @property
    def jobs(self) -> list[LocalJob]:
        with self._lock:
            return list(self._jobs.values())

    def wait(self, name: str, timeout: float | None = None) -> dict[str, Any]:
        """Block until the job ends (or timeout); returns its Describe response."""
        job = self.job(name)
        job.wait(timeout)
        return job.describe()

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop every running job and wait for their threads."""
        for job in self.jobs:
            job.shutdown(timeout)

    # ---- called from the patched moto classes ----------------------------------------------------
    def start_training(self, backend: SageMakerModelBackend, request: dict[str, Any]) -> TrainingJob:
        name = request["TrainingJobName"]
        fake: FakeTrainingJob = backend.training_jobs[name]
        with self._lock:
            rules = [rule for rule in self._rules if rule.name_contains in name]
            self._rules = [rule for rule in self._rules if rule not in rules]
            stall = next((rule for rule in self._stall_rules if rule[1] in name), None)
            if stall is not None:
                self._stall_rules.remove(stall)
        job = TrainingJob(
            request,
            name=name,
            arn=fake.arn,
            region=backend.region_name,
            settings=self.settings,
            interruptions=[rule.interruption for rule in rules],
            stall_fault=stall[0] if stall else None,
            on_state_change=lambda j: _sync_training_record(fake, j),
        )
        _sync_training_record(fake, job)
        self._register(job)
        return job

    def start_processing(self, backend: SageMakerModelBackend, request: dict[str, Any]) -> ProcessingJob:
        name = request["ProcessingJobName"]
        fake: FakeProcessingJob = backend.processing_jobs[name]
        job = ProcessingJob(
            request,
            name=name,
            arn=fake.arn,
            region=backend.region_name,
            settings=self.settings,
            on_state_change=lambda j: _sync_processing_record(fake, j),
        )
        _sync_processing_record(fake, job)
        self._register(job)
        return job

    def find(self, arn: str) -> LocalJob | None:
        with self._lock:
            return self._jobs.get(arn)

    def _register(self, job: LocalJob) -> None:
        with self._lock:
            self._jobs[job.arn] = job
        job.start()


def _sync_training_record(fake: FakeTrainingJob, job: LocalJob) -> None:
    """Keep moto's record current for ListTrainingJobs (its filters and summaries read these)."""
    assert isinstance(job, TrainingJob)
    with job.lock:
        fake.training_job_status = job.status
        fake.secondary_status = job.secondary_status
        fake.last_modified_time = job.last_modified_time
        fake.training_end_time = job.end_time


def _sync_processing_record(fake: FakeProcessingJob, job: LocalJob) -> None:
    with job.lock:
        fake.processing_job_status = job.status
        fake.last_modified_time = job.last_modified_time
        fake.processing_end_time = job.end_time


# ---- the patches ------------------------------------------------------------------------------------
_active: LocalSageMaker | None = None
_originals: dict[tuple[type, str], Any] = {}


def _local() -> LocalSageMaker:
    if _active is None:  # a patched method outlived uninstall(): should not happen
        raise RuntimeError("local SageMaker is not installed")
    return _active


def _create_job(self: SageMakerResponse, kind: str) -> ActionResult:
    """moto records the job (after SageMaker's unique-name check), then the request body goes to a job thread."""
    request = json.loads(self.body)
    backend = self.sagemaker_backend
    title, jobs, fake = {
        "training": ("Training", backend.training_jobs, FakeTrainingJob),
        "processing": ("Processing", backend.processing_jobs, FakeProcessingJob),
    }[kind]
    name = request.get(f"{title}JobName", "")
    if name in jobs:
        arn = fake.arn_formatter(name, backend.account_id, backend.region_name)
        raise ResourceInUseException(
            f"{title} job names must be unique within an AWS account and region, and a {kind} job with this name "
            f"already exists ({arn})"
        )
    result = _originals[(SageMakerResponse, f"create_{kind}_job")](self)
    getattr(_local(), f"start_{kind}")(backend, request)
    return result


def _create_training_job(self: SageMakerResponse) -> ActionResult:
    return _create_job(self, "training")


def _create_processing_job(self: SageMakerResponse) -> ActionResult:
    return _create_job(self, "processing")


def _stop_training_job_response(self: SageMakerResponse) -> ActionResult:
    self.sagemaker_backend.stop_training_job(self._get_param("TrainingJobName"))
    return EmptyResult()


def _find_job(backend: SageMakerModelBackend, kind: type, name: str) -> LocalJob | None:
    if kind is TrainingJob:
        arn = FakeTrainingJob.arn_formatter(name, backend.account_id, backend.region_name)
    else:
        arn = FakeProcessingJob.arn_formatter(name, backend.account_id, backend.region_name)
    job = _local().find(arn)
    return job if isinstance(job, kind) else None


def _describe_training_job(self: SageMakerModelBackend, training_job_name: str) -> dict[str, Any]:
    job = _find_job(self, TrainingJob, training_job_name)
    if job is None:
        return _originals[(SageMakerModelBackend, "describe_training_job")](self, training_job_name)
    return job.describe()


def _describe_processing_job(self: SageMakerModelBackend, processing_job_name: str) -> dict[str, Any]:
    job = _find_job(self, ProcessingJob, processing_job_name)
    if job is None:
        return _originals[(SageMakerModelBackend, "describe_processing_job")](self, processing_job_name)
    return job.describe()


def _stop(job: LocalJob | None, kind: str, arn: str) -> None:
    if job is None:
        raise ValidationError(f"Could not find {kind} job '{arn}'.")
    if job.status != "InProgress":
        raise ValidationError(f"The request was rejected because the {kind} job is in status {job.status}.")
    job.stop()


def _stop_training_job(self: SageMakerModelBackend, training_job_name: str) -> None:
    arn = FakeTrainingJob.arn_formatter(training_job_name, self.account_id, self.region_name)
    _stop(_find_job(self, TrainingJob, training_job_name), "training", arn)


def _stop_processing_job(self: SageMakerModelBackend, processing_job_name: str) -> None:
    arn = FakeProcessingJob.arn_formatter(processing_job_name, self.account_id, self.region_name)
    _stop(_find_job(self, ProcessingJob, processing_job_name), "processing", arn)


_PATCHES: list[tuple[type, str, Any]] = [
    (SageMakerResponse, "create_training_job", _create_training_job),
    (SageMakerResponse, "create_processing_job", _create_processing_job),
    (SageMakerResponse, "stop_training_job", _stop_training_job_response),
    (SageMakerModelBackend, "describe_training_job", _describe_training_job),
    (SageMakerModelBackend, "describe_processing_job", _describe_processing_job),
    (SageMakerModelBackend, "stop_training_job", _stop_training_job),
    (SageMakerModelBackend, "stop_processing_job", _stop_processing_job),
]


def install(settings: LocalSageMakerSettings | None = None) -> LocalSageMaker:
    """Route moto's SageMaker training/processing API to local jobs; works inside or outside mock_aws
    (jobs reach S3 and EventBridge through boto3, so they must run while the mock is active)."""
    global _active
    if _active is not None:
        raise RuntimeError("local SageMaker is already installed; call uninstall() first")
    _active = LocalSageMaker(settings)
    for cls, name, replacement in _PATCHES:
        _originals[(cls, name)] = cls.__dict__.get(name, _MISSING)
        setattr(cls, name, replacement)
    return _active


def uninstall(timeout: float = 30.0) -> None:
    """Stop the running jobs, then give moto back its own SageMaker."""
    global _active
    if _active is None:
        return
    try:
        _active.shutdown(timeout)
    finally:
        for (cls, name), original in _originals.items():
            if original is _MISSING:
                delattr(cls, name)
            else:
                setattr(cls, name, original)
        _originals.clear()
        _active = None


@contextmanager
def local_sagemaker(settings: LocalSageMakerSettings | None = None) -> Iterator[LocalSageMaker]:
    """`with mock_aws(), local_sagemaker(settings) as sm:` ... jobs run ... stopped on exit."""
    local = install(settings)
    try:
        yield local
    finally:
        uninstall()
