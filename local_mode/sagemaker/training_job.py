"""One CreateTrainingJob request run on this machine through the real sagemaker-training toolkit.

Per attempt (a spot interruption starts a new one): fresh host folders, channels copied from S3 (or FSx
folders linked), sourcedir.tar.gz unpacked into each host's code dir (the toolkit then skips its own S3
download, which could not reach the emulated S3), checkpoints restored, then the console script `train`
for every host at once (training_hosts.py, which the multi-host tests of train.py use too). With
torch_distributed the toolkit's launcher calls `torchrun`; the runner's wrapper (torchrun.py) moves the
rendezvous to 127.0.0.1 and a port of the job's own.

Timestamps are SageMaker's: TrainingStartTime at the first Downloading, SecondaryStatusTransitions with their
start and end times, TrainingTimeInSeconds the sum of the billed transitions (everything but Starting and
Interrupted: provisioning and the waits for spot capacity are not billed), the upload included, so that the
goodput ledger (lambda/goodput/ledger.py) splits the same seconds the job reports.
"""

from __future__ import annotations

import copy
import math
import shutil
import signal
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import botocore.exceptions

from contract import goodput_line, progress_lines, recovery_line, stall_records
from contract.progress_lines import Progress
from local_mode.sagemaker.checkpoint_sync import CheckpointSync
from local_mode.sagemaker.container_layout import (
    DEFAULT_CHECKPOINT_PATH,
    Host,
    lay_out_training_host,
    plan_hosts,
)
from local_mode.sagemaker.failure_evidence import HostEnd, job_failure
from local_mode.sagemaker.host_processes import HostProcess, signal_host
from local_mode.sagemaker.job import JobSetupError, LocalJob, now, output_members, truncate
from local_mode.sagemaker.metrics import MetricTracker
from local_mode.sagemaker.s3_channels import ChannelError, parse_s3_uri, tar_folder, upload_folder
from local_mode.sagemaker.settings import SAVE_DELAY_ENV, SAVE_DELAY_SECONDS, Interruption
from local_mode.sagemaker.training_hosts import training_processes
from local_mode.sagemaker.training_inputs import checkpoint_sync, download_channels, install_training_code

TRAINING_MEMBERS = output_members("DescribeTrainingJob")
UNBILLED = ("Starting", "Interrupted")  # provisioning and the waits for spot capacity
END_STATES = {
    "stopped": ("Stopped", "Training job stopped"),
    "max_runtime": ("MaxRuntimeExceeded", "Training job stopped: MaxRuntimeInSeconds exceeded"),
    "max_wait": ("MaxWaitTimeExceeded", "Training job stopped: MaxWaitTimeInSeconds exceeded"),
}


def _saving_step(report: dict[str, Any] | None) -> int | None:
    """The step whose checkpoint files begin to be written (-1 when the report says none), from a GOODPUT
    `save_begin` report of a blocking save or the `write_begin` report of a background save (its `save_begin` only
    starts the snapshot); None for any other line."""
    if not report:
        return None
    if report.get("event") == goodput_line.WRITE_BEGIN:
        key = "writing_step"
    elif report.get("event") == goodput_line.SAVE_BEGIN and not report.get("background"):
        key = "saving_step"
    else:
        return None
    try:
        return int(report.get(key, -1))
    except (TypeError, ValueError):
        return -1


def _leader_pid(line: str, report: dict[str, Any] | None) -> int | None:
    """The process that writes the GOODPUT reports (global rank 0), from a line that is one."""
    pid = (report or {}).get("pid") if line.startswith(goodput_line.PREFIX) else None
    return pid if isinstance(pid, int) and not isinstance(pid, bool) and pid >= 0 else None


class TrainingJob(LocalJob):
    job_type = "training"
    event_detail_type = "SageMaker Training Job State Change"

    def __init__(
        self, request: dict[str, Any], *, interruptions: list[Interruption] | None = None,
        stall_fault: str | None = None, **kwargs: Any
    ) -> None:
        super().__init__(request, **kwargs)
        self.stall_fault = stall_fault  # HFTRAIN_INJECT_STALL for the first attempt (stall_injection.py)
        self._stall_seen = 0  # the attempt whose stall was shown
        self.secondary_status = "Starting"
        self.transitions: list[dict[str, Any]] = [
            {
                "Status": "Starting",
                "StartTime": self.creation_time,
                "StatusMessage": "Launching requested ML instances",
            }
        ]
        self.metrics = MetricTracker(request.get("AlgorithmSpecification", {}).get("MetricDefinitions") or [])
        self.spot = bool(request.get("EnableManagedSpotTraining"))
        self.progress: Progress | None = None
        self.training_start_time = None
        self.training_seconds: int | None = None
        self.billable_seconds: int | None = None
        self.attempt = 0  # run() counts attempts from 1
        self._interruptions = sorted(interruptions or [], key=lambda i: i.at_step)
        self._interrupt_now: Interruption | None = None  # due: set by the output pump, acted on by the watcher
        self._interrupted_attempt = 0  # the attempt an interruption ended (at most one each)
        self._last_interruption: Interruption | None = None
        self._leader_pid: int | None = None  # global rank 0's process (its GOODPUT lines say which)
        self._seconds_done = 0.0
        self._attempt_started: float | None = None
        self._last_hosts: list[Host] = []
        self._leader = "algo-1"
        output_path = request["OutputDataConfig"]["S3OutputPath"].rstrip("/")
        self.output_prefix = f"{output_path}/{self.name}/output"
        uncompressed = request["OutputDataConfig"].get("CompressionType") == "NONE"
        self.model_uri = (
            f"{self.output_prefix}/model/" if uncompressed else f"{self.output_prefix}/model.tar.gz"
        )

    # ---- API ---------------------------------------------------------------------------------------
    def request_interrupt(self, at_step: int | Interruption) -> None:
        """Interrupt (spot reclaim) once the leader reports PROGRESS global_step >= at_step."""
        rule = at_step if isinstance(at_step, Interruption) else Interruption(at_step)
        with self.lock:
            self._interruptions = sorted([*self._interruptions, rule], key=lambda i: i.at_step)

    def describe(self) -> dict[str, Any]:
        with self.lock:
            response = {k: copy.deepcopy(v) for k, v in self.request.items() if k in TRAINING_MEMBERS}
            response.update(
                {
                    "TrainingJobName": self.name,
                    "TrainingJobArn": self.arn,
                    "ModelArtifacts": {"S3ModelArtifacts": self.model_uri},
                    "TrainingJobStatus": self.status,
                    "SecondaryStatus": self.secondary_status,
                    "CreationTime": self.creation_time,
                    "LastModifiedTime": self.last_modified_time,
                    "SecondaryStatusTransitions": copy.deepcopy(self.transitions),
                    "EnableNetworkIsolation": bool(self.request.get("EnableNetworkIsolation")),
                    "EnableInterContainerTrafficEncryption": bool(
                        self.request.get("EnableInterContainerTrafficEncryption")
                    ),
                    "EnableManagedSpotTraining": self.spot,
                }
            )
            if self.request.get("CheckpointConfig"):
                response["CheckpointConfig"] = {
                    "LocalPath": DEFAULT_CHECKPOINT_PATH,
                    **self.request["CheckpointConfig"],
                }
            optional = {
                "FailureReason": self.failure_reason,
                "TrainingStartTime": self.training_start_time,
                "TrainingEndTime": self.end_time,
                "TrainingTimeInSeconds": self.training_seconds,
                "BillableTimeInSeconds": self.billable_seconds,
                "FinalMetricDataList": self.metrics.final_metric_data_list() or None,
            }
            response.update({k: v for k, v in optional.items() if v is not None})
            return response

    # ---- the job thread ----------------------------------------------------------------------------
    def run(self) -> None:
        if self._interruptions and not self.spot:
            self.emit("status", "interruption request ignored: only managed spot jobs are interrupted")
            self._interruptions = []
        outcome = "stopped"
        while not self.stop_requested():
            self.attempt += 1
            outcome = self._attempt()
            if outcome != "interrupted":
                break
            self._transition(
                "Interrupted", "Training job interrupted: spot capacity reclaimed (injected locally)"
            )
            if self.wait_or_stop(self.settings.spot_restart_delay_seconds):
                outcome = "stopped"
                break
            if self._limit_reached() == "max_wait":
                outcome = "max_wait"
                break
            self._transition("Starting", "Relaunching ML instances after the spot interruption")
        self._finish(outcome)

    def _attempt(self) -> str:
        attempt_dir = self.work_dir / f"attempt-{self.attempt}"
        # A restart gets new "instances": the old host folders (model copies, checkpoints) only cost disk.
        shutil.rmtree(self.work_dir / f"attempt-{self.attempt - 1}", ignore_errors=True)
        self._transition("Downloading", "Downloading input data")
        self._attempt_started = time.monotonic()
        with self.lock:
            self.training_start_time = self.training_start_time or now()
            self.progress = None
            self._interrupt_now = None
            self._leader_pid = None
        try:
            hosts, checkpoints = self._set_up_hosts(attempt_dir)
            if self.stop_requested():
                return "stopped"
            self._transition("Training", "Training image download completed. Training in progress.")
            self._start_hosts(hosts)
            tick = checkpoints.maybe_sync if checkpoints else None
            outcome, failed = self.watch_hosts(self._limit_or_interrupt, tick, first=self._interruption_due)
            # due after the last look, before the exit codes were read (a stop or a limit keeps its own outcome)
            if outcome in ("failed", "completed") and self._interruption_due():
                outcome, failed = "interrupted", None
            abrupt = outcome == "interrupted" and self._last_interruption is not None and \
                self._last_interruption.abrupt
            if checkpoints and not abrupt:  # a lost instance syncs nothing more
                checkpoints.sync()  # what the hosts wrote before they ended, deletions included
            if outcome == "failed" and failed is not None:
                reason = self._job_failure(hosts, failed)
                with self.lock:
                    self.failure_reason = reason
            return outcome
        except (ChannelError, botocore.exceptions.ClientError) as error:
            raise JobSetupError(f"Data download failed: {error}") from error
        finally:
            if any(h.poll() is None for h in self.hosts):
                self.stop_hosts()  # an error while the hosts ran must not leave them running
            with self.lock:
                self._seconds_done += time.monotonic() - self._attempt_started
                self._attempt_started = None

    def _job_failure(self, hosts: list[Host], failed: HostProcess) -> str:
        """FailureReason from every host's evidence (failure_evidence.py), the cause first."""
        ends = [HostEnd(h.name, h.index, process.poll(), h.base_dir / "output" / "failure", process.log_path)
                for h in hosts for process in self.hosts if process.host == h.name]
        fallback = self.host_failure(failed, next(h for h in hosts if h.name == failed.host).base_dir)
        text = job_failure(ends, self.settings.processes_per_host or 1,
                           fallback.removeprefix("AlgorithmError: "))
        return truncate(f"AlgorithmError: {text}")

    def _restore_checkpoints(self, s3: Any, hosts: list[Host]) -> CheckpointSync | None:
        sync = checkpoint_sync(self.request, s3, hosts, self.settings.checkpoint_sync_seconds)
        restored = sync.restore() if sync else 0
        if restored:
            self.emit("status", f"restored {restored} checkpoint files from "
                                f"{self.request['CheckpointConfig']['S3Uri']} to every host")
        return sync

    def _set_up_hosts(self, attempt_dir: Path) -> tuple[list[Host], CheckpointSync | None]:
        """The attempt's host folders laid out, with their channels, code and restored checkpoints."""
        hosts = plan_hosts(self.request["ResourceConfig"], attempt_dir)
        self._leader = hosts[0].name
        self._last_hosts = hosts
        s3 = self.s3()
        for host in hosts:
            lay_out_training_host(self.request, hosts, host)
        download_channels(self.request, s3, hosts, self.settings.fsx_root)
        install_training_code(self.request, s3, hosts, attempt_dir)
        return hosts, self._restore_checkpoints(s3, hosts)

    def _start_hosts(self, hosts: list[Host]) -> None:
        env = self.base_env()
        with self.lock:
            upcoming = self._interruptions[0] if self._interruptions else None
        if upcoming is not None and upcoming.during_save:  # the writes it targets wait: the loss lands in one
            env[SAVE_DELAY_ENV] = f"{SAVE_DELAY_SECONDS}@{upcoming.at_step}"
        if self.stall_fault and self.attempt == 1:
            env["HFTRAIN_INJECT_STALL"] = self.stall_fault
            self.emit("status", f"injecting a stall: HFTRAIN_INJECT_STALL={self.stall_fault}")
        self.hosts = training_processes(
            hosts,
            base_env=env,
            job_name=self.name,
            job_arn=self.arn,
            bin_dir=self.work_dir / "bin",
            log_dir=self.work_dir / "logs" / f"attempt-{self.attempt}",
            processes_per_host=self.settings.processes_per_host,
            on_line=self._on_line,
        )
        for process in self.hosts:
            process.start()

    def _on_line(self, host: str, line: str) -> None:
        self.ship_line(host, line)
        if line.startswith(stall_records.RANK_LINE_PREFIX) and self._stall_seen != self.attempt:  # every rank says it: shown once
            self._stall_seen = self.attempt
            self.emit("status", f"{line} (seen on {host})")
        if host != self._leader:
            return
        recovery = recovery_line.parse_line(line)
        if recovery is not None:
            self.emit("status", f"recovered in place ({recovery.get('recovery')} of {recovery.get('budget')}): "
                                f"{recovery.get('cause')}: {recovery.get('text')}")
        progress = progress_lines.parse_progress(line)
        report = goodput_line.parse_line(line)
        pid = _leader_pid(line, report)
        with self.lock:
            if progress:
                self.progress = progress
            if pid is not None:
                self._leader_pid = pid
            metrics = self.metrics.feed(line)
            due = self._due(progress, report)
        if due is not None and due.abrupt:
            # The instance is lost now, not at the next poll: the process that printed the line first (a save that
            # just began must not complete), then every process of every host.
            for process in self.hosts:
                signal_host(process, signal.SIGKILL, first_pid=self._leader_pid if process.host == host else None)
        elif due is not None:
            # The notice reaches the instances now, as SageMaker's SIGTERM does, not after the watcher's next look
            # (behind a checkpoint sync that takes seconds on a loaded machine, a short run would finish first);
            # the watcher then gives the stop grace and syncs what the emergency save wrote.
            for process in self.hosts:
                signal_host(process, signal.SIGTERM)
        if progress:
            self.emit(
                "progress", line, global_step=progress.global_step, max_steps=progress.max_steps, host=host
            )
        for name, value in metrics:
            self.emit("metric", line, metric_name=name, metric_value=value, host=host)
        if progress_lines.is_window_line(line):
            self.emit("window", line, host=host)
        if self.settings.stream_logs:
            self.emit("log", line, host=host)

    def _limit_reached(self) -> str | None:
        stopping = self.request.get("StoppingCondition") or {}
        max_runtime = stopping.get("MaxRuntimeInSeconds")
        if max_runtime and self._training_seconds_so_far() > max_runtime:
            return "max_runtime"
        max_wait = stopping.get("MaxWaitTimeInSeconds")
        if self.spot and max_wait and self.elapsed() > max_wait:
            return "max_wait"
        return None

    def _due(self, progress: Progress | None, report: dict[str, Any] | None) -> Interruption | None:
        """Under the lock: the interruption this leader line makes due (it is removed from the list)."""
        if self._interrupted_attempt == self.attempt or not self._interruptions:
            return None
        rule = self._interruptions[0]
        if rule.during_save:
            saving = _saving_step(report)
            reached = saving is not None and saving >= rule.at_step
        else:
            reached = progress is not None and progress.global_step >= rule.at_step
        if not reached:
            return None
        self._interruptions.pop(0)
        self._interrupt_now = self._last_interruption = rule
        self._interrupted_attempt = self.attempt
        self.emit("status", f"injecting {rule.describe()}")
        return rule

    def _interruption_due(self) -> str | None:
        """An interruption signalled the hosts itself (SIGKILL, or the notice's SIGTERM after which they save and
        exit on their own): their exit codes are its, not a failure or a completion."""
        with self.lock:
            due, self._interrupt_now = self._interrupt_now, None
        return "interrupted" if due else None

    def _limit_or_interrupt(self) -> str | None:
        return self._limit_reached() or self._interruption_due()

    def _training_seconds_so_far(self) -> float:
        running = time.monotonic() - self._attempt_started if self._attempt_started else 0.0
        return self._seconds_done + running

    # ---- ending ------------------------------------------------------------------------------------
    def _finish(self, outcome: str) -> None:
        if outcome == "failed":
            self._fail(self.failure_reason or "AlgorithmError: the training job failed")
            return
        if outcome == "completed":
            self._transition("Uploading", "Uploading generated training model")
        self._upload_artifacts()  # SageMaker also uploads what a stopped job left in /opt/ml/model
        if outcome == "completed":
            self._end("Completed", "Completed", "Training job completed")
        else:
            secondary, message = END_STATES[outcome]
            self._end("Stopped", secondary, message)

    def _upload_artifacts(self) -> None:
        if not self._last_hosts:
            return
        leader = self._last_hosts[0]  # SageMaker packs the model and output data of the first host
        s3 = self.s3()
        bucket, key = parse_s3_uri(self.output_prefix)
        artifacts = self.work_dir / "artifacts"
        model_dir = leader.base_dir / "model"
        if self.model_uri.endswith("/"):
            upload_folder(s3, model_dir, self.model_uri)
        else:
            s3.upload_file(
                str(tar_folder(model_dir, artifacts / "model.tar.gz")), bucket, f"{key}/model.tar.gz"
            )
        output_tar = tar_folder(leader.base_dir / "output" / "data", artifacts / "output.tar.gz")
        s3.upload_file(str(output_tar), bucket, f"{key}/output.tar.gz")
        tensorboard = self.request.get("TensorBoardOutputConfig")
        events = leader.path(tensorboard.get("LocalPath") or "/opt/ml/output/tensorboard") if tensorboard else None
        if events is not None and events.is_dir():  # SageMaker syncs them while the job runs; here once, at the end
            upload_folder(s3, events, tensorboard["S3OutputPath"].rstrip("/") + f"/{self.name}/")

    def _billed_seconds(self) -> float:
        """Under the lock: the billed transitions' seconds (the open one up to now)."""
        moment = now()
        total = 0.0
        for transition in self.transitions:
            if transition["Status"] in UNBILLED:
                continue
            end: datetime = transition.get("EndTime") or moment
            total += max(0.0, (end - transition["StartTime"]).total_seconds())
        return total

    def _account_time(self) -> None:
        """TrainingTimeInSeconds: the billed transitions of every attempt (the upload included), to the nearest
        whole second (the API field is an integer; rounding up instead would add up to a second per instance that
        the goodput ledger can only show as unaccounted); spot bills a discounted share of it."""
        training = max(1, round(self._billed_seconds()))
        billable = max(1, math.ceil(training * (1 - self.settings.spot_discount))) if self.spot else training
        self.training_seconds, self.billable_seconds = training, billable

    def _end(self, status: str, secondary: str, message: str) -> None:
        with self.lock:
            self._account_time()
        self._transition(secondary, message, status=status)

    def _fail(self, reason: str) -> None:
        with self.lock:
            self.failure_reason = truncate(reason)
            self._account_time()
        self._transition("Failed", "Training job failed", status="Failed")

    def _on_stopping(self) -> None:
        self._record_transition("Stopping", "Stopping the training job")

    def _transition(self, secondary: str, message: str, *, status: str | None = None) -> None:
        with self.lock:
            if self.status in ("Completed", "Failed", "Stopped"):
                return
            if status is None and self.status == "Stopping" and secondary not in ("Uploading",):
                return  # a stop in progress keeps "Stopping" until the job ends
            if status:
                self.status = status
            self._record_transition(secondary, message)
            if status in ("Completed", "Failed", "Stopped"):
                self.end_time = self.last_modified_time
                self.transitions[-1]["EndTime"] = self.end_time
        self._changed(message)

    def _record_transition(self, secondary: str, message: str) -> None:
        """Under the lock: close the current transition, open the next (lists replaced, never mutated in
        place, so a Describe serializing a copy never sees half an update)."""
        moment = now()
        transitions = copy.deepcopy(self.transitions)
        if transitions and "EndTime" not in transitions[-1]:
            transitions[-1]["EndTime"] = moment
        transitions.append({"Status": secondary, "StartTime": moment, "StatusMessage": message})
        self.transitions = transitions
        self.secondary_status = secondary
        self.last_modified_time = moment
