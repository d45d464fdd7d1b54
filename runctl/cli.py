"""Command line: python -m runctl submit SPEC [--name] | status RUN | stop RUN | plan SPEC | list | logs RUN |
compare RUN_A RUN_B."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
from pathlib import Path
from typing import Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError, NoRegionError

from hfsm_lambda.goodput import text as goodput
from hfsm_lambda.runs import verdict
from pipeline_runs.clients import Clients
from pipeline_runs.listing import list_runs
from pipeline_runs.status import RunNotFound
from pipeline_runs.status import status as run_status
from runctl import core, local_runs, observe

NOT_BEATEN, NOT_BEATEN_PHRASE = verdict.NOT_BEATEN, verdict.NOT_BEATEN_PHRASE


GLOBAL_DEFAULTS: dict[str, Any] = {"state_machine_arn": None, "project": None, "env": None, "region": None,
                                   "profile": None, "json": False, "local": False,
                                   "local_runs": local_runs.DEFAULT_ROOT, "cdk_out": Path("cdk.out")}
LOCAL_COMMANDS = ("list", "status", "logs", "prune", "compare")


def _globals() -> argparse.ArgumentParser:
    """The options every command takes, before or after its name (as aws-cli's do). SUPPRESS: a command that does
    not repeat one keeps what was given before it (the defaults are set once, on the main parser)."""
    options = argparse.ArgumentParser(add_help=False)
    add, suppress = options.add_argument, argparse.SUPPRESS
    add("--state-machine-arn", default=suppress, help=f"fine-tune state machine (default: ${core.ARN_ENV}, else the "
                                                      f"{core.OUTPUT_KEY} output of stack <project>-<env>-pipeline)")
    add("--project", default=suppress, help=f"project name for the stack lookup (default: ${core.PROJECT_ENV} or hfsm)")
    add("--env", default=suppress, help=f"environment (default: ${core.ENVIRONMENT_ENV} or dev)")
    add("--region", default=suppress, help="AWS region (default: the AWS configuration)")
    add("--profile", default=suppress, help="AWS profile")
    add("--json", action="store_true", default=suppress, help="print JSON instead of text")
    add("--local", action="store_true", default=suppress,
        help=f"local runs (python -m local_mode), read from --local-runs; no AWS call ({', '.join(LOCAL_COMMANDS)})")
    add("--local-runs", type=Path, default=suppress, help=f"where local runs are (default: {local_runs.DEFAULT_ROOT})")
    add("--cdk-out", type=Path, default=suppress, help="the synthesized app whose settings --env names (plan, "
                                                       "stage-model; default: cdk.out; `make synth ENV=NAME`)")
    return options


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="runctl", description="Start, watch and stop fine-tuning runs.",
                                     parents=[_globals()])
    parser.set_defaults(**GLOBAL_DEFAULTS)
    sub = parser.add_subparsers(dest="command", required=True)

    def add(name: str, **kwargs: Any) -> argparse.ArgumentParser:
        return sub.add_parser(name, parents=[_globals()], **kwargs)

    submit = add("submit", help="start a run from a run spec file")
    submit.add_argument("spec", help="run spec JSON file (docs/run_spec.md)")
    submit.add_argument("--name", help="run name, overriding the spec's `name`")
    submit.add_argument("--execution-name", help="execution name (default: the new run id)")
    status = add("status", help="show a run's state (text; --json for the whole record)")
    status.add_argument("run", help="run id (the execution name) or execution ARN")
    stop = add("stop", help="stop a run and its SageMaker jobs")
    stop.add_argument("run", help="run id (the execution name) or execution ARN")
    stop.add_argument("--keep-jobs", action="store_true", help="stop only the execution, not running jobs")
    plan = add("plan", help="validate and plan a spec without starting anything: job names, instances, requests, "
                            "worst-case cost")
    plan.add_argument("spec", help="run spec JSON file (docs/run_spec.md); its model may be a model folder on this "
                                   "machine (planned where `runctl stage-model --from-dir` puts it)")
    plan.add_argument("--name", help="run name, overriding the spec's `name`")
    plan.add_argument("--settings", help="PIPELINE_SETTINGS JSON file instead of the environment's")
    plan.add_argument("--deployed", action="store_true", help="the deployed Prepare function's settings instead of "
                                                              "cdk.out's, and the checks that call AWS (data in S3, "
                                                              "job names); needs AWS credentials")
    plan.add_argument("--offline", action="store_true", help="with --deployed or --settings: skip the checks that "
                                                             "call AWS (data in S3, job names)")
    plan.add_argument("--brief", action="store_true", help="leave out the full requests")
    listing = add("list", help="recent runs with state, duration and cost")
    listing.add_argument("--limit", type=int, default=20)
    logs = add("logs", help="CloudWatch logs of every job, host and attempt of a run, in time order")
    logs.add_argument("run", help="run id (the execution name) or execution ARN")
    logs.add_argument("--follow", "-f", action="store_true", help="keep printing until the run ends")
    logs.add_argument("--interval", type=float, default=5.0, help="seconds between looks with --follow")
    staging = add("stage-model", help="upload a model under base-models/ of the environment's data bucket: a Hub "
                                      "model downloaded here, or a model folder on this machine (--from-dir)")
    staging.add_argument("hub_id", nargs="?", help="Hugging Face Hub id, e.g. FacebookAI/roberta-base (optional "
                                                   "with --from-dir: then the folder's name and content name it)")
    staging.add_argument("--revision", help="branch, tag or commit (default: main); the commit is in the S3 path")
    staging.add_argument("--from-dir", type=Path, help="upload this model folder (save_pretrained) instead of "
                                                       "downloading")
    staging.add_argument("--bucket", help="the data bucket (default: the one cdk.out names for --env)")
    staging.add_argument("--allow-pickle", action="store_true",
                         help="upload pickle files (pytorch_model.bin, ...) too, and a model without safetensors "
                              "weights; the spec then needs the hyperparameter allow_pickle: true")
    prune = add("prune", help="delete old local runs (--local): --older-than AGE and/or --keep N; never a run in "
                              "progress")
    prune.add_argument("--older-than", metavar="AGE", help="runs started longer ago than AGE: 7d, 12h, 30m, 90s")
    prune.add_argument("--keep", type=int, metavar="N", help="keep the N newest runs whatever their age")
    prune.add_argument("--dry-run", action="store_true", help="say what would be deleted, delete nothing")
    compare = add("compare", help="two runs side by side: spec differences, final metrics, goodput, cost, verdict")
    compare.add_argument("run_a", help="run id (the execution name) or execution ARN")
    compare.add_argument("run_b", help="run id (the execution name) or execution ARN")
    compare.add_argument("--tracking-uri", default=os.environ.get("MLFLOW_TRACKING_URI", ""),
                         help="the MLflow tracking server (its ARN, or http://...; default $MLFLOW_TRACKING_URI; "
                              "--local: the server over <local runs>/mlflow/ when there is one)")
    compare.add_argument("--no-tracking", action="store_true", help="compare the runs' summaries, not MLflow")
    return parser


def _clients(args: argparse.Namespace) -> Clients:
    return Clients(boto3.session.Session(profile_name=args.profile, region_name=args.region))


def _print(args: argparse.Namespace, data: dict[str, Any], lines: list[str]) -> None:
    print(json.dumps(data, indent=2, default=str) if args.json else "\n".join(core.printable(line) for line in lines))


def _status_lines(info: dict[str, Any]) -> list[str]:
    judged = (info.get("result") or {}).get("verdict") or {}
    # a run whose model did not learn is not shown as SUCCEEDED: its execution completed, nothing more
    state = f"COMPLETED{NOT_BEATEN_PHRASE.removeprefix('completed')} (execution {info['status']})" \
        if judged.get("verdict") == NOT_BEATEN else info["status"]
    lines = [f"Run:        {info.get('run_id') or '(not planned yet)'}", f"Status:     {state}",
             f"Execution:  {info['execution_arn']}", f"Started:    {info['started']}"]
    if info.get("stopped"):
        lines.append(f"Stopped:    {info['stopped']}")
    if info.get("job"):
        job = info.get("job_status") or {}
        detail = " / ".join(str(v) for v in (job.get("status"), job.get("secondary_status")) if v)
        lines.append(f"Job:        {info['job']} (attempt {info.get('attempt')}) {detail}".rstrip())
        if job.get("failure_reason"):
            lines.append(f"Reason:     {job['failure_reason']}")
    lines += _checkpoint_lines(info)
    lines += _goodput_lines(info)
    if info.get("error"):
        lines += [f"Error:      {info['error']}", f"Cause:      {info.get('cause')}"]
    if info.get("result"):
        result = info["result"]
        lines += [f"Model:      {result.get('model_uri')}", f"Package:    {result.get('model_package_arn')}",
                  f"Metrics:    {json.dumps(result.get('metrics'))}"]
        if judged:
            lines.append(f"Verdict:    {judged.get('text')}")
    lines.append(f"Report:     {info['report']}" if info.get("report") else f"Console:    {info['console_url']}")
    return lines


def _checkpoint_lines(info: dict[str, Any]) -> list[str]:
    """The newest checkpoint complete in S3 (durability watchdog) and, for a finished run, its interruptions."""
    lines = []
    durable = info.get("durability")
    if durable:
        step = durable.get("last_durable_step")
        text = "none in S3 yet" if step is None else f"step {step} saved {durable.get('last_durable_at')}"
        if durable.get("age_minutes") is not None:
            text += f", {durable['age_minutes']:g} min of training since"
        lines.append(f"Checkpoint: {text} (checked {durable.get('checked_at')})")
        if durable.get("stale"):
            what = "job stopped to resume elsewhere" if durable.get("stopped_at") else "warned"
            lines.append(f"Warning:    no new checkpoint within {durable.get('threshold_minutes'):g} min ({what})")
    result = info.get("result") or {}
    for record in result.get("interruptions") or []:
        lost = record.get("lost_minutes")
        reached = record.get("step_reached")
        lines.append(f"Interrupted: step {'unknown' if reached is None else reached} reached, resumed from "
                     f"{record.get('resumed_from_step') or 0}, "
                     f"{'?' if record.get('lost_steps') is None else record['lost_steps']} step(s) / "
                     f"{goodput.lost_time(lost)} lost"
                     + (f" (unknown: {record['unknown']})" if record.get("unknown") else ""))
    return lines


def _goodput_lines(info: dict[str, Any]) -> list[str]:
    """The goodput ledger: the run summary's, or computed now for a running run (lambda/goodput/ledger.py)."""
    ledger = (info.get("result") or {}).get("goodput") or info.get("goodput")
    if not isinstance(ledger, dict):
        return []
    if ledger.get("error"):
        return [f"Goodput:    not available ({ledger['error']})"]
    so_far = " so far" if info.get("status") == "RUNNING" else ""
    lines = goodput.summary_lines(ledger)
    return [line.replace("Goodput: ", f"Goodput{so_far}: ", 1) if i == 0 else f"  {line}"
            for i, line in enumerate(lines)]


def _user() -> str:
    try:
        return getpass.getuser()
    except OSError:
        return os.environ.get("USER", "unknown user")


def _plan_deployed(args: argparse.Namespace) -> bool:
    """plan reads the deployed stack (and calls AWS) only when asked to: --deployed or a state machine ARN."""
    return bool(args.deployed or args.state_machine_arn or os.environ.get(core.ARN_ENV))


def _plan(args: argparse.Namespace, clients: Clients | None, arn: str | None) -> int:
    from runctl import plan

    spec = core.load_spec(args.spec, args.name)
    folder = core.local_model_folder(spec, args.spec)
    offline = args.offline or clients is None
    if args.settings:
        try:
            settings_text = Path(args.settings).read_text()
        except OSError as err:
            raise core.RunctlError(f"cannot read {args.settings}: {err.strerror}") from err
    elif clients is None:
        from runctl import synthesized

        environment = args.env or os.environ.get(core.ENVIRONMENT_ENV, "dev")
        settings_text = synthesized.settings_text(Path(args.cdk_out), environment)
    else:
        settings_text = plan.deployed_settings_text(clients, arn)
    staged = []
    if folder is not None:  # planned where `stage-model --from-dir` puts it (lambda's rules know no local paths)
        from runctl import stage_model

        uri = stage_model.staged_uri(plan.data_bucket(settings_text), folder)
        staged = [f"Model: {spec['model']} is a folder on this machine ({folder}): planned as {uri}, where "
                  f"`runctl stage-model --from-dir {folder} --env {args.env or os.environ.get(core.ENVIRONMENT_ENV, 'dev')}` uploads it (before submit)", ""]
        spec["model"] = uri
    result = plan.plan(clients, spec, settings_text=settings_text, offline=offline)
    if folder is not None:
        result["model_folder"] = {"folder": str(folder), "planned_as": spec["model"]}
    if clients is None and not args.settings:
        result["settings_source"] = f"{args.cdk_out} (synthesized; no AWS call)"
    _print(args, result, staged + plan.plan_lines(result, show_requests=not args.brief))
    return 0 if result["ok"] else 1


def _stage_model(args: argparse.Namespace, clients: Clients | None) -> int:
    from runctl import stage_model

    environment = args.env or os.environ.get(core.ENVIRONMENT_ENV, "dev")
    bucket, region = (args.bucket, args.region) if args.bucket else stage_model.data_bucket(args.cdk_out, environment)
    clients = clients or Clients(boto3.session.Session(profile_name=args.profile, region_name=args.region or
                                                            region))
    result = stage_model.stage(clients, bucket, args.hub_id, revision=args.revision, from_dir=args.from_dir,
                               say=(lambda _: None) if args.json else print, allow_pickle=args.allow_pickle)
    if args.json:
        print(json.dumps(result, indent=2))
    return 0


NOT_LOCAL = {
    "submit": "a local run starts with `python -m local_mode run SPEC --data DIR` (runctl submit starts runs in AWS)",
    "stage-model": "a local run uploads a model folder itself: put the folder's path in the spec's `model` "
                   "(python -m local_mode run)",
    "stop": "a local run ends with its `python -m local_mode` command (Ctrl-C stops it): there is nothing to stop",
}


def _compare(args: argparse.Namespace, summary: Any, local_root: Path | None = None) -> None:
    """runctl compare: from MLflow when tracking is on (a URI, or local runs' own server), else the summaries."""
    from contextlib import ExitStack

    from hfsm_lambda.tracking.rest import MlflowRest, MlflowRestError
    from runctl import compare

    with ExitStack() as stack:
        uri, browse = "" if args.no_tracking else args.tracking_uri, ""
        if not uri and not args.no_tracking and local_root is not None and (local_root / "mlflow" / "mlflow.db").exists():
            from local_mode.tracking_server import BROWSE_URI, TrackingServer, TrackingServerError

            try:  # the local runs' MLflow server, for as long as compare reads it
                uri, browse = stack.enter_context(TrackingServer(local_root / "mlflow")).uri, BROWSE_URI
            except TrackingServerError as err:
                print(f"runctl: comparing the summaries: {err}", file=sys.stderr)
        try:
            rest = MlflowRest(uri, timeout=60) if uri else None  # a person waits; a loaded server answers
        except MlflowRestError as err:
            raise core.RunctlError(str(err)) from None
        a, b = (compare.view(run, rest, lambda run=run: summary(run), browse) for run in (args.run_a, args.run_b))
    _print(args, compare.as_json(a, b), compare.compare_lines(a, b))


def _local(args: argparse.Namespace) -> int:
    """list/status/logs/prune of local runs (runctl/local_runs.py): what each run kept, printed as for AWS runs."""
    root = args.local_runs
    if args.command in NOT_LOCAL:
        raise core.RunctlError(f"{args.command} --local: {NOT_LOCAL[args.command]}")
    if args.command == "plan":
        if _plan_deployed(args):
            raise core.RunctlError("plan --local reads cdk.out and calls no AWS; --deployed reads the deployed stack: "
                                   "choose one")
        return _plan(args, None, None)
    if args.command == "prune":
        from runctl import prune

        result = prune.prune(root, older_than=args.older_than, keep=args.keep, dry_run=args.dry_run)
        _print(args, result, prune.lines(result))
    elif args.command == "list":
        rows, lines = local_runs.list_lines(root, args.limit)
        _print(args, {"runs": rows}, lines)
    elif args.command == "status":
        info = local_runs.status(root, args.run)
        _print(args, info, _status_lines(info))
    elif args.command == "compare":
        _compare(args, lambda run: local_runs.status(root, run).get("result"), local_root=root)
    else:
        print("\n".join(local_runs.log_lines(root, args.run)))
    return 0


def _submitted_spec(args: argparse.Namespace) -> dict[str, Any]:
    spec = core.load_spec(args.spec, args.name)
    folder = core.local_model_folder(spec, args.spec)
    if folder is not None:
        raise core.RunctlError(f"{args.spec}: model {spec['model']} is a folder on this machine ({folder}); a job reads "
                               f"its model from S3: `runctl stage-model --from-dir {folder}` uploads it and prints the "
                               "s3:// URI to put in the spec's model")
    return spec


def main(argv: list[str] | None = None, clients: Clients | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        if args.local:
            return _local(args)
        if args.command == "prune":
            raise core.RunctlError("prune deletes local runs (add --local); in AWS, checkpoints expire by the buckets' "
                                   "lifecycle rules (checkpoint_expiry_days in cdk.json)")
        if args.command == "stage-model":
            return _stage_model(args, clients)
        if args.command == "compare":  # AWS only for a run read from its summary (not found in MLflow)
            def summary(run: str) -> Any:
                found = clients or _clients(args)
                machine = core.resolve_state_machine_arn(found, arn=args.state_machine_arn, project=args.project,
                                                         environment=args.env)
                return run_status(found, core.execution_arn_for(machine, run)).get("result")

            _compare(args, summary)
            return 0
        if args.command == "plan" and (not _plan_deployed(args) and not args.settings or args.settings and
                                       args.offline):
            return _plan(args, None, None)  # no AWS at all
        spec = _submitted_spec(args) if args.command == "submit" else {}  # a mistake in it is said before any AWS call
        clients = clients or _clients(args)
        arn = core.resolve_state_machine_arn(clients, arn=args.state_machine_arn, project=args.project,
                                             environment=args.env)
        if args.command == "plan":
            return _plan(args, clients, arn)
        if args.command == "list":
            rows = list_runs(clients, arn, limit=args.limit)
            _print(args, {"runs": rows}, observe.list_lines(rows))
        elif args.command == "logs":
            observe.follow_logs(clients, core.execution_arn_for(arn, args.run), follow=args.follow,
                                interval=args.interval)
        elif args.command == "submit":
            started = core.submit(clients, arn, spec, execution_name=args.execution_name)
            _print(args, started, [f"Run:        {started['run_id']}", f"Execution:  {started['execution_arn']}",
                                   f"Console:    {started['console_url']}",
                                   f"Follow it:  runctl status {started['run_id']}"])
        elif args.command == "status":
            info = run_status(clients, core.execution_arn_for(arn, args.run))
            _print(args, info, _status_lines(info))
        else:
            result = core.stop(clients, core.execution_arn_for(arn, args.run), keep_jobs=args.keep_jobs,
                               who=_user())
            what = "stopped" if result["stopped_execution"] else f"was already {result['previous_status']}"
            lines = [f"Execution {result['execution_arn']} {what}"]
            lines += [f"Stopped job {name}" for name in result["stopped_jobs"]]
            lines.append(f"Console:    {result['console_url']}")
            _print(args, result, lines)
    except (core.RunctlError, RunNotFound) as err:
        print(f"runctl: error: {err}", file=sys.stderr)
        return 2
    except (NoRegionError, NoCredentialsError) as err:
        missing = "region" if isinstance(err, NoRegionError) else "credentials"
        print(f"runctl: error: no AWS {missing} configured ({err}). Set them (--region and --profile, the "
              "AWS_REGION and AWS_PROFILE variables, or `aws configure`), or add --local to work with the runs of "
              "`python -m local_mode` on this machine (runctl list --local)", file=sys.stderr)
        return 2
    except (ClientError, BotoCoreError) as err:
        print(f"runctl: AWS error: {err}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        raise  # `runctl logs RUN | head`: the reader went away; runctl/__main__.py ends it quietly
    except OSError as err:  # a file named on the command line that cannot be read or written
        print(f"runctl: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("runctl: stopped (Ctrl-C)", file=sys.stderr)
        return 130
    return 0
