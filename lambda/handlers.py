"""Lambda handlers: thin wrappers that read the state, call pure functions and AWS, return a value.

The state machines (stacks/state_machines.py) keep one snake_case state object:
  run, poll_seconds, tokenizer_enabled, attempt   <- prepare's output (ResultPath $)
  job <- start_*; status <- check_job; attempt <- plan_fallback; result <- finish; error <- Catch
Contracts, exception names, API actions and env vars: docs/run_spec.md ("Handlers").

| handler          | input                                   | returns (ResultPath)                        |
| trigger          | EventBridge S3 "Object Created" event   | {started, already_started, execution_arn}   |
| prepare          | {spec} or {source}, [run_id]            | {run, poll_seconds, tokenizer_enabled, attempt} ($) |
| start_processing | {run, stage: map or reduce}             | job ($.job)                                 |
| start_training   | {run, attempt}                          | job ($.job)                                 |
| check_job        | {job}                                   | {state: running/completed/retryable/failed, ...} ($.status) |
| plan_fallback    | {run, attempt, status}                  | next attempt index ($.attempt)              |
| finish           | {run, job}                              | run summary ($.result)                      |
| notify_failure   | the state with error {Error, Cause}     | {notified, message_id, error, reason} ($.notification) |
| stop_run_jobs    | EventBridge execution status change     | {execution_arn, status, run_id, jobs, stopped} |
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
from datetime import UTC, datetime
from typing import Any
from urllib.parse import unquote_plus

from botocore.exceptions import ClientError

from contract import failure_causes, stall_records
from contract import summary as run_summary
from hfsm_lambda import naming
from hfsm_lambda.goodput import sources as goodput_sources
from hfsm_lambda.plan import checkpoint_interval, job_requests, planning, request_guard, runtime_limits
from hfsm_lambda.plan import run as run_json
from hfsm_lambda.plan.run import Run
from hfsm_lambda.runs import (
    actions,
    coverage,
    messages,
    model_package,
    outcomes,
    registry,
    set_aside,
    verdict,
)
from hfsm_lambda.runs import claims as run_claims
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.runs.state import (
    CheckJobInput,
    ExecutionState,
    FinishInput,
    Job,
    PlanFallbackInput,
    PrepareInput,
    StartProcessingInput,
    StartTrainingInput,
    Status,
    section,
)
from hfsm_lambda.spec.json_dataclass import encode
from hfsm_lambda.spec.run_spec import parse_spec_text
from hfsm_lambda.tracking import record as tracking_record
from hfsm_lambda.tracking.rest import MlflowRest
from hfsm_lambda.watch import durability, orphans
from hfsm_lambda.watch import stalls as stall_watch

from .aws import aws_errors, client, error_code, is_already_exists, is_not_found
from .errors import JobConflictError, JobFailedError, PreflightError, SpecError
from .s3_layout import RUNS_PREFIX
from .settings import Settings, load_settings

logger = logging.getLogger("hfsm")
logger.setLevel(os.environ.get("LOG_LEVEL", "INFO"))
MAX_SPEC_BYTES = 1 << 20


def _log(message: str, **fields: Any) -> None:
    logger.info(json.dumps({"message": message, **fields}, default=str))


# --- trigger ---------------------------------------------------------------------------------------------
def trigger(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """EventBridge "Object Created" for runs/*.json -> StartExecution named after (bucket, key, content).

    Env: STATE_MACHINE_ARN. The name comes from the object's ETag (its content), so a repeated event for one
    object version, and the same spec uploaded again, get the same execution name: Step Functions refuses (or
    idempotently repeats) the start, and one spec content starts one run. A changed spec is a new run; to run
    an unchanged spec again, use `runctl submit`.
    """
    detail = event.get("detail") or {}
    bucket = (detail.get("bucket") or {}).get("name", "")
    obj = detail.get("object") or {}
    key, version = obj.get("key", ""), obj.get("version-id")
    if not (key.startswith(RUNS_PREFIX) and key.endswith(".json")):
        _log("ignored: not a runs/*.json object", bucket=bucket, key=key)
        return {"started": False, "reason": "not a runs/*.json object"}
    etag = obj.get("etag") or obj.get("eTag")  # AWS documents "etag"; some emitters write "eTag"
    identity = etag or version or obj.get("sequencer") or event.get("id", "")
    name = naming.execution_name_for_object(bucket, key, identity)
    state_machine = os.environ["STATE_MACHINE_ARN"]
    payload = json.dumps({"source": {"bucket": bucket, "key": key, "version_id": version}}, sort_keys=True)
    try:
        with aws_errors():
            arn = client("stepfunctions").start_execution(stateMachineArn=state_machine, name=name,
                                                          input=payload)["executionArn"]
    except ClientError as err:
        if error_code(err) != "ExecutionAlreadyExists":
            raise
        arn = naming.execution_arn(state_machine, name)
        _log("already started", execution_arn=arn, bucket=bucket, key=key, version_id=version)
        return {"started": False, "already_started": True, "execution_arn": arn, "execution_name": name}
    _log("started", execution_arn=arn, bucket=bucket, key=key, version_id=version)
    return {"started": True, "already_started": False, "execution_arn": arn, "execution_name": name}


# --- prepare ---------------------------------------------------------------------------------------------
def _read_source(s3: Any, source: Any, settings: Settings) -> Any:
    if not isinstance(source, dict) or not isinstance(source.get("bucket"), str) or not isinstance(
            source.get("key"), str):
        raise SpecError(["source: expected {bucket, key, version_id}"])
    bucket, key, version = source["bucket"], source["key"], source.get("version_id")
    problems = []
    if bucket != settings.data_bucket:
        problems.append(f"source.bucket: runs start only from the data bucket {settings.data_bucket}, not {bucket}")
    if not (key.startswith(RUNS_PREFIX) and key.endswith(".json")):
        problems.append(f"source.key: {key!r} is not under runs/ with suffix .json")
    if problems:
        raise PreflightError(problems)
    args = {"Bucket": bucket, "Key": key, **({"VersionId": version} if version else {})}
    with aws_errors():
        try:
            response = s3.get_object(**args)
        except ClientError as err:
            if error_code(err) not in ("NoSuchKey", "NoSuchVersion", "404") or unquote_plus(key) == key:
                raise PreflightError([f"source.key: cannot read s3://{bucket}/{key}: {error_code(err)}"]) from err
            # EventBridge may deliver the key URL-encoded.
            try:
                response = s3.get_object(**{**args, "Key": unquote_plus(key)})
            except ClientError as err2:
                raise PreflightError([f"source.key: cannot read s3://{bucket}/{key}: {error_code(err2)}"]) from err2
    body = response["Body"].read(MAX_SPEC_BYTES + 1)  # never more than the limit, whatever ContentLength says
    if int(response.get("ContentLength") or 0) > MAX_SPEC_BYTES or len(body) > MAX_SPEC_BYTES:
        size = max(int(response.get("ContentLength") or 0), len(body))
        raise SpecError([f"(root): the spec is {size} bytes or more; at most {MAX_SPEC_BYTES}"])
    return parse_spec_text(body)


def prepare(event: PrepareInput, context: Any = None) -> ExecutionState:
    """Input {spec} or {source: {bucket, key, version_id}}, optionally run_id (runctl) or execution.

    Returns the new state {run, poll_seconds, tokenizer_enabled, attempt: 0}. Raises SpecError /
    PreflightError with every problem; never starts a job.
    """
    settings = load_settings()
    execution = section(event, "execution")
    payload = event
    if "spec" not in event and "source" not in event and execution and isinstance(execution.get("Input"), dict):
        payload = execution["Input"]  # started with only $$.Execution
    has_spec, source = "spec" in payload, payload.get("source")
    if has_spec == (source is not None):
        raise SpecError(["(input): give exactly one of spec (the run spec) or source ({bucket, key, version_id})"])
    s3 = client("s3")
    raw = payload["spec"] if has_spec else _read_source(s3, source, settings)
    if isinstance(raw, str | bytes):
        raw = parse_spec_text(raw)
    exec_small = {k: v for k, v in (execution or {}).items() if k.lower() in ("id", "name", "starttime", "start_time")}
    run = prepare_run(raw, settings, run_id=payload.get("run_id"), execution=exec_small, source=source, s3=s3,
                      sagemaker=client("sagemaker"), ec2=client("ec2"), stepfunctions=client("stepfunctions"))
    run_claims.claim(s3, settings, run.run_id, run.execution_arn)  # one execution per run id
    run = _open_tracking(settings, run)
    _log("prepared", run_id=run.run_id, tokenizer_stage=run.tokenizer_stage, max_attempts=run.max_attempts)
    return {"run": run_json.to_json(run), "poll_seconds": settings.poll_seconds,
            "tokenizer_enabled": run.tokenizer_stage, "attempt": 0}


# --- start jobs ------------------------------------------------------------------------------------------
def _differences(sent: Any, found: Any, path: str = "") -> list[str]:
    """Where an existing job's description differs from the request. Describe adds defaults to some objects
    (channels): only the keys both have count there; hyperparameters are all the request's, so every key counts."""
    if isinstance(sent, dict) and isinstance(found, dict):
        keys = sorted(set(sent) | set(found)) if path == "HyperParameters" else [k for k in sent if k in found]
        return [d for key in keys for d in _differences(sent.get(key), found.get(key), f"{path}.{key}")]
    if isinstance(sent, list) and isinstance(found, list) and len(sent) == len(found):
        return [d for i, (a, b) in enumerate(zip(sent, found, strict=True)) for d in _differences(a, b, f"{path}[{i}]")]
    return [] if sent == found else [path.lstrip(".")]


# What makes a job this request's job: compared with DescribeTrainingJob / DescribeProcessingJob.
_IDENTITY = ("RoleArn", "HyperParameters", "InputDataConfig", "OutputDataConfig.S3OutputPath", "CheckpointConfig.S3Uri",
             "AlgorithmSpecification.TrainingImage", "ResourceConfig.InstanceType", "ResourceConfig.InstanceCount",
             "EnableManagedSpotTraining", "ProcessingInputs", "ProcessingOutputConfig.Outputs", "AppSpecification",
             "ProcessingResources.ClusterConfig.InstanceType", "ProcessingResources.ClusterConfig.InstanceCount")


def _pick(tree: Any, dotted: str) -> Any:
    for key in dotted.split("."):
        tree = tree.get(key) if isinstance(tree, dict) else None
    return tree


def _start_once(request: dict[str, Any], name: str, describe: Any, create: Any, arn_key: str) -> tuple[str, bool]:
    """Describe first, create if absent; a retried Lambda never starts a second job for one attempt.

    A job that exists already is adopted only when it is this request's job (same hyperparameters, channels,
    instances, output and checkpoint prefixes...); a job of another spec under the same name fails loudly.
    """
    with aws_errors():
        try:
            found = describe()
        except ClientError as err:
            if not is_not_found(err):
                raise
            try:
                return create()[arn_key], True
            except ClientError as err2:
                if not is_already_exists(err2):
                    raise
                found = describe()
    differences = [d for path in _IDENTITY if _pick(request, path) is not None and _pick(found, path) is not None
                   for d in _differences(_pick(request, path), _pick(found, path), path)]
    if differences:
        raise JobConflictError(f"job {name} exists already with other settings ({', '.join(differences[:8])}); it "
                               "belongs to another run or spec: no job was adopted or started. Submit the spec "
                               "again for a new run id")
    return found[arn_key], False


def start_processing(event: StartProcessingInput, context: Any = None) -> Job:
    """Input {run, stage: map|reduce}; starts the tokenizer processing job; returns the job ($.job)."""
    settings = load_settings()
    run, stage = request_guard.planned_run(event["run"]), event["stage"]
    request = request_guard.build(job_requests.processing_request, run, settings, stage)
    request_guard.check_processing(request, run, settings, job_requests.PROCESSING_STAGES[stage])
    name = request["ProcessingJobName"]
    sm = client("sagemaker")
    arn, created = _start_once(request, name, lambda: sm.describe_processing_job(ProcessingJobName=name),
                               lambda: sm.create_processing_job(**request), "ProcessingJobArn")
    _log("processing job started" if created else "processing job already started", job_name=name, stage=stage)
    return {"job_type": "processing", "stage": job_requests.PROCESSING_STAGES[stage], "job_name": name,
            "job_arn": arn, "attempt": 0, "created": created,
            "instance_type": request["ProcessingResources"]["ClusterConfig"]["InstanceType"],
            "instance_count": request["ProcessingResources"]["ClusterConfig"]["InstanceCount"], "spot": False,
            "links": messages.run_links(settings, None, name, "processing")}


def start_training(event: StartTrainingInput, context: Any = None) -> Job:
    """Input {run, attempt}; starts that attempt's training job (its fallback option applied); returns $.job."""
    settings = load_settings()
    run = request_guard.planned_run(event["run"])
    attempt = int(event.get("attempt") or 0)
    request = request_guard.build(job_requests.training_request, run, settings, attempt)
    request_guard.check_training(request, run, settings, attempt)
    name = request["TrainingJobName"]
    sm = client("sagemaker")

    def create() -> dict[str, Any]:
        _set_aside_refused(run, settings)  # before this attempt's instances download the checkpoint prefix
        return sm.create_training_job(**request)

    arn, created = _start_once(request, name, lambda: sm.describe_training_job(TrainingJobName=name), create,
                               "TrainingJobArn")
    planned = run.attempts[attempt]
    config = {"instance_type": planned.instance_type, "instance_count": planned.instance_count, "spot": planned.spot}
    _log("training job started" if created else "training job already started", job_name=name, attempt=attempt,
         **config)
    checkpoint, stall = run.spec.checkpoint, run.spec.stall  # stall None: a run planned before stall.*: no watch
    return {"job_type": "training", "stage": "train", "job_name": name, "job_arn": arn, "attempt": attempt,
            "created": created, **config, "links": messages.run_links(settings, None, name, "training"),
            "run_id": run.run_id, "checkpoint_uri": run.uris.checkpoint,
            # the next fallback attempt's instance type, None when this is the last (runs/actions.py: out of memory
            # and the script's own exception are retried only with an attempt left)
            "next_instance_type": run.attempts[attempt + 1].instance_type
            if attempt + 1 < min(run.max_attempts, len(run.attempts)) else None,
            # recovery in place in the job (runs/actions.py: the script's own exception then ends the run)
            "in_job_restarts": run.spec.recovery.in_job_restarts if run.spec.recovery else 0,
            "stall": ({"minutes": stall.minutes, "startup_minutes": stall.startup_minutes, "action": stall.action}
                      if stall else {"minutes": None, "startup_minutes": None, "action": "off"}),
            "watchdog": {"every_minutes": checkpoint_interval.watchdog_minutes(checkpoint.every_minutes),
                         "auto": checkpoint.every_minutes == checkpoint_interval.AUTO,
                         "intervals": checkpoint.watchdog.intervals, "action": checkpoint.watchdog.action}}


def _set_aside_refused(run: Run, settings: Settings) -> None:
    """The checkpoints and caches the training code refused, moved out of the run's checkpoint prefix so that the
    next attempt does not download them (runs/set_aside.py). Never in the way of the start: a failure is logged."""
    if not run.uris.checkpoint:
        return
    target = set_aside.refused_uri(settings.artifacts_bucket, run.run_id)
    try:
        moved = set_aside.move_refused(client("s3"), run.uris.checkpoint, target, settings.kms_key_arn)
    except Exception as err:  # noqa: BLE001 - moving them only saves downloads: the start goes on
        _log("refused checkpoints and caches were not moved out of the checkpoint prefix (the attempt downloads "
             "them)", error=f"{type(err).__name__}: {err}", checkpoint_uri=run.uris.checkpoint)
        return
    if moved["objects"] or moved["left"]:
        _log("moved refused checkpoints and caches out of the checkpoint prefix", to=target, **moved)


# --- poll ------------------------------------------------------------------------------------------------
def _describe(sm: Any, job_type: str, name: str) -> dict[str, Any]:
    with aws_errors():
        if job_type == "training":
            return sm.describe_training_job(TrainingJobName=name)
        return sm.describe_processing_job(ProcessingJobName=name)


def check_job(event: CheckJobInput, context: Any = None) -> Status:
    """Input {job, previous?}; returns {state, status, secondary_status, failure_reason, ...} ($.status).

    state: running | completed | retryable (spot MaxWaitTimeExceeded, capacity errors, a stop by the
    durability watchdog, a stall: `outcome` "stall") | failed. For training jobs with a checkpoint URI,
    `durability` reports the newest checkpoint complete in S3 and `stall_watch` the outside stall watch
    (watch/stalls.py); `previous` (the last $.status) carries the watchdogs' warned/stopped state.
    """
    job = event["job"]
    sm = client("sagemaker")
    desc = _describe(sm, job["job_type"], job["job_name"])
    status = outcomes.classify(job["job_type"], desc)
    status["stage"] = job.get("stage")
    status["checked_at"] = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    if job["job_type"] == "training" and job.get("checkpoint_uri"):
        previous = section(event, "previous") or {}
        _watch_durability(sm, job, desc, status, previous.get("durability"))
        if desc.get("SecondaryStatus") == "MaxRuntimeExceeded":  # say which limit, where it stopped, what survived
            progress = durability.read_progress(client("s3"), job["checkpoint_uri"])
            status["failure_reason"] = runtime_limits.stopped_at_limit(desc, progress, status.get("durability"))
        _watch_stall(sm, job, desc, status, previous.get("stall_watch"))
    if status.get("cause"):  # the action table: a new attempt only where one would change something
        status["state"] = actions.state_after(status["cause"], status["state"], job)
    if status.get("outcome") == outcomes.STALL and (job.get("stall") or {}).get("action") == "fail":
        status["state"] = outcomes.FAILED  # stall.action fail: the run ends here, saying what stalled
    _log("job checked", **{k: status[k] for k in ("job_name", "status", "secondary_status", "state")},
         last_durable_step=(status.get("durability") or {}).get("last_durable_step"))
    return status


def _stop_job(sm: Any, job_name: str, message: str, reason: str) -> None:
    """StopTrainingJob for a watch that found the job wasting its instances; logged with the watch's reason."""
    with aws_errors():
        try:
            sm.stop_training_job(TrainingJobName=job_name)
        except ClientError as err:  # already stopping or ended: nothing to stop
            logger.warning("stop_training_job %s: %s", job_name, error_code(err))
    _log(message, job_name=job_name, reason=reason)


def _watch_durability(sm: Any, job: dict[str, Any], desc: dict[str, Any], status: dict[str, Any],
                      previous: dict[str, Any] | None) -> None:
    """The durability watchdog (watch/durability.py): report, warn once per stale period, stop when asked."""
    settings = load_settings()
    try:
        with aws_errors():
            durable = durability.last_durable(client("s3"), job["checkpoint_uri"])
    except ClientError as err:  # the job check must not fail because the checkpoint prefix is unreadable
        logger.warning("cannot read checkpoints under %s: %s", job["checkpoint_uri"], error_code(err))
        status["durability"] = {**(previous or {}), "error": f"cannot list {job['checkpoint_uri']}: {error_code(err)}"}
        return
    watchdog = job.get("watchdog") or {"action": "off"}
    report, actions = durability.watch(previous, durable, now=durability.utc_now(),
                                       since=durability.training_since(desc), watchdog=watchdog)
    report["checkpoint_uri"] = job["checkpoint_uri"]
    status["durability"] = report
    if "stop" in actions:
        _stop_job(sm, job["job_name"], "durability watchdog stopped the job", report["stop_reason"])
    if "warn" in actions:
        subject, message = messages.durability_warning(settings, job, report, stopped="stop" in actions)
        _publish(settings, subject, message, "Warning", job.get("run_id"))
        _log("durability warning", job_name=job["job_name"], age_minutes=report["age_minutes"],
             last_durable_step=report["last_durable_step"])
    if report.get("stopped_at") and status["status"] in ("Stopped", "Failed") and status["state"] != "completed":
        status["state"] = outcomes.RETRYABLE
        status["failure_reason"] = report["stop_reason"]


def _watch_stall(sm: Any, job: dict[str, Any], desc: dict[str, Any], status: dict[str, Any],
                 previous: dict[str, Any] | None) -> None:
    """The stall watch from outside the job (watch/stalls.py): stop a job that is Training without progress."""
    stall = job.get("stall") or {"action": "off"}
    if stall.get("action") == "off":
        return
    running = status["state"] == "running"
    since = durability.training_since(desc)
    before_training = stall_watch.billed_start_phase(desc) if running and since is None else None
    heartbeat = stall_watch.read_heartbeat(client("s3"), job["checkpoint_uri"]) if running and since else None
    # stall.startup_minutes auto: the run's measured start-ups, kept in the progress file beside the checkpoints
    measured = stall_watch.read_measured_startup(client("s3"), job["checkpoint_uri"]) \
        if running and heartbeat is None and (since or before_training) and \
        stall.get("startup_minutes") in (None, "auto") else None
    report, stop = stall_watch.watch(previous, heartbeat, job_name=job["job_name"], now=durability.utc_now(),
                                     since=since, stall=stall, measured_startup=measured,
                                     before_training=before_training)
    status["stall_watch"] = report
    if stop:
        _stop_job(sm, job["job_name"], "stall watch stopped the job", report["stop_reason"])
        settings = load_settings()
        stall_watch.add_record(client("s3"), job["checkpoint_uri"], report.pop("record"),
                               lambda uri, text: _put_text(settings, uri, text))
    if report.get("stopped_at") and status["status"] in ("Stopped", "Failed") and status["state"] != "completed":
        status["state"] = outcomes.RETRYABLE
        status["outcome"] = outcomes.STALL
        status["failure_reason"] = report["stop_reason"]


def plan_fallback(event: PlanFallbackInput, context: Any = None) -> int:
    """Input {run, attempt, status}; returns the next attempt index ($.attempt) or raises
    FallbackExhaustedError (attempts used up) / JobFailedError (a failure a new attempt would not fix)."""
    run, attempt = run_json.from_json(event["run"]), int(event.get("attempt") or 0)
    earlier = None
    if attempt and (event["status"] or {}).get("cause") == failure_causes.EXCEPTION:
        # the script's own exception twice in a row ends the run (runs/actions.py): the attempt before's reason
        earlier = _describe(client("sagemaker"), "training", run.job_names.train[attempt - 1]).get("FailureReason")
    nxt = outcomes.next_attempt(run, attempt, event["status"], earlier)
    _log("fallback planned", run_id=run.run_id, **encode(run.attempts[nxt]))
    return nxt


# --- finish ----------------------------------------------------------------------------------------------
def _put_json(settings: Settings, uri: str, body: Any) -> None:
    _put_text(settings, uri, json.dumps(body, indent=1, default=str, allow_nan=False))


def _put_text(settings: Settings, uri: str, text: str) -> None:
    """A JSON document to S3 under the project key."""
    bucket, _, key = uri.removeprefix("s3://").partition("/")
    with aws_errors():
        client("s3").put_object(Bucket=bucket, Key=key, Body=text.encode(), ContentType="application/json",
                                ServerSideEncryption="aws:kms", SSEKMSKeyId=settings.kms_key_arn)


def _earlier_jobs(sm: Any, run: Run, attempt: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(usages, attempt records) of the tokenizer jobs and of the training attempts before `attempt`."""
    jobs = [("processing", run.job_names.processing(s)) for s in ("tokenizer_map", "tokenizer_reduce")
            if run.tokenizer_stage]
    jobs += [("training", name) for name in run.job_names.train[:attempt]]
    usages, records = [], []
    # stops by the outside watch: their reason lives in the stall records, not in the job's FailureReason
    outside = {r.get("job"): r for r in (goodput_sources.read_stalls(client("s3"), run.uris.checkpoint)
                                          if run.uris.checkpoint and attempt else []) if r.get("outside")}
    for job_type, name in jobs:
        try:
            desc = _describe(sm, job_type, name)
        except ClientError as err:
            # Not found (never started) or no permission (e.g. DescribeProcessingJob): leave it out of the cost.
            logger.warning("no usage for %s: %s", name, error_code(err))
            continue
        usages.append(outcomes.job_usage(job_type, desc))
        if job_type == "training":
            status = outcomes.classify(job_type, desc)
            if name in outside and status.get("outcome") != outcomes.STALL:
                status.update(outcome=outcomes.STALL, failure_reason=outside[name].get("reason") or "stalled",
                              cause=failure_causes.STALLED)
            stalled = status.get("outcome") == outcomes.STALL  # what stalled: the reason's first line says it
            records.append({"attempt": len(records), "job_name": name, **_job_config(desc),
                            "outcome": "stalled" if stalled else status["state"],
                            "reason": f"{status['failure_reason'].splitlines()[0]}; stacks: "
                                      f"{stall_records.stacks_prefix(run.uris.checkpoint, name)}" if stalled else
                            status["failure_reason"] or status["status"],
                            "cause": status.get("cause"), "interruptions": outcomes.interruptions(desc)})
    return usages, records


def _stragglers(run: Run, job_name: str) -> list[dict[str, Any]]:
    """The ranks the final job's rank 0 named slower than the fleet during the job (hftrain/stall/stragglers.py;
    `now` false for one that caught up), from its heartbeat file beside the checkpoints; [] without one."""
    if not run.uris.checkpoint:
        return []
    beat = stall_watch.read_heartbeat(client("s3"), run.uris.checkpoint) or {}
    found = beat.get("stragglers") if beat.get("job") == job_name else None
    return [s for s in found if isinstance(s, dict)] if isinstance(found, list) else []


def _job_config(desc: dict[str, Any]) -> dict[str, Any]:
    resources = desc.get("ResourceConfig", {})
    return {"instance_type": resources.get("InstanceType"), "instance_count": resources.get("InstanceCount"),
            "spot": bool(desc.get("EnableManagedSpotTraining"))}


def finish(event: FinishInput, context: Any = None) -> dict[str, Any]:
    """Input {run, job}: metrics, cost, metrics.json + summary.json, model package, SNS success ($.result)."""
    settings = load_settings()
    run, job = run_json.from_json(event["run"]), event["job"]
    spec, attempt = run.spec, int(job.get("attempt") or 0)
    sm = client("sagemaker")
    desc = _describe(sm, "training", job["job_name"])
    if desc["TrainingJobStatus"] != "Completed":
        raise JobFailedError(f"finish called for {job['job_name']} in status {desc['TrainingJobStatus']}")
    metrics = outcomes.final_metrics(desc)
    usages, attempts = _earlier_jobs(sm, run, attempt)
    cost = outcomes.cost_summary([*usages, outcomes.job_usage("training", desc)], settings.instance_prices)
    attempts.append({"attempt": attempt, "job_name": job["job_name"], **_job_config(desc), "outcome": "completed",
                     "reason": "Completed", "interruptions": outcomes.interruptions(desc)})
    model_uri = desc["ModelArtifacts"]["S3ModelArtifacts"]
    # What the job and its logs say is read first (bounded, best effort, never raising), so that no read of
    # job-written evidence can fail the run once its model package exists.
    checkpoints = _checkpoint_report(run)
    ledger = goodput_sources.run_ledger(sm, client("logs"), client("s3"), run_json.to_json(run), other_jobs=[
        {"job_name": u["job_name"], "job_type": u["job_type"], "instance_seconds": u["training_seconds"] *
         u["instance_count"]} for u in cost["jobs"] if u["job_type"] != "training"])
    history_interruptions = checkpoints.pop("interruptions")
    data_coverage = coverage.from_history(checkpoints.pop("starts", []), job["job_name"], run.data_skipped)
    stragglers = _stragglers(run, job["job_name"])
    frozen = registry.freeze_model_artifact(client("s3"), settings, run.run_id, job["job_name"], model_uri, desc)
    # The metrics the package records are a copy under registry/ (no job may write there) with its digest;
    # outputs/<run>/metrics.json stays as the user's copy, which a later job could rewrite.
    frozen.update(registry.freeze_metrics(client("s3"), settings, run.run_id, job["job_name"], metrics))
    _put_json(settings, run.uris.metrics, metrics)
    judged = verdict.judge(spec.task, metrics)
    request = model_package.package_request(settings, run, job["job_name"], attempt, metrics, judged, frozen)
    with aws_errors():
        package_arn = sm.create_model_package(**request)["ModelPackageArn"]
    # Registered: from here on nothing may fail the run (NotifyFailure would then record a failed run whose
    # model is in the registry); _record_success degrades instead of raising.
    summary = run_summary.succeeded(
        run_id=run.run_id, task=spec.task, base_model=spec.model,
        job_name=job["job_name"], model_uri=model_uri, registered_model_uri=frozen["uri"],
        registered_model_etag=frozen["etag"], metrics=metrics, cost=cost,
        model_package_arn=package_arn, model_package_group=settings.model_package_group,
        summary_uri=run.uris.summary, metrics_uri=frozen["metrics_uri"], metrics_sha256=frozen["metrics_sha256"],
        attempts=attempts, source=run.source, links=messages.run_links(settings, run, job["job_name"]),
        finished_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        # as the attempts' own logs tell them (goodput/ledger.py); the training code's history file without any log
        interruptions=ledger.get("interruptions", []) if any(a.get("log_stream") for a in ledger.get("attempts", []))
        else history_interruptions,
        checkpoints=checkpoints,
        goodput=ledger,
        verdict=judged,
        stragglers=stragglers,
        data_coverage=data_coverage,
    )
    _record_success(settings, run, summary)
    _record_tracking(settings, run, summary)
    _log("finished", run_id=run.run_id, model_package_arn=package_arn,
         billable_instance_seconds=cost["billable_instance_seconds"], goodput=ledger.get("ratio"))
    return summary


def _open_tracking(settings: Settings, run: Run) -> Run:
    """The run with its MLflow run opened (found or created by its pipeline run tag) when tracking is on: the id
    travels in `$.run` to every attempt's job and to Finish. Best effort, bounded by the REST timeout: a tracking
    server that does not answer never stops a run (the jobs and Finish then find the run by its tag)."""
    if not job_requests.tracking_on(run.spec, settings):
        return run
    try:
        mlflow_run_id = tracking_record.find_or_create_run(MlflowRest(settings.tracking_uri),
                                                           job_requests.tracking_experiment(run.spec), run.run_id)
    except Exception as err:  # noqa: BLE001 - the run goes on without tracking's id, never fails on it
        logger.warning(json.dumps({"message": "tracking: Prepare could not open the MLflow run", "run_id": run.run_id,
                                   "error": f"{type(err).__name__}: {err}"[:1000]}))
        return run
    return dataclasses.replace(run, mlflow_run_id=mlflow_run_id)


def _record_tracking(settings: Settings, run: Run, summary: dict[str, Any]) -> None:
    """The ledger, verdict, cost and model package ARN in the run's MLflow run (lambda/tracking), when tracking is
    on. The run is registered already: a failure (the tracking server unreachable, refused) is logged, never raised."""
    if not job_requests.tracking_on(run.spec, settings):
        return
    try:
        mlflow_run_id = tracking_record.record_finish(MlflowRest(settings.tracking_uri),
                                                      job_requests.tracking_experiment(run.spec), run.run_id,
                                                      summary, encode(run.spec), mlflow_run_id=run.mlflow_run_id)
        _log("tracked", run_id=run.run_id, mlflow_run_id=mlflow_run_id, tracking_uri=settings.tracking_uri)
    except Exception as err:  # noqa: BLE001 - any failure of the tracking server leaves the registered run as it is
        logger.warning(json.dumps({"message": "tracking: Finish could not log to MLflow", "run_id": run.run_id,
                                   "error": f"{type(err).__name__}: {err}"[:1000]}))


def _record_success(settings: Settings, run: Run, summary: dict[str, Any]) -> None:
    """summary.json and the success notification of a registered run; a failure of either is logged and said in
    the summary's `record_errors` (the execution's output), never raised."""
    errors: list[str] = []
    try:
        text = run_summary.format_summary(summary)
    except ValueError:  # a non-finite number (a job's metric or log value summed to inf): as a string, as metrics are
        summary.update(_finite(summary))
        text = run_summary.format_summary(summary)
    try:
        _put_text(settings, run.uris.summary, text)
    except Exception as err:  # noqa: BLE001 - the package exists: say it, do not fail the run
        logger.warning("could not write %s: %s", run.uris.summary, err)
        errors.append(f"{run_summary.FILE_NAME} not written: {type(err).__name__}: {err}"[:500])
    try:
        subject, message = messages.success_notification(settings, summary)
        _publish(settings, subject, message, "Succeeded", run.run_id)
    except Exception as err:  # noqa: BLE001
        logger.warning("could not notify the success of %s: %s", run.run_id, err)
        errors.append(f"notification not sent: {type(err).__name__}: {err}"[:500])
    if errors:
        summary["record_errors"] = errors


def _finite(value: Any) -> Any:
    """`value` with every non-finite float as its text ('inf', 'nan'), the form final metrics take."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    return value


def _checkpoint_report(run: Run) -> dict[str, Any]:
    """Per interruption: step reached, step resumed from, work lost (the training code's `_history.json`); the
    newest durable checkpoint; the checkpoints rejected at a resume. Best effort: never fails the run."""
    try:
        return _checkpoint_facts(run)
    except Exception as err:  # noqa: BLE001 - job-written files: whatever they hold, the run is judged without them
        logger.warning("checkpoint report not made: %s", err, exc_info=True)
        return {"interruptions": [], "checkpoint_uri": run.uris.checkpoint, "last_durable_step": None,
                "last_durable_at": None, "rejected": [], "fresh_starts": [],
                "error": f"{type(err).__name__}: {err}"[:500]}


def _checkpoint_facts(run: Run) -> dict[str, Any]:
    uri = run.uris.checkpoint
    s3 = client("s3")
    history = durability.read_history(s3, uri)
    try:
        durable = durability.last_durable(s3, uri)
    except ClientError as err:
        logger.warning("cannot list checkpoints under %s: %s", uri, error_code(err))
        durable = None
    rejected = [{**r, "job": start.get("job")} for start in history.get("starts", []) if isinstance(start, dict)
                for r in start.get("rejected", []) if isinstance(r, dict)]
    return {"interruptions": [i for i in history.get("interruptions", []) if isinstance(i, dict)],
            "checkpoint_uri": uri, "last_durable_step": (durable or {}).get("step"),
            "last_durable_at": (durable or {}).get("saved_at"), "rejected": rejected[-20:],
            "fresh_starts": [s.get("decision") for s in history.get("starts", []) if isinstance(s, dict)
                             and s.get("resumed_from_step") is None and "none verifies" in str(s.get("decision"))],
            "starts": history.get("starts", [])}  # for the data coverage (runs/coverage.py); popped by finish


def _publish(settings: Settings, subject: str, message: str, status: str, run_id: str | None) -> str:
    attributes = {"status": {"DataType": "String", "StringValue": status}}
    if run_id:
        attributes["run_id"] = {"DataType": "String", "StringValue": run_id}
    with aws_errors():
        return client("sns").publish(TopicArn=settings.topic_arn, Subject=subject, Message=message,
                                     MessageAttributes=attributes)["MessageId"]


# --- failure ---------------------------------------------------------------------------------------------
def _failed_run(event: dict[str, Any], settings: Settings) -> dict[str, Any] | None:
    """The state's run when its run id is a run id, with every address derived from it (none from the state)."""
    run = section(event, "run")
    if run is None:
        return None
    if not (isinstance(run.get("run_id"), str) and naming.RUN_ID_RE.fullmatch(run["run_id"])):
        logger.warning("notify_failure: run.run_id %.80r is not a run id; reporting without it", run.get("run_id"))
        return None
    return {**run, "uris": planning.run_uris(settings, run["run_id"])}


def _failure_summary(event: dict[str, Any], settings: Settings, run: dict[str, Any] | None, name: str,
                     reason: str) -> dict[str, Any]:
    """summary.json of a failed run (also what the notification says)."""
    job, status = section(event, "job") or {}, section(event, "status") or {}
    execution = section(event, "execution") or {}
    spec = section(run, "spec") or {}
    job_name = job.get("job_name") or status.get("job_name")
    links = messages.run_links(settings, None, job_name, job.get("job_type", "training"))
    if run:  # the run's addresses (the failure branch reads the state loosely: it may follow any failure)
        links.update(messages.run_address_links(settings.region, run.get("execution_arn"), run["uris"]["outputs"],
                                                run["uris"]["model_output"]))
    if not run and isinstance(execution.get("Id"), str):
        links["execution"] = naming.execution_url(settings.region, execution["Id"])
    return run_summary.failed(
        run_id=(run or {}).get("run_id"), name=spec.get("name"), error=name,
        reason=reason, source=(run or {}).get("source"), execution=execution.get("Name"),
        job_name=job_name, job_status=status or None,
        attempt=event.get("attempt"), summary_uri=run["uris"]["summary"] if run else None, links=links,
        finished_at=datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    )


def notify_failure(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """Input: the whole state, with error = the Catch output {Error, Cause}; publishes the failure to SNS.

    After Prepare the state is what the project's functions wrote (run, job, status); when Prepare failed it is only
    {error, execution: {Id, Name, StartTime}} (the `PrepareFailed` state drops the caller's input). The one S3 key
    it writes, summary.json, is derived from a validated run id (planning.run_uris), never taken from the state.
    """
    settings = load_settings()
    name, reason = messages.parse_error(event.get("error"))
    run = _failed_run(event, settings)
    summary = _failure_summary(event, settings, run, name, reason)
    summary_uri = summary["summary_uri"]
    if summary_uri:
        try:
            _put_text(settings, summary_uri, run_summary.format_summary(summary))
        except Exception as err:  # the notification matters more than the summary file
            logger.warning("could not write %s: %s", run_summary.FILE_NAME, err)
    subject, message = messages.failure_notification(settings, summary)
    message_id = _publish(settings, subject, message, "Failed", summary["run_id"])
    _log("failure notified", error=name, run_id=summary["run_id"], message_id=message_id)
    return {"notified": True, "message_id": message_id, "error": name, "reason": reason[:2000]}


# --- orphaned jobs ---------------------------------------------------------------------------------------
def stop_run_jobs(event: dict[str, Any], context: Any = None) -> dict[str, Any]:
    """EventBridge "Step Functions Execution Status Change" (FAILED, TIMED_OUT, ABORTED) -> stop the run's jobs
    still InProgress (watch/orphans.py)."""
    settings = load_settings()
    result = orphans.stop_run_jobs(event, client("stepfunctions"), client("sagemaker"), settings.state_machine_arns)
    _log("orphaned jobs checked", **{k: result.get(k) for k in ("execution_arn", "status", "run_id", "stopped")})
    return result
