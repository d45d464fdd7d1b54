"""Settings of the local SageMaker and the events it reports to its caller."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

# read by the training code (hftrain/checkpoint/background.py, INJECT_ENV): "<step>[@<rank>]" makes that background
# checkpoint write fail as a full disk would (`python -m local_mode run --inject-save-error`)
SAVE_ERROR_ENV = "HFTRAIN_INJECT_SAVE_ERROR"
# read there too (DELAY_ENV): in an attempt whose next injected interruption is during a save, every background
# write first waits this long, so that the loss lands inside the write, not after a tiny model's milliseconds of it
SAVE_DELAY_ENV = "HFTRAIN_INJECT_SAVE_DELAY"
SAVE_DELAY_SECONDS = "3"


@dataclass(frozen=True)
class JobEvent:
    """One thing a job did, for a progress display: a status change, a PROGRESS or METRIC line, a log line."""

    job_name: str
    job_type: str  # "training" | "processing"
    kind: str  # "status" | "progress" | "metric" | "window" ([train]/[eval] line) | "log"
    message: str
    status: str | None = None
    secondary_status: str | None = None
    global_step: int | None = None
    max_steps: int | None = None
    metric_name: str | None = None
    metric_value: float | None = None
    host: str | None = None


@dataclass(frozen=True)
class Interruption:
    """One injected interruption of a managed-spot training job (it restarts from its checkpoints).

    at_step: once the leader reports PROGRESS global_step >= at_step (with during_save: once its training code
        reports that it begins saving a checkpoint of a step >= at_step: GOODPUT save_begin).
    abrupt: False: SageMaker's stop: SIGTERM, SIGKILL after stop_grace_seconds (the training code saves at its
        next step), then the checkpoint folder's last sync; True: the instance is lost at once (SIGKILL, nothing
        more reaches S3: what the periodic sync had uploaded is all the next attempt finds).
    """

    at_step: int
    abrupt: bool = False
    during_save: bool = False

    def describe(self) -> str:
        when = (f"when the save of a checkpoint of step >= {self.at_step} begins" if self.during_save
                else f"at training step {self.at_step}")
        return f"{'an abrupt' if self.abrupt else 'a'} spot interruption {when}"


@dataclass
class LocalSageMakerSettings:
    """How jobs run on this machine.

    work_dir: each job gets `<work_dir>/<job name>/` (host folders per attempt, logs, packed artifacts).
    fsx_root: FSx for Lustre / EFS channels map `DirectoryPath` "/<mount name>/<path>" to
        `<fsx_root>/<mount name>/<path>`; a job with such a channel fails when this is None.
    processes_per_host: torchrun `--nproc_per_node` for torch_distributed jobs (the "GPUs" of one emulated
        instance); None keeps the toolkit's choice (GPU count, else the hyperparameter
        `sagemaker_mpi_num_of_processes_per_host`, else 1).
    stop_grace_seconds: SIGTERM -> SIGKILL delay on stop, interruption and timeouts (SageMaker: 120 s).
    spot_discount: the saving a managed-spot job reports: Billable = ceil(TrainingTime x (1 - discount)).
    spot_restart_delay_seconds: how long an interrupted job waits for "capacity" before it restarts.
    skip_processing_pip: sets RUNPROC_SKIP_PIP=1 for processing jobs (runproc.sh then installs nothing).
    pip_offline: PIP_NO_INDEX=1 in every job, so the toolkit's `pip install -r requirements.txt` only checks
        what is installed and never reaches a registry.
    emit_events: put "SageMaker Training/Processing Job State Change" events on the emulated default
        EventBridge bus at every status change, as SageMaker does.
    stream_logs: also report every log line of the leader host as a JobEvent of kind "log".
    on_event: called from the job threads with each JobEvent; keep it quick and never raise.
    extra_env: added to every job's environment (after the request's Environment).
    cloudwatch_logs: write every host's output lines to the emulated CloudWatch Logs under SageMaker's log
        group and stream names (`/aws/sagemaker/TrainingJobs`, `<job>/algo-1-<epoch>`).
    host_env: the machine's environment the jobs' processes start from (AWS_*, SM_*, SAGEMAKER_* removed);
        None: a snapshot of the process environment taken when the local SageMaker is installed.
    """

    work_dir: Path = field(default_factory=lambda: Path(".local-runs") / "sagemaker")
    fsx_root: Path | None = None
    processes_per_host: int | None = None
    checkpoint_sync_seconds: float = 2.0
    stop_grace_seconds: float = 10.0
    spot_discount: float = 0.7
    spot_restart_delay_seconds: float = 1.0
    poll_seconds: float = 0.2
    skip_processing_pip: bool = True
    pip_offline: bool = True
    emit_events: bool = True
    stream_logs: bool = False
    on_event: Callable[[JobEvent], None] | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    cloudwatch_logs: bool = True
    host_env: dict[str, str] | None = None

    def __post_init__(self) -> None:
        self.work_dir = Path(self.work_dir).resolve()
        if self.fsx_root is not None:
            self.fsx_root = Path(self.fsx_root).resolve()
        if self.processes_per_host is not None and self.processes_per_host < 1:
            raise ValueError("processes_per_host must be >= 1")
        if not 0.0 <= self.spot_discount < 1.0:
            raise ValueError("spot_discount must be in [0, 1)")
        if self.stop_grace_seconds < 0 or self.checkpoint_sync_seconds <= 0 or self.poll_seconds <= 0:
            raise ValueError("grace, sync and poll intervals must be positive")
