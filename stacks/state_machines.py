"""The Step Functions definitions: the tokenizer pipeline and the fine-tune pipeline (Standard workflows).

The execution state is one JSON object, declared in lambda/runs/state.py (`ExecutionState`; CONTRACTS.md's table is
generated from it): every JSONPath here is built by its `path()`, so a key the declaration lacks fails synth.
Jobs are watched with a Wait -> Describe -> Choice loop (see README, "Waiting on jobs", for cost and latency).
"""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks
from constructs import Construct

from contract import summary as run_summary
from hfsm_lambda.runs.state import path as state_path
from stacks import names
from stacks.common import removal_policy, retention
from stacks.settings.environment import EnvironmentConfig

LAMBDA_SERVICE_ERRORS = ["Lambda.ServiceException", "Lambda.AWSLambdaException", "Lambda.SdkClientException",
                         "Lambda.TooManyRequestsException"]
# Raised by the handlers (named after the SageMaker error codes) when SageMaker throttles or a quota is full.
THROTTLING_ERRORS = ["ThrottlingException", "ResourceLimitExceeded"]
TASK_TIMEOUT = Duration.minutes(5)
FINE_TUNE_TIMEOUT = Duration.days(60)  # covers 28-day jobs, spot waits and fallback attempts
TOKENIZER_TIMEOUT = Duration.days(7)


class _Builder:
    """Adds the states of one state machine under one scope, with the same retry and catch policy on each task."""

    def __init__(self, scope: Construct, functions: dict[str, lambda_.IFunction]) -> None:
        self.scope = scope
        self.functions = functions
        self.handlers: list[str] = []  # the functions this machine invokes, in order (its role may invoke them)
        self.fail = sfn.Fail(scope, "RunFailed", comment="The run failed: the error and cause say why",
                             error_path=state_path("error", "Error"), cause_path=state_path("error", "Cause"))
        notify = self.invoke("NotifyFailure", "notify_failure", None,
                             state_path("notification"), catch=False)
        notify.add_catch(self.fail, result_path=state_path("notification_error"))
        self.on_error = notify.next(self.fail)

    def invoke(self, state_id: str, handler: str, payload: sfn.TaskInput | None, result_path: str,
               catch: bool = True) -> tasks.LambdaInvoke:
        """payload None: the function gets the whole state (no Parameters, which must be an object)."""
        if handler not in self.handlers:
            self.handlers.append(handler)
        task = tasks.LambdaInvoke(
            self.scope, state_id, lambda_function=self.functions[handler], payload=payload,
            payload_response_only=True, result_path=result_path, retry_on_service_exceptions=False,
            task_timeout=sfn.Timeout.duration(TASK_TIMEOUT))
        task.add_retry(errors=LAMBDA_SERVICE_ERRORS, interval=Duration.seconds(2), max_attempts=6,
                       backoff_rate=2, jitter_strategy=sfn.JitterType.FULL)
        task.add_retry(errors=THROTTLING_ERRORS, interval=Duration.seconds(10), max_attempts=5, backoff_rate=2,
                       jitter_strategy=sfn.JitterType.FULL)
        if catch:
            task.add_catch(self.on_error, result_path=state_path("error"))
        return task

    def job_failed(self, state_id: str, error: str) -> sfn.Pass:
        return sfn.Pass(self.scope, state_id, result_path=state_path("error"), parameters={
            "Error": error, "Cause.$": "States.JsonToString($.status)"}).next(self.on_error)

    def watch(self, prefix: str, *, carry_status: bool = False) -> tuple[sfn.IChainable, sfn.Choice]:
        """Wait -> CheckJob -> Choice on $.status.state; returns (entry, choice) to wire the outcomes.

        carry_status: each check also gets the previous look (`previous`: $.status), which the durability
        watchdog keeps its state in; a Pass state first resets $.status for the job just started."""
        wait = sfn.Wait(self.scope, f"Wait{prefix}", time=sfn.WaitTime.seconds_path(state_path("poll_seconds")))
        payload: dict = {"job": sfn.JsonPath.object_at(state_path("job"))}
        if carry_status:
            payload["previous"] = sfn.JsonPath.object_at(state_path("status"))
        check = self.invoke(f"Check{prefix}", "check_job", sfn.TaskInput.from_object(payload),
                            state_path("status"))
        choice = sfn.Choice(self.scope, f"{prefix}Status")
        choice.when(sfn.Condition.string_equals(state_path("status", "state"), "running"), wait)
        wait.next(check).next(choice)
        if not carry_status:
            return wait, choice
        started = sfn.Pass(self.scope, f"{prefix}Started", result_path=state_path("status"),
                           comment="A fresh status for the job just started (the watchdog's state starts empty)",
                           parameters={"state": "running", "job_name.$": state_path("job", "job_name")})
        started.next(wait)
        return started, choice

    def processing_stage(self, prefix: str, stage: str) -> tuple[sfn.IChainable, sfn.Choice]:
        start = self.invoke(f"Start{prefix}", "start_processing", sfn.TaskInput.from_object({
            "run": sfn.JsonPath.object_at(state_path("run")), "stage": stage}), state_path("job"))
        wait, choice = self.watch(prefix)
        start.next(wait)
        choice.otherwise(self.job_failed(f"{prefix}Failed", f"{prefix}JobFailed"))
        return start, choice


def prepare_task(b: _Builder) -> tasks.LambdaInvoke:
    """Every execution starts with Prepare, whatever its input: no state machine takes a planned run as given.

    Prepare gets the execution's context ($$.Execution: its input, id and start time), so it knows its own
    execution (not counted against max_concurrent_runs) and a retried Prepare plans the same run id. Its output
    replaces the state (ResultPath $), so after it the state holds only what the project's functions wrote. When
    Prepare fails, `PrepareFailed` replaces the caller's input with the error and the execution's own identity:
    the failure branch never sees a `run`, `status` or `source` the caller wrote."""
    prepare = b.invoke("Prepare", "prepare", sfn.TaskInput.from_object({
        "execution": sfn.JsonPath.object_at("$$.Execution")}), "$", catch=False)
    failed = sfn.Pass(b.scope, "PrepareFailed", comment="Drop the caller's input: keep the error and the execution",
                      parameters={"error.$": state_path("error"), "execution": {
                          "Id.$": "$$.Execution.Id", "Name.$": "$$.Execution.Name",
                          "StartTime.$": "$$.Execution.StartTime"}})
    prepare.add_catch(failed, result_path=state_path("error"))
    failed.next(b.on_error)
    return prepare


def tokenizer_definition(b: _Builder) -> sfn.IChainable:
    """Prepare -> map processing job (N hosts) -> reduce job (1 host)."""
    scope = b.scope
    prepare = prepare_task(b)
    map_start, map_done = b.processing_stage("TokenizerMap", "map")
    reduce_start, reduce_done = b.processing_stage("TokenizerReduce", "reduce")
    done = sfn.Succeed(scope, "TokenizerReady", comment="tokenizer.json and friends are in the run's outputs")
    map_done.when(sfn.Condition.string_equals(state_path("status", "state"), "completed"), reduce_start)
    reduce_done.when(sfn.Condition.string_equals(state_path("status", "state"), "completed"), done)
    return prepare.next(map_start)


def fine_tune_definition(b: _Builder) -> sfn.IChainable:
    """Prepare -> [tokenizer map -> reduce] -> training job (with fallback attempts) -> Finish.

    The tokenizer stage is the same states as the tokenizer pipeline (built by the same code), inline, so a run
    is one execution with one history."""
    scope = b.scope
    prepare = prepare_task(b)
    map_start, map_done = b.processing_stage("TokenizerMap", "map")
    reduce_start, reduce_done = b.processing_stage("TokenizerReduce", "reduce")
    map_done.when(sfn.Condition.string_equals(state_path("status", "state"), "completed"), reduce_start)

    start = b.invoke("StartTraining", "start_training", sfn.TaskInput.from_object({
        "run": sfn.JsonPath.object_at(state_path("run")),
        "attempt": sfn.JsonPath.number_at(state_path("attempt"))}), state_path("job"))
    reduce_done.when(sfn.Condition.string_equals(state_path("status", "state"), "completed"), start)
    watch, outcome = b.watch("Training", carry_status=True)
    start.next(watch)
    fallback = b.invoke("PlanFallback", "plan_fallback", sfn.TaskInput.from_object({
        "run": sfn.JsonPath.object_at(state_path("run")), "attempt": sfn.JsonPath.number_at(state_path("attempt")),
        "status": sfn.JsonPath.object_at(state_path("status"))}), state_path("attempt"))
    fallback.next(start)
    finish = b.invoke("Finish", "finish", sfn.TaskInput.from_object({
        "run": sfn.JsonPath.object_at(state_path("run")),
        "job": sfn.JsonPath.object_at(state_path("job"))}), state_path(run_summary.OUTPUT_KEY))
    finish.next(sfn.Succeed(scope, "RunSucceeded"))
    outcome.when(sfn.Condition.string_equals(state_path("status", "state"), "completed"), finish)
    outcome.when(sfn.Condition.string_equals(state_path("status", "state"), "retryable"), fallback)
    outcome.otherwise(b.job_failed("TrainingFailed", "TrainingJobFailed"))

    use_tokenizer = sfn.Choice(scope, "TokenizerStage?")
    use_tokenizer.when(sfn.Condition.boolean_equals(state_path("tokenizer_enabled"), True), map_start)
    use_tokenizer.otherwise(start)
    return prepare.next(use_tokenizer)


class PipelineStateMachines(Construct):
    """Both state machines, with logging level ALL to a KMS-encrypted log group and X-Ray tracing."""

    def __init__(self, scope: Construct, construct_id: str, *, config: EnvironmentConfig, key: kms.IKey,
                 functions: dict[str, lambda_.IFunction]) -> None:
        super().__init__(scope, construct_id)
        self.log_group = logs.LogGroup(
            self, "Logs", log_group_name=names.states_log_group(config), encryption_key=key,
            retention=retention(config.log_retention_days), removal_policy=removal_policy(config))
        log_options = sfn.LogOptions(destination=self.log_group, level=sfn.LogLevel.ALL, include_execution_data=True)

        fine_tune_name, tokenizer_name = names.state_machine_names(config)
        # each machine with the functions its states invoke (what its role is granted; cdk-nag reasons name them)
        self.invocations: list[tuple[sfn.StateMachine, tuple[str, ...]]] = []

        def machine(machine_id: str, name: str, definition, timeout: Duration, comment: str) -> sfn.StateMachine:
            states = _Builder(Construct(self, f"{machine_id}States"), functions)
            body = sfn.DefinitionBody.from_chainable(definition(states))
            built = sfn.StateMachine(
                self, machine_id, state_machine_name=name, state_machine_type=sfn.StateMachineType.STANDARD,
                definition_body=body, timeout=timeout, tracing_enabled=True, logs=log_options, comment=comment)
            self.invocations.append((built, tuple(states.handlers)))
            # CDK's role trusts any state machine of the account (`stateMachine:*`): this one only.
            built.role.node.default_child.add_property_override(
                "AssumeRolePolicyDocument.Statement.0.Condition.ArnLike.aws:SourceArn",
                f"arn:aws:states:{config.region}:{config.account}:stateMachine:{name}")
            return built

        self.tokenizer = machine("Tokenizer", tokenizer_name, tokenizer_definition, TOKENIZER_TIMEOUT,
                                 "Tokenizer training: map over N ShardedByS3Key hosts, reduce on one")
        self.fine_tune = machine("FineTune", fine_tune_name, fine_tune_definition, FINE_TUNE_TIMEOUT,
                                 "Fine-tuning run: prepare, optional tokenizer stage, training with fallback, finish")
