"""One local session: the synthesized app deployed into moto, the local SageMaker installed, and a run
started the way AWS starts it (a run spec uploaded under runs/ in the data bucket), watched to the end."""

from __future__ import annotations

import json
import os
import tarfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws

from local_mode.cloud_assembly import CloudAssembly
from local_mode.emulator import Deployment, Emulator, copy_tree_to_s3
from local_mode.job_settings import JobEvent, LocalSageMakerSettings
from local_mode.sagemaker_backend import LocalSageMaker, local_sagemaker

LOSS_METRICS = ("loss",)  # per logging step; train_loss is the whole run's average
MOTO_CONFIG = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}


@dataclass
class RunOutcome:
    execution_arn: str
    status: str
    states: list[str]
    output: dict[str, Any]
    error: str | None
    cause: str | None
    losses: list[tuple[int, float]] = field(default_factory=list)
    seconds: float = 0.0


class LocalSession:
    """Use as a context manager: `with LocalSession(Path("cdk.out"), work_dir) as s: s.run_spec(...)`."""

    def __init__(self, cdk_out: Path, work_dir: Path, *, poll_seconds: int = 2, processes_per_host: int = 1,
                 say: Callable[[str], None] = print) -> None:
        self.assembly = CloudAssembly(cdk_out)
        self.work_dir = Path(work_dir)
        self.poll_seconds = poll_seconds
        self.processes_per_host = processes_per_host
        self.say = say
        self.losses: list[tuple[int, float]] = []
        self._last_step: dict[str, int] = {}  # last step printed, per job
        self._step: dict[str, int] = {}  # last step reached, per job
        self._durable: tuple[int | None, bool] = (None, False)  # last durable step and staleness printed
        self._stack: Any = None

    # --- lifetime ---------------------------------------------------------------------------------------
    def __enter__(self) -> LocalSession:
        self._stack = self._open()
        self._stack.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stack.__exit__(*exc)

    @contextmanager
    def _open(self) -> Iterator[None]:
        account = self.assembly.stacks[0].account
        saved = os.environ.get("MOTO_ACCOUNT_ID")
        # The templates name the account literally (bucket names, ARNs): the emulator uses the same one.
        os.environ["MOTO_ACCOUNT_ID"] = account
        try:
            with mock_aws(config=MOTO_CONFIG):
                self.emulator = Emulator(self.assembly, settings_overrides={"poll_seconds": self.poll_seconds})
                self.dep: Deployment = self.emulator.deploy()
                self.say(f"deployed {len(self.assembly.stacks)} stacks into the emulator (account {account}, "
                         f"{self.dep.region}): {len(self.dep.functions)} Lambdas, "
                         f"{len(self.dep.state_machines)} state machines, buckets {', '.join(self.dep.buckets)}")
                settings = LocalSageMakerSettings(
                    work_dir=self.work_dir / "sagemaker", fsx_root=self.work_dir / "fsx",
                    processes_per_host=self.processes_per_host, on_event=self._on_event)
                with local_sagemaker(settings) as sm:
                    self.sagemaker: LocalSageMaker = sm
                    self.s3 = boto3.client("s3", region_name=self.dep.region)
                    self.sfn = boto3.client("stepfunctions", region_name=self.dep.region)
                    yield
                self.emulator.close()
        finally:
            if saved is None:
                os.environ.pop("MOTO_ACCOUNT_ID", None)
            else:
                os.environ["MOTO_ACCOUNT_ID"] = saved

    # --- progress -----------------------------------------------------------------------------------------
    def _on_event(self, event: JobEvent) -> None:
        if event.kind == "progress" and event.global_step is not None:
            self._step[event.job_name] = event.global_step
            last = self._last_step.get(event.job_name, -1)
            if event.global_step >= last + 25 or event.global_step == event.max_steps:
                self._last_step[event.job_name] = event.global_step
                self.say(f"    {event.job_name}: step {event.global_step}/{event.max_steps}")
        elif event.kind == "metric" and event.metric_name in LOSS_METRICS and event.metric_value is not None:
            self.losses.append((self._step.get(event.job_name, 0), float(event.metric_value)))
        elif event.kind == "status":
            self.say(f"    {event.job_name}: {event.message}")

    # --- runs ---------------------------------------------------------------------------------------------
    def upload_folder(self, folder: Path, prefix: str = "") -> int:
        return len(copy_tree_to_s3(self.s3, folder, self.dep.data_bucket, prefix))

    def upload_spec(self, spec: dict[str, Any], key: str | None = None) -> str:
        key = key or f"runs/{spec.get('name', 'run')}.json"
        self.s3.put_object(Bucket=self.dep.data_bucket, Key=key, Body=json.dumps(spec, indent=1).encode())
        return key

    def executions(self) -> list[dict[str, Any]]:
        return self.sfn.list_executions(stateMachineArn=self.dep.fine_tune_arn)["executions"]

    def run_spec(self, spec: dict[str, Any], *, interrupt_at_step: int | None = None,
                 timeout: float = 1800) -> RunOutcome:
        """Uploads the spec under runs/ (the S3 trigger starts the run, as in AWS) and follows it to the end."""
        at = interrupt_at_step or (spec.get("local") or {}).get("interrupt_at_step")
        if at:
            self.sagemaker.interrupt_training(at_step=int(at), name_contains=str(spec.get("name", "")))
            self.say(f"a spot interruption will be injected at training step {at}")
        before = {e["executionArn"] for e in self.executions()}
        key = self.upload_spec(spec)
        self.say(f"uploaded s3://{self.dep.data_bucket}/{key}")
        started = [e for e in self.executions() if e["executionArn"] not in before]
        if not started:
            raise RuntimeError("the upload started no execution: see the trigger's log above")
        return self.follow(started[0]["executionArn"], timeout=timeout)

    def follow(self, arn: str, timeout: float = 1800) -> RunOutcome:
        self.say(f"execution {arn.rsplit(':', 1)[-1]} started")
        t0 = time.time()
        seen = 0
        states: list[str] = []
        while True:
            desc = self.sfn.describe_execution(executionArn=arn)
            events = self.sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
            for e in events[seen:]:
                self._report_durability(e)
                details = e.get("stateEnteredEventDetails")
                if details:
                    states.append(details["name"])
                    if not details["name"].startswith(("Wait", "Check")) and not details["name"].endswith("Status"):
                        self.say(f"  [{time.time() - t0:6.1f}s] state {details['name']}")
            seen = len(events)
            if desc["status"] != "RUNNING":
                break
            if time.time() - t0 > timeout:
                raise TimeoutError(f"{arn} still running after {timeout:.0f}s")
            time.sleep(0.5)
        output = json.loads(desc.get("output") or "{}")
        return RunOutcome(execution_arn=arn, status=desc["status"], states=states, output=output,
                          error=desc.get("error"), cause=desc.get("cause"), losses=sorted(set(self.losses)),
                          seconds=time.time() - t0)

    def _report_durability(self, event: dict[str, Any]) -> None:
        """The durability watchdog's findings (check_job's `durability`), printed when they change."""
        exited = event.get("stateExitedEventDetails") or {}
        if exited.get("name") != "CheckTraining":
            return
        try:
            durable = (json.loads(exited.get("output") or "{}").get("status") or {}).get("durability") or {}
        except json.JSONDecodeError:
            return
        step, stale = durable.get("last_durable_step"), bool(durable.get("stale"))
        if step is not None and step != self._durable[0]:
            self.say(f"    checkpoint-{step} is durable in S3 (last_durable_step={step}, "
                     f"last_durable_at={durable.get('last_durable_at')})")
        if stale and not self._durable[1]:
            self.say(f"    WARNING: no new checkpoint reached S3 for {durable.get('age_minutes')} min of training "
                     f"(limit {durable.get('threshold_minutes')} min; watchdog action {durable.get('action')})")
        self._durable = (step if step is not None else self._durable[0], stale)

    def sagemaker_client(self) -> Any:
        return boto3.client("sagemaker", region_name=self.dep.region)

    def download_model(self, model_uri: str, dest: Path) -> Path:
        bucket, key = model_uri.removeprefix("s3://").split("/", 1)
        dest.mkdir(parents=True, exist_ok=True)
        archive = dest / "model.tar.gz"
        self.s3.download_file(bucket, key, str(archive))
        with tarfile.open(archive) as tar:
            tar.extractall(dest / "model", filter="data")
        return dest / "model"

