"""One local session: the synthesized app deployed into moto, the local SageMaker installed, and a run
started the way AWS starts it (a run spec uploaded under runs/ in the data bucket), watched to the end.

While a run goes, `say` gets one line per state entered, per job status change and per training log window
(the training code's `[train]`/`[eval]` lines), each with the seconds since the run started. The run's SNS
notifications reach an SQS queue subscribed to the topic (as an e-mail subscriber would get them), so the
local run can show exactly what the notification says.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws

from cloud_assembly.reader import AssemblyError, CloudAssembly
from contract import summary as run_summary
from contract.checkpoint_marker import checkpoint_name
from hfsm_lambda.tracking import record as tracking_record
from hfsm_lambda.tracking.rest import MlflowRest, MlflowRestError
from local_mode.aws.emulator import Deployment, Emulator, copy_tree_to_s3
from local_mode.sagemaker.backend import LocalSageMaker, local_sagemaker
from local_mode.sagemaker.s3_channels import safe_extract
from local_mode.sagemaker.settings import Interruption, JobEvent, LocalSageMakerSettings
from local_mode.sagemaker.stall_faults import describe_stall
from local_mode.tracking_server import BROWSE_URI, TrackingServer, TrackingServerError
from local_mode.tracking_server import DEFAULT_ROOT as DEFAULT_TRACKING_ROOT
from pipeline_runs import record as run_record
from pipeline_runs.clients import Clients

LOSS_METRICS = ("loss",)  # per logging step; train_loss is the whole run's average
MOTO_CONFIG = {"stepfunctions": {"execute_state_machine": True}, "lambda": {"use_docker": False}}
QUIET_STATES = ("Wait", "Check")  # the poll loop: shown as job status changes instead
END_STATES = ("PrepareFailed", "NotifyFailure", "RunFailed", "RunSucceeded")
PROGRESS_EVERY_SECONDS = 30.0  # a step line when the training code printed no [train] line for this long


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
    failed_state: str | None = None  # the last state before the failure handling (NotifyFailure, RunFailed)
    jobs: list[dict[str, Any]] = field(default_factory=list)  # Describe* of the run's jobs, in start order
    host_logs: dict[str, list[Path]] = field(default_factory=dict)  # job name -> its hosts' logs (last attempt)
    experiment: str = ""  # the spec's MLflow experiment (tracking.experiment, else the task)
    notifications: list[dict[str, str]] = field(default_factory=list)  # {"subject", "message"} as received
    planned_run_id: str | None = None  # from Prepare's output (None when Prepare failed)
    evals: list[tuple[int, str, float]] = field(default_factory=list)  # (step, eval_<metric>, value) per evaluation
    name: str | None = None  # the spec's name (a run that failed in Prepare has no run id)
    started_at: float = 0.0  # epoch seconds

    @property
    def summary(self) -> dict[str, Any] | None:
        """Finish's summary of a succeeded run (contract/summary.py), from the execution's output; else None."""
        return run_summary.of_output(self.output)

    @property
    def run_id(self) -> str | None:
        result = self.summary
        if result and result.get("run_id"):
            return str(result["run_id"])
        return self.planned_run_id


def failing_state(states: list[str]) -> str | None:
    """The state that failed: the last one entered before the failure handling states."""
    visited = [s for s in states if s not in END_STATES]
    return visited[-1] if visited else None


class LocalSession:
    """Use as a context manager: `with LocalSession(Path("cdk.out"), work_dir) as s: s.run_spec(...)`."""

    def __init__(self, cdk_out: Path, work_dir: Path, *, poll_seconds: int = 2, processes_per_host: int = 1,
                 say: Callable[[str], None] = print, verbose: bool = False,
                 job_env: dict[str, str] | None = None, tracking: bool | str = False,
                 tracking_root: Path | None = None) -> None:
        self.assembly = CloudAssembly(cdk_out)
        # MLflow (local_mode/tracking_server.py): True starts a server over `tracking_root` (.local-runs/mlflow/)
        # for the session; a URL logs to that server; False: no tracking. The Lambdas get it as settings.tracking_uri.
        self.tracking = tracking
        self.tracking_root = tracking_root
        self.tracking_uri = tracking if isinstance(tracking, str) else ""
        self.tracking_server: TrackingServer | None = None
        self.work_dir = Path(work_dir)
        self.poll_seconds = poll_seconds
        self.processes_per_host = processes_per_host
        self.job_env = dict(job_env or {})  # added to every job's environment (injected faults)
        self.say = say
        self.verbose = verbose
        self.losses: list[tuple[int, float]] = []
        self.evals: list[tuple[int, str, float]] = []
        # Job lines come from job threads; while a run is followed they wait here, (time, text), to be printed in
        # time order with the execution's state events (which the follow loop polls).
        self._pending: list[tuple[float, str]] | None = None
        self._pending_lock = threading.Lock()
        self._step: dict[str, int] = {}  # last step reached, per job
        self._last_line: dict[str, float] = {}  # when a progress line was last printed, per job
        self._seen_jobs: set[str] = set()
        self._t0 = time.time()
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
        # Set once, before any job thread starts, restored after they all stopped.
        os.environ["MOTO_ACCOUNT_ID"] = account
        try:
            self._launch_tracking()  # the server starts while the stacks deploy: both take seconds
            with mock_aws(config=MOTO_CONFIG):
                overrides: dict[str, Any] = {"poll_seconds": self.poll_seconds}
                if self.tracking_uri:
                    overrides["tracking_uri"] = self.tracking_uri
                self.emulator = Emulator(self.assembly, settings_overrides=overrides)
                try:
                    self.dep: Deployment = self._deploy()
                    self._tracking_ready()
                    self.say(f"deployed {len(self.assembly.stacks)} stacks of environment "
                             f"{self.assembly.environment_name} into the emulator (account {account}, "
                             f"{self.dep.region}): {len(self.dep.functions)} Lambdas, "
                             f"{len(self.dep.state_machines)} state machines, buckets {', '.join(self.dep.buckets)}")
                    self._subscribe_notifications()
                    settings = LocalSageMakerSettings(
                        work_dir=self.work_dir / "sagemaker", fsx_root=self.work_dir / "fsx",
                        processes_per_host=self.processes_per_host, on_event=self._on_event,
                        stream_logs=self.verbose, extra_env=self.job_env)
                    with local_sagemaker(settings) as sm:
                        self.sagemaker: LocalSageMaker = sm
                        self.s3 = boto3.client("s3", region_name=self.dep.region)
                        self.sfn = boto3.client("stepfunctions", region_name=self.dep.region)
                        yield
                finally:
                    self.emulator.close()
        finally:
            if self.tracking_server is not None:
                self.tracking_server.stop(wait=False)  # the runs' records are committed: no need to watch it go
            if saved is None:
                os.environ.pop("MOTO_ACCOUNT_ID", None)
            else:
                os.environ["MOTO_ACCOUNT_ID"] = saved

    def _launch_tracking(self) -> None:
        """The session's MLflow server (tracking=True), launched; `_tracking_ready` waits for it."""
        if self.tracking is not True:
            return
        self.tracking_server = TrackingServer(self.tracking_root or DEFAULT_TRACKING_ROOT).launch()
        self.tracking_uri = self.tracking_server.uri

    def _tracking_ready(self) -> None:
        """Before the first run: the launched server answers, or tracking is off, said aloud (its address then
        refuses connections: the Lambdas' and jobs' calls fail at once and the runs go on untracked)."""
        server = self.tracking_server
        if server is None:
            return
        try:
            server.wait_ready()
        except TrackingServerError as exc:
            self.say(f"tracking off: {exc}")
            self.tracking_server, self.tracking_uri = None, ""
            return
        self.say(f"MLflow tracking server {server.uri} over {server.root} (browse it later: make mlflow)")

    def mlflow_run_url(self, outcome: RunOutcome) -> str | None:
        """The MLflow UI's page of a run on the session's tracking server (a server the session started is gone
        afterwards: the page is `make mlflow`'s), or None when the run is not there."""
        if not self.tracking_uri or not outcome.run_id:
            return None
        try:
            found = tracking_record.find_run(MlflowRest(self.tracking_uri), outcome.experiment, outcome.run_id)
        except MlflowRestError:
            return None
        base = BROWSE_URI if self.tracking_server is not None else self.tracking_uri
        return tracking_record.run_url(base, *found) if found else None

    def _deploy(self) -> Deployment:
        try:
            return self.emulator.deploy()
        except Exception as exc:  # one sentence about which environment runs here, not a traceback
            env = self.assembly.environment_name
            raise AssemblyError(
                f"{self.assembly.outdir} holds environment {env!r}, which local mode cannot deploy "
                f"({type(exc).__name__}: {exc}); local mode runs the dev environment (no NAT gateway, no FSx): "
                "run `make synth ENV=dev`, then try again") from exc

    def _subscribe_notifications(self) -> None:
        sqs = boto3.client("sqs", region_name=self.dep.region)
        self._queue = sqs.create_queue(QueueName="local-mode-notifications")["QueueUrl"]
        queue_arn = sqs.get_queue_attributes(QueueUrl=self._queue, AttributeNames=["QueueArn"])["Attributes"][
            "QueueArn"]
        boto3.client("sns", region_name=self.dep.region).subscribe(
            TopicArn=self.dep.topic_arn, Protocol="sqs", Endpoint=queue_arn)
        self._sqs = sqs

    def notifications(self) -> list[dict[str, str]]:
        """The SNS notifications received since the last call (subject, message)."""
        out = []
        while True:
            messages = self._sqs.receive_message(QueueUrl=self._queue, MaxNumberOfMessages=10).get("Messages", [])
            if not messages:
                return out
            for m in messages:
                envelope = json.loads(m["Body"])
                status = ((envelope.get("MessageAttributes") or {}).get("status") or {}).get("Value") or ""
                out.append({"subject": envelope.get("Subject") or "", "message": envelope.get("Message") or "",
                            "status": status})
                self._sqs.delete_message(QueueUrl=self._queue, ReceiptHandle=m["ReceiptHandle"])

    # --- progress -----------------------------------------------------------------------------------------
    def clock(self, at: float | None = None) -> str:
        return f"[{(time.time() if at is None else at) - self._t0:6.1f}s]"

    def _line(self, text: str, at: float | None = None) -> None:
        """`text` with the seconds since the run started; queued while a run is followed (see `follow`)."""
        at = time.time() if at is None else at
        with self._pending_lock:
            if self._pending is not None:
                self._pending.append((at, text))
                return
        self.say(f"  {self.clock(at)} {text}")

    def _job_line(self, job_name: str, text: str) -> None:
        self._line(f"{job_name.rsplit('-', 1)[-1]}: {text}")

    def _on_event(self, event: JobEvent) -> None:
        now = time.time()
        if event.kind == "window":
            self._last_line[event.job_name] = now
            self._job_line(event.job_name, event.message)
        elif event.kind == "progress" and event.global_step is not None:
            self._step[event.job_name] = event.global_step
            if now - self._last_line.get(event.job_name, now) >= PROGRESS_EVERY_SECONDS:
                self._last_line[event.job_name] = now
                self._job_line(event.job_name, f"step {event.global_step}/{event.max_steps}")
            self._last_line.setdefault(event.job_name, now)
        elif event.kind == "metric" and event.metric_name in LOSS_METRICS and event.metric_value is not None:
            self.losses.append((self._step.get(event.job_name, 0), float(event.metric_value)))
        elif event.kind == "metric" and event.metric_value is not None and _is_eval_metric(event.metric_name):
            self.evals.append((self._step.get(event.job_name, 0), str(event.metric_name), float(event.metric_value)))
        elif event.kind == "status":
            if event.job_name not in self._seen_jobs:
                self._seen_jobs.add(event.job_name)
                self._line(f"{event.job_type} job {event.job_name}")
            state = " / ".join(s for s in (event.status, event.secondary_status) if s)
            self._job_line(event.job_name, f"{event.message} ({state})" if state else event.message)
        elif event.kind == "log" and self.verbose:
            self.say(f"      {event.job_name.rsplit('-', 1)[-1]} {event.host}| {event.message}")

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
                 interruptions: list[Interruption] | None = None, stalls: list[str] | None = None,
                 timeout: float = 1800) -> RunOutcome:
        """Uploads the spec under runs/ (the S3 trigger starts the run, as in AWS) and follows it to the end.
        interrupt_at_step (else the spec's local.interrupt_at_step) and `interruptions` are injected in the
        run's training job, in step order."""
        self._t0 = time.time()
        at = interrupt_at_step if interrupt_at_step is not None else (spec.get("local") or {}).get(
            "interrupt_at_step")
        rules = ([Interruption(int(at))] if at else []) + list(interruptions or [])
        for rule in rules:
            self.sagemaker.interrupt_training(rule.at_step, name_contains=str(spec.get("name", "")),
                                              abrupt=rule.abrupt, during_save=rule.during_save)
            self.say(f"{rule.describe()} will be injected")
        for number, fault in enumerate(stalls or [], 1):  # the n-th fault in the n-th training job
            self.sagemaker.inject_stall(fault, name_contains=str(spec.get("name", "")))
            self.say(f"a stall will be injected in training job {number} of the run: {describe_stall(fault)}")
        before = {e["executionArn"] for e in self.executions()}
        jobs_before = {j.arn for j in self.sagemaker.jobs}
        key = self.upload_spec(spec)
        self.say(f"uploaded s3://{self.dep.data_bucket}/{key}: the upload starts the run")
        started = [e for e in self.executions() if e["executionArn"] not in before]
        if not started:
            raise RuntimeError("the upload started no execution: see the trigger's log above")
        outcome = self.follow(started[0]["executionArn"], timeout=timeout, jobs_before=jobs_before)
        outcome.name = str(spec.get("name") or key)
        outcome.experiment = str((spec.get("tracking") or {}).get("experiment") or spec.get("task") or "")
        return outcome

    def _take_pending(self, following: bool) -> list[tuple[float, str]]:
        with self._pending_lock:
            taken, self._pending = self._pending or [], [] if following else None
        return taken

    def follow(self, arn: str, timeout: float = 1800, jobs_before: set[str] | None = None) -> RunOutcome:
        """Follows the execution to its end. Every line printed is in time order: the job lines (queued by the
        job threads) and the state events are merged by their times; a state event newer than the job lines taken
        waits for the next look, since job lines up to its time may still be on their way."""
        started = time.time()
        self.say(f"  {self.clock(started)} execution {arn.rsplit(':', 1)[-1]} started")
        seen, states, run_id, losses_before, evals_before = 0, [], None, len(self.losses), len(self.evals)
        self._take_pending(following=True)
        stopping = False
        while True:
            try:
                cutoff = time.time()
                seen, run_id, running = self._look(arn, seen, states, run_id, cutoff)
                if not running:
                    break
                if time.time() - started > timeout:
                    self._take_pending(following=False)
                    raise TimeoutError(f"{arn} still running after {timeout:.0f}s")
                time.sleep(0.5)
            except KeyboardInterrupt:
                if stopping:
                    raise  # a second Ctrl-C while stopping: leave at once
                stopping = True
                self._stop_run(arn, jobs_before)
        desc = self.sfn.describe_execution(executionArn=arn)
        run_jobs = [j for j in self.sagemaker.jobs if j.arn not in (jobs_before or set())]
        for job in run_jobs:
            job.wait(30)  # a failed run can end while a job it started is still stopping
        self._say_in_order(self._take_pending(following=False))
        self.say(f"  {self.clock()} execution {desc['status']}")
        output = json.loads(desc.get("output") or "{}")
        return RunOutcome(
            execution_arn=arn, status=desc["status"], states=states, output=output, error=desc.get("error"),
            cause=desc.get("cause"), losses=sorted(set(self.losses[losses_before:])), seconds=time.time() - started,
            failed_state=failing_state(states) if desc["status"] != "SUCCEEDED" else None,
            jobs=[job.describe() for job in run_jobs],
            host_logs={job.name: _last_attempt_logs(job.work_dir / "logs") for job in run_jobs},
            notifications=self.notifications(), planned_run_id=run_id, evals=self.evals[evals_before:],
            started_at=started)

    def _look(self, arn: str, seen: int, states: list[str], run_id: str | None,
              cutoff: float) -> tuple[int, str | None, bool]:
        """One look at the execution: print what happened up to `cutoff`; (events seen, run id, still running)."""
        lines = self._take_pending(following=True)
        desc = self.sfn.describe_execution(executionArn=arn)
        events = self.sfn.get_execution_history(executionArn=arn, maxResults=1000)["events"]
        running = desc["status"] == "RUNNING"
        for at, event in _timed_events(events[seen:], cutoff, until_cutoff=running):
            seen += 1
            run_id = run_id or _prepared_run_id(event)
            lines += self._event_lines(at, event, states)
        self._say_in_order(lines)
        return seen, run_id, running

    def _stop_run(self, arn: str, jobs_before: set[str] | None) -> None:
        """Ctrl-C: stop the execution (no retry or fallback starts), then every job it started (SIGTERM, then
        SIGKILL after the stop grace), as `runctl stop` does in AWS; the report is written as for any ending."""
        self.say(f"  {self.clock()} Ctrl-C: stopping the run (its execution and its jobs); Ctrl-C again to leave "
                 "at once")
        try:
            self.sfn.stop_execution(executionArn=arn, error="Interrupted", cause="Ctrl-C in python -m local_mode")
        except Exception as err:  # noqa: BLE001 - the jobs are stopped anyway
            self.say(f"  could not stop the execution: {err}")
        for job in self.sagemaker.jobs:
            if job.arn not in (jobs_before or set()):
                job.stop()

    def _say_in_order(self, lines: list[tuple[float, str]]) -> None:
        for at, text in sorted(lines, key=lambda line: line[0]):
            self.say(f"  {self.clock(at)} {text}")

    def _event_lines(self, at: float, event: dict[str, Any], states: list[str]) -> list[tuple[float, str]]:
        """The lines one history event prints (durability findings, a state entered), at its time; a state
        entered is appended to `states`."""
        lines = [(at, text) for text in self._report_durability(event)]
        details = event.get("stateEnteredEventDetails")
        if details:
            states.append(details["name"])
            if not details["name"].startswith(QUIET_STATES) and not details["name"].endswith("Status"):
                lines.append((at, f"state {details['name']}"))
        return lines

    def _report_durability(self, event: dict[str, Any]) -> list[str]:
        """The durability watchdog's findings (check_job's `durability`), as lines when they change."""
        exited = event.get("stateExitedEventDetails") or {}
        if exited.get("name") != "CheckTraining":
            return []
        try:
            durable = (json.loads(exited.get("output") or "{}").get("status") or {}).get("durability") or {}
        except json.JSONDecodeError:
            return []
        step, stale = durable.get("last_durable_step"), bool(durable.get("stale"))
        lines = []
        if step is not None and step != self._durable[0]:
            lines.append(f"{checkpoint_name(step)} is durable in S3 (last_durable_step={step}, "
                         f"last_durable_at={durable.get('last_durable_at')})")
        if stale and not self._durable[1]:
            lines.append(f"WARNING: no new checkpoint reached S3 for {durable.get('age_minutes')} min of training "
                         f"(limit {durable.get('threshold_minutes')} min; watchdog action {durable.get('action')})")
        self._durable = (step if step is not None else self._durable[0], stale)
        return lines

    def keep_for_runctl(self, outcome: RunOutcome, report: Path) -> Path:
        """What `runctl list/status/logs --local` print for this run, asked of the emulator while it is up
        (pipeline_runs/record.py), written beside the report."""
        clients = Clients(boto3.session.Session(region_name=self.dep.region))
        record = run_record.capture(clients, self.dep.fine_tune_arn, outcome.execution_arn, report)
        return run_record.write(report.parent, record)

    def sagemaker_client(self) -> Any:
        return boto3.client("sagemaker", region_name=self.dep.region)

    def download_model(self, model_uri: str, dest: Path) -> Path:
        bucket, key = model_uri.removeprefix("s3://").split("/", 1)
        dest.mkdir(parents=True, exist_ok=True)
        archive = dest / "model.tar.gz"
        self.s3.download_file(bucket, key, str(archive))
        safe_extract(archive, dest / "model")
        return dest / "model"


def _is_eval_metric(name: str | None) -> bool:
    """An evaluation's own number (not the baseline, not its timing)."""
    return bool(name) and name.startswith("eval_") and not name.startswith("eval_baseline_") and not name.endswith(
        ("_runtime", "_per_second", "epoch"))


def _timed_events(events: list[dict[str, Any]], cutoff: float, *, until_cutoff: bool) -> list[
        tuple[float, dict[str, Any]]]:
    """The events with their times (an event without one: `cutoff`), in order; `until_cutoff`: only those up to
    the first one newer than `cutoff` (the job lines up to its time may still be on their way)."""
    timed = []
    for event in events:
        at = event["timestamp"].timestamp() if isinstance(event.get("timestamp"), datetime) else cutoff
        if until_cutoff and at > cutoff:
            break
        timed.append((at, event))
    return timed


def _prepared_run_id(event: dict[str, Any]) -> str | None:
    """The run id Prepare planned, when `event` is Prepare's exit."""
    exited = event.get("stateExitedEventDetails") or {}
    return _run_id(exited.get("output")) if exited.get("name") == "Prepare" else None


def _run_id(state_json: str | None) -> str | None:
    try:
        state = json.loads(state_json or "{}")
    except json.JSONDecodeError:
        return None
    run = state.get("run") if isinstance(state, dict) else None
    return str(run["run_id"]) if isinstance(run, dict) and run.get("run_id") else None


def _last_attempt_logs(folder: Path) -> list[Path]:
    """Training: logs/attempt-<n>/<host>.log (the last attempt); processing: logs/<host>.log."""
    attempts = sorted((p for p in folder.glob("attempt-*") if p.is_dir()), key=lambda p: int(p.name.split("-")[1]))
    chosen = attempts[-1] if attempts else folder
    return sorted(chosen.glob("*.log"))
