"""One CreateProcessingJob request run on this machine: the container's entrypoint, per host.

Each host gets /opt/ml relocated to its own folder (SAGEMAKER_BASE_DIR), its share of every S3 input
(ShardedByS3Key per input), config/resourceconfig.json, and runs ContainerEntrypoint + ContainerArguments
with every /opt/ml path rewritten to that folder. At the end each host's output folders are uploaded to
their S3Uri (all hosts to the same prefix, as SageMaker does: names must differ per host).
S3UploadMode Continuous is treated as EndOfJob.
"""

from __future__ import annotations

import copy
import time
from typing import Any

import botocore.exceptions

from local_mode.sagemaker.container_layout import Host, lay_out_processing_host, plan_hosts
from local_mode.sagemaker.host_processes import HostProcess
from local_mode.sagemaker.job import (
    FAILURE_REASON_MAX,
    JobSetupError,
    LocalJob,
    now,
    output_members,
    truncate,
)
from local_mode.sagemaker.s3_channels import (
    ChannelError,
    download_objects,
    parse_s3_uri,
    select_objects,
    shard,
    upload_folder,
)

PROCESSING_MEMBERS = output_members("DescribeProcessingJob")
PROCESSING_ROOT = "/opt/ml/processing/"


class ProcessingJob(LocalJob):
    job_type = "processing"
    event_detail_type = "SageMaker Processing Job State Change"

    def __init__(self, request: dict[str, Any], **kwargs: Any) -> None:
        super().__init__(request, **kwargs)
        self.exit_message: str | None = None
        self.start_time = None
        self._started: float | None = None

    def describe(self) -> dict[str, Any]:
        with self.lock:
            response = {k: copy.deepcopy(v) for k, v in self.request.items() if k in PROCESSING_MEMBERS}
            response.update(
                {
                    "ProcessingJobName": self.name,
                    "ProcessingJobArn": self.arn,
                    "ProcessingJobStatus": self.status,
                    "CreationTime": self.creation_time,
                    "LastModifiedTime": self.last_modified_time,
                }
            )
            optional = {
                "FailureReason": self.failure_reason,
                "ExitMessage": self.exit_message,
                "ProcessingStartTime": self.start_time,
                "ProcessingEndTime": self.end_time,
            }
            response.update({k: v for k, v in optional.items() if v is not None})
            return response

    def run(self) -> None:
        app = self.request["AppSpecification"]
        entrypoint = list(app.get("ContainerEntrypoint") or [])
        if not entrypoint:
            raise JobSetupError(
                "ContainerEntrypoint is required locally: the image's own entrypoint only exists in its container"
            )
        command = entrypoint + list(app.get("ContainerArguments") or [])
        hosts = plan_hosts(self.request["ProcessingResources"]["ClusterConfig"], self.work_dir / "attempt-1")
        try:
            s3 = self.s3()
            for host in hosts:
                lay_out_processing_host(self.request, self.arn, hosts, host)
                for output in self._outputs():
                    host.path(output["S3Output"]["LocalPath"]).mkdir(parents=True, exist_ok=True)
            self._download_inputs(s3, hosts)
        except (ChannelError, botocore.exceptions.ClientError) as error:
            raise JobSetupError(f"Data download failed: {error}") from error
        if self.stop_requested():
            self._end("Stopped")
            return
        self._start_hosts(hosts, command, shown_from=len(entrypoint))
        outcome, failed = self.watch_hosts(self._limit_reached)
        # ExitMessage: the failing host's output/message when a host failed, else algo-1's
        failed_host = next((h for h in hosts if failed is not None and h.name == failed.host), hosts[0])
        self._read_exit_message(failed_host)
        if outcome == "completed":
            for host in hosts:
                for output in self._outputs():
                    upload_folder(s3, host.path(output["S3Output"]["LocalPath"]), output["S3Output"]["S3Uri"])
            self._end("Completed")
        elif outcome == "failed" and failed is not None:
            host = next(h for h in hosts if h.name == failed.host)
            self._fail(self.host_failure(failed, host.base_dir))
        elif outcome == "max_runtime":
            limit = self.request["StoppingCondition"]["MaxRuntimeInSeconds"]
            self._end(
                "Stopped", f"MaxRuntimeExceeded: the job ran longer than MaxRuntimeInSeconds ({limit} s)"
            )
        else:
            self._end("Stopped")

    def _outputs(self) -> list[dict[str, Any]]:
        outputs = (self.request.get("ProcessingOutputConfig") or {}).get("Outputs") or []
        for output in outputs:
            if "S3Output" not in output:
                raise JobSetupError(
                    f"processing output {output.get('OutputName')!r}: only S3Output runs locally"
                )
            self._check_local_path(output["S3Output"]["LocalPath"])
        return outputs

    @staticmethod
    def _check_local_path(path: str) -> None:
        if not path.startswith(PROCESSING_ROOT):
            raise JobSetupError(f"LocalPath {path} must be under {PROCESSING_ROOT}")

    def _download_inputs(self, s3: Any, hosts: list[Host]) -> None:
        for item in self.request.get("ProcessingInputs") or []:
            name = item.get("InputName")
            source = item.get("S3Input")
            if source is None:
                raise JobSetupError(f"processing input {name!r}: only S3Input runs locally")
            if (
                source.get("S3InputMode", "File") != "File"
                or source.get("S3DataType", "S3Prefix") != "S3Prefix"
            ):
                raise JobSetupError(
                    f"processing input {name!r}: only S3Prefix inputs in File mode run locally"
                )
            self._check_local_path(source["LocalPath"])
            objects = select_objects(s3, source["S3Uri"])
            if not objects:
                raise JobSetupError(f'No S3 objects found under S3 URL "{source["S3Uri"]}" (input {name!r})')
            bucket, _ = parse_s3_uri(source["S3Uri"])
            distribution = source.get("S3DataDistributionType", "FullyReplicated")
            for host in hosts:
                mine = shard(objects, distribution, host.index, len(hosts))
                download_objects(s3, bucket, mine, host.path(source["LocalPath"]))

    def _start_hosts(self, hosts: list[Host], command: list[str], shown_from: int = 0) -> None:
        with self.lock:
            self.start_time = now()
        self._started = time.monotonic()
        self.hosts = []
        for host in hosts:
            env = self.base_env()
            env["SAGEMAKER_BASE_DIR"] = str(host.base_dir)
            if self.settings.skip_processing_pip:
                env["RUNPROC_SKIP_PIP"] = "1"
            self.hosts.append(
                HostProcess(
                    host.name,
                    [host.rewrite(part) for part in command],
                    env=env,
                    cwd=host.root,
                    log_path=self.work_dir / "logs" / f"{host.name}.log",
                    on_line=self._on_line,
                )
            )
        shown = " ".join(command[shown_from:])  # the ContainerArguments: the script the entrypoint runs, and its own
        shown = shown if len(shown) <= 160 else shown[:157] + "..."
        self.emit("status", f"processing on {len(hosts)} host(s): {shown}")
        for process in self.hosts:
            process.start()

    def _on_line(self, host: str, line: str) -> None:
        self.ship_line(host, line)
        if self.settings.stream_logs:
            self.emit("log", line, host=host)

    def _limit_reached(self) -> str | None:
        limit = (self.request.get("StoppingCondition") or {}).get("MaxRuntimeInSeconds")
        if limit and self._started is not None and time.monotonic() - self._started > limit:
            return "max_runtime"
        return None

    def _read_exit_message(self, leader: Host) -> None:
        message_file = leader.base_dir / "output" / "message"
        if message_file.is_file():
            data = message_file.read_bytes()[:FAILURE_REASON_MAX]  # the first 1 KB, as SageMaker reads it
            with self.lock:
                self.exit_message = data.decode("utf-8", "ignore")

    def _end(self, status: str, reason: str | None = None) -> None:
        with self.lock:
            if self.status in ("Completed", "Failed", "Stopped"):
                return
            self.status = status
            if reason:
                self.failure_reason = truncate(reason)
            self.end_time = self.last_modified_time = now()
        self._changed(f"Processing job {status.lower()}" + (f": {reason}" if reason else ""))

    def _fail(self, reason: str) -> None:
        with self.lock:
            if self.status in ("Completed", "Failed", "Stopped"):
                return
            self.status = "Failed"
            self.failure_reason = truncate(reason)
            self.end_time = self.last_modified_time = now()
        self._changed("Processing job failed")
