"""`runctl plan SPEC`: what a submit would do, without starting anything.

The deployed pipeline's settings come from its Prepare function (the fine-tune state machine's Prepare state
names it; its PIPELINE_SETTINGS environment variable is the environment's settings), or from a file. The
pipeline's own Lambda code (lambda/ of this repository, the same modules Prepare runs) validates the spec,
runs the pre-flight checks (storage and job names too unless --offline), builds every request the run can
send and the worst-case cost over the whole fallback chain (lambda/plan/cost.py).
"""

from __future__ import annotations

import json
from typing import Any

from contract import startup_limit
from hfsm_lambda.errors import PreflightError, SettingsError, SpecError
from hfsm_lambda.plan import cost, job_requests
from hfsm_lambda.plan import run as run_json
from hfsm_lambda.runs import prepare as runs
from hfsm_lambda.settings import parse_settings
from hfsm_lambda.watch import stalls as stall_watch
from runctl.core import Clients, RunctlError


def prepare_function(clients: Clients, state_machine_arn: str) -> str:
    definition = json.loads(clients.sfn.describe_state_machine(stateMachineArn=state_machine_arn)["definition"])
    state = definition.get("States", {}).get("Prepare", {})
    name = (state.get("Parameters") or {}).get("FunctionName") or state.get("Resource")
    if not name or ":states:::" in str(name):
        raise RunctlError(f"{state_machine_arn} has no Prepare Lambda state; is it the fine-tune state machine?")
    return str(name)


def deployed_settings_text(clients: Clients, state_machine_arn: str) -> str:
    function = prepare_function(clients, state_machine_arn)
    config = clients.lambda_.get_function_configuration(FunctionName=function)
    text = (config.get("Environment") or {}).get("Variables", {}).get("PIPELINE_SETTINGS")
    if not text:
        raise RunctlError(f"{function} has no PIPELINE_SETTINGS; redeploy the pipeline stack")
    return text


def data_bucket(settings_text: str) -> str:
    try:
        return parse_settings(settings_text).data_bucket
    except SettingsError as err:
        raise RunctlError(f"the pipeline settings are not usable: {'; '.join(err.problems)}") from err


def plan(clients: Clients | None, spec: dict[str, Any], *, settings_text: str, offline: bool = False
         ) -> dict[str, Any]:
    """{ok, problems, error, run, requests, worst_case}; ok False with the problems when nothing would start."""
    try:
        settings = parse_settings(settings_text)
    except SettingsError as err:
        raise RunctlError(f"the pipeline settings are not usable: {'; '.join(err.problems)}") from err
    try:
        run = runs.prepare_run(spec, settings, s3=None if offline else clients.s3,
                               sagemaker=None if offline else clients.sagemaker,
                               ec2=None if offline else clients.ec2)
    except (SpecError, PreflightError) as err:
        return {"ok": False, "error": type(err).__name__, "problems": err.problems,
                "environment": settings.environment}
    # The requests Prepare built and checked (prepare_run keeps only the run): built again from the plan, in the
    # order the run sends them (tokenizer jobs, then the training attempts).
    built = job_requests.build_requests(run, settings)
    built = sorted(built, key=lambda item: item[0] != "CreateProcessingJob")
    worst = cost.worst_case_cost(run, built, settings)
    requests = [{"operation": op, "stage": item["kind"], "request": request}
                for (op, request), item in zip(built, worst["items"], strict=True)]
    return {"ok": True, "environment": settings.environment, "region": settings.region, "run": run_json.to_json(run),
            "requests": requests, "worst_case": worst, "storage_checked": not offline}


def _hours(seconds: int) -> str:
    hours, rest = divmod(int(seconds), 3600)
    return f"{hours}h{rest // 60:02d}m"


def _stall_lines(stall: Any) -> list[str]:
    """The stall limits the job will apply (hftrain/stall/limits.py) and the outside watch's (watch/stalls.py)."""
    if stall is None or stall.action == "off":
        return ["", "Stall watch: off"]
    steps = "max(10 min, 20 x the median step time)" if stall.minutes == "auto" else f"{stall.minutes:g} min"
    startup = f"auto: {startup_limit.rule()}" if stall.startup_minutes == startup_limit.AUTO else \
        f"{stall.startup_minutes:g} min"
    before = "the start-up limit" if stall.startup_minutes == startup_limit.AUTO else \
        f"{stall.startup_minutes:g} min"
    return ["", f"Stall limits (stall.action {stall.action}): training steps {steps}; start-up phases (imports, "
                f"data and model load, tokenization, rendezvous, restore) {startup}; evaluations and saves 3 x the "
                f"longest measured, at least 10 min ({before} before the first); the outside watch adds "
                f"{stall_watch.MARGIN_MINUTES:g} min"]


def plan_lines(result: dict[str, Any], *, show_requests: bool = True) -> list[str]:
    if not result["ok"]:
        return [f"{result['error']} in environment {result['environment']}: nothing would start.",
                *[f"  - {p}" for p in result["problems"]]]
    run, worst = run_json.from_json(result["run"]), result["worst_case"]
    spec = run.spec
    checks = "spec, environment, requests, storage, data and job names" if result["storage_checked"] else \
        "spec, environment and requests (--offline: storage, data and job names not checked)"
    if result.get("settings_source"):
        checks = (f"spec, environment and requests against the settings in {result['settings_source']}; storage, "
                  "data and job names are checked with --deployed")
    lines = [f"Plan for {spec.name} ({spec.task}, model {spec.model}) in environment "
             f"{result['environment']} ({result['region']}): valid; checked {checks}.",
             f"Run id at submit: like {run.run_id} (a new one each time); nothing was started.", "", "Jobs:"]
    for item, entry in zip(worst["items"], result["requests"], strict=True):
        request = entry["request"]
        stopping = request.get("StoppingCondition", {})
        kind = "spot" if item["spot"] else "on-demand"
        wait = f", waits up to {_hours(stopping['MaxWaitTimeInSeconds'])} for spot" if \
            "MaxWaitTimeInSeconds" in stopping else ""
        lines.append(f"  {entry['stage']:<20} {entry['operation']:<20} {item['job']}")
        lines.append(f"  {'':<20} {item['instance_count']} x {item['instance_type']} {kind}, "
                     f"max {_hours(item['max_seconds'])}{wait}")
    if run.max_attempts > 1:
        lines.append(f"  (attempts 1-{run.max_attempts - 1} run only when the one before ends with a cause the "
                     "action table retries: no capacity or spot wait, a stall, a rank killed by a signal, a "
                     "collective error, the script's own exception once, out of memory only on another instance "
                     "type; lambda/runs/actions.py)")
    lines += _stall_lines(spec.stall)
    lines += ["", "Worst case (every job at its max runtime, every fallback attempt used):"]
    for item in worst["items"]:
        price = "no price" if item["price_per_hour"] is None else \
            f"${item['price_per_hour']:.3f}/h + {item['volume_gb']} GB storage -> ${item['worst_case_usd']:.2f}"
        lines.append(f"  {item['kind']:<20} {item['instance_count']} x {item['instance_type']} x "
                     f"{_hours(item['max_seconds'])}: {price}")
    total = f"${worst['total_usd']:.2f}" if worst["total_usd"] is not None else \
        f"unknown: no instance_prices for {', '.join(worst['missing_prices'])}"
    lines.append(f"  total: {total} at on-demand list prices, {worst['instance_hours']} instance-hours")
    if show_requests:
        lines += ["", "Requests (as they would be sent):"]
        for entry in result["requests"]:
            # one printed line per JSON line: the printer escapes control characters line by line
            lines += [f"# {entry['operation']} ({entry['stage']})", *json.dumps(entry["request"], indent=1).splitlines()]
    else:
        lines += ["", "(without --brief: the CreateTrainingJob / CreateProcessingJob requests as they would be sent)"]
    return lines
