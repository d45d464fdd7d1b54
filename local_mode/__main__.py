"""Local mode CLI: the pipeline offline on this machine, from what `cdk synth` wrote (make synth ENV=dev).

  python -m local_mode demo [--interrupt-at-step N]         the tokenizer stage + QA on 2 hosts, one spot interruption
  python -m local_mode example NAME [NAME ...] | --all      examples/NAME.json as shipped (local overrides said aloud)
  python -m local_mode run SPEC.json [SPEC.json ...] --data DIR [--interrupt-at-step N ...]   specs with your data
      [--inject-stall RANK@STEP[:sigstop|:sigkill|:raise|:slow|:straggle|:loader|:save|:upload] | RANK@startup[:PHASE] ...]
      [--processes-per-host N]
  python -m local_mode data TASK DIR [--family bert]        generated data + a tiny model + a spec using them
  python -m local_mode mlflow [--port 5000]                  the MLflow server over .local-runs/mlflow/ (make mlflow)

Runs land in .local-runs/<time>/ (report/report.md and report/run.json for every run, failed ones too). Each
session starts a real MLflow tracking server on 127.0.0.1 over .local-runs/mlflow/ (--no-tracking: none;
--tracking-uri URL: log to that server) and its runs log to it as cloud runs log to SageMaker's.
"""

from __future__ import annotations

import argparse
import atexit
import logging
import os
import sys
import time
from pathlib import Path
from typing import NoReturn

from cloud_assembly.reader import AssemblyError
from local_mode.run_folder import trim
from pipeline_runs.record import in_progress


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m local_mode", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter, parents=[_globals()])
    parser.set_defaults(cdk_out=Path("cdk.out"), work_dir=None, verbose=False, keep_job_files=False,
                        no_tracking=False, tracking_uri="")
    sub = parser.add_subparsers(dest="command", required=True)
    add = _with_globals(sub)
    demo = add("demo", help="tokenizer stage + QA fine-tuning on 2 hosts with a spot interruption")
    demo.add_argument("--interrupt-at-step", type=int, default=100, help="0: no interruption")
    example = add("example", help="run examples/NAME.json as shipped, with the local overrides said aloud")
    example.add_argument("names", nargs="*", metavar="NAME", help="file name in examples/ without .json")
    example.add_argument("--all", action="store_true", help="every example, one after the other")
    run = add("run", help="run any run spec locally with your data (its model may be a folder here)")
    run.add_argument("spec", type=Path, nargs="+", help="one or more run specs, run one after the other")
    run.add_argument("--data", type=Path, required=True, help="folder uploaded to the data bucket's root first "
                                                "(e.g. DIR/datasets/x/ -> s3://<data>/datasets/x/); every local "
                                                               "session starts with empty buckets")
    run.add_argument("--interrupt-at-step", type=int, action="append", default=None, metavar="N",
                     help="inject a spot interruption at this training step: SIGTERM first, as SageMaker stops a "
                          "job (repeat for several; also: spec local.interrupt_at_step)")
    run.add_argument("--interrupt-abruptly-at-step", type=int, action="append", default=[], metavar="N",
                     help="inject an abrupt interruption at this step: the instances are lost at once (SIGKILL, "
                          "nothing more reaches S3)")
    run.add_argument("--interrupt-during-save", type=int, action="append", default=[], metavar="N",
                     help="inject an abrupt interruption when the save of a checkpoint of step N or later begins")
    run.add_argument("--inject-stall", action="append", default=[], metavar="FAULT",
                     help="make a training job stop making progress, to watch the stall watchdog find it: RANK@STEP "
                          "(global rank RANK sleeps forever after step STEP), RANK@STEP:sigstop (its process is "
                          "SIGSTOPped), RANK@STEP:sigkill, RANK@STEP:raise, RANK@STEP:slow[=SECONDS] (slow but "
                          "alive), RANK@STEP:straggle[=FACTOR] (its own compute FACTOR times as slow, default 2: a "
                          "straggler, named, not ended), RANK@STEP:loader (its data loader blocks), RANK@STEP:save (it hangs in the save "
                          "of step STEP), RANK@STEP:upload (its background write of that checkpoint hangs), "
                          "RANK@startup[:PHASE] (it hangs in a start-up phase: imports, setup, data_load, "
                          "model_load, tokenize, layout (default), resume_verify, restore). Repeat for the run's next training jobs: the n-th fault goes to the n-th "
                          "job (a retry after a stall is a new job; set fallback.max_attempts)")
    run.add_argument("--inject-save-error", default=None, metavar="STEP[@RANK]",
                     help="make the background write of the first checkpoint at or after STEP fail (on global rank "
                          "RANK, default every rank) as a full disk would, in every training job of the run: the "
                          "run must end with the save's error, not train on unprotected")
    run.add_argument("--processes-per-host", type=int, default=1, metavar="N",
                     help="torchrun processes per emulated host (default 1)")
    data = add("data", help="write generated data and a tiny model for a task, and a spec using them")
    data.add_argument("task", help="a task of the training code's registry (hftrain/tasks/; an unknown one is "
                      "refused with the list)")
    data.add_argument("dir", type=Path)
    data.add_argument("--family", help="tiny model family: bert, distilbert, roberta, bart, t5 (default: per task; "
                                         "one that cannot do the task is refused, e.g. summarization: bart, t5)")
    data.add_argument("--rows", type=int, default=320, help="training rows (validation: 64)")
    mlflow = add("mlflow", help="serve the MLflow server of the local runs (.local-runs/mlflow/) for a browser")
    mlflow.add_argument("--port", type=int, default=5000)
    return parser


def _globals() -> argparse.ArgumentParser:
    """The options every sub-command takes, before or after its name (as aws-cli's do). SUPPRESS: a sub-command
    that does not repeat one keeps what was given before it (the defaults are set once, on the main parser)."""
    options = argparse.ArgumentParser(add_help=False)
    options.add_argument("--cdk-out", type=Path, default=argparse.SUPPRESS, help="synthesized app (make synth)")
    options.add_argument("--work-dir", type=Path, default=argparse.SUPPRESS, help="default: .local-runs/<time>")
    options.add_argument("--verbose", action="store_true", default=argparse.SUPPRESS,
                         help="also every log line of the leader hosts, the raw error and cause, tracebacks")
    options.add_argument("--keep-job-files", action="store_true", default=argparse.SUPPRESS,
                         help="keep each job's /opt/ml work folders (code, input copies, checkpoints) after the run; "
                              "by default the run folder keeps the report, logs and model (local_mode/run_folder.py)")
    options.add_argument("--no-tracking", action="store_true", default=argparse.SUPPRESS,
                         help="start no MLflow tracking server; the runs log nowhere")
    options.add_argument("--tracking-uri", default=argparse.SUPPRESS, metavar="URL",
                         help="log to this MLflow server (http://127.0.0.1:PORT) instead of starting one")
    return options


def _with_globals(sub):
    def add(name: str, **kwargs):
        return sub.add_parser(name, parents=[_globals()], **kwargs)

    return add


def _quiet_libraries(verbose: bool) -> None:
    """Library chatter (progress bars, load reports, warnings with tracebacks) only with --verbose."""
    import os

    if not verbose:
        os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
        os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")
        os.environ.setdefault("TQDM_DISABLE", "1")
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    if not verbose:  # moto's interpreter logs every failed state with a repr of its parse tree
        logging.getLogger("moto").setLevel(logging.CRITICAL)
    for handler in logging.getLogger().handlers:
        handler.setLevel(logging.INFO if verbose else logging.WARNING)  # the Lambdas' own loggers say INFO
        if not verbose:
            handler.addFilter(_no_tracebacks)


def _no_tracebacks(record: logging.LogRecord) -> bool:
    record.exc_info, record.exc_text, record.stack_info = None, None, None
    return True


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    _quiet_libraries(args.verbose)
    work_dir = args.work_dir or Path(".local-runs") / time.strftime("%Y%m%d-%H%M%S")
    from local_mode.cli_runs import UsageError, generate_data

    if args.command == "data":
        try:
            generate_data(args.task, args.dir, args.cdk_out, family=args.family, train_rows=args.rows)
        except (AssemblyError, UsageError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 2
        return 0
    created = not work_dir.exists()
    try:
        with in_progress(work_dir):  # runctl prune --local leaves a run in progress alone
            code = _run(args, work_dir)
        if created and not any(work_dir.iterdir()):
            work_dir.rmdir()  # a command refused before it started leaves no empty run folder
        elif not args.keep_job_files:
            before, after = trim(work_dir, inputs=args.command == "demo")
            if before > after:
                # on stderr: the run's own last line (its tally) stays the last line of its output
                print(f"run folder {work_dir}: {after / 1e6:.1f} MB kept (report, logs, model), "
                      f"{(before - after) / 1e6:.1f} MB of job work files deleted (--keep-job-files keeps them)",
                      file=sys.stderr)
    except KeyboardInterrupt:  # a Ctrl-C after the run's own handling (while its folder is trimmed): no traceback
        print("stopped (Ctrl-C)", file=sys.stderr)
        return 130
    return code


def _run(args: argparse.Namespace, work_dir: Path) -> int:
    from local_mode.cli_runs import UsageError, example_names, run_examples, run_files

    # --tracking-uri, else a server of the session's own unless --no-tracking or LOCAL_MODE_TRACKING=off (the tests)
    tracking: bool | str = args.tracking_uri or (
        not (args.no_tracking or os.environ.get("LOCAL_MODE_TRACKING") == "off"))
    try:
        if args.command == "demo":
            from local_mode.demo import run_demo

            outcomes = [run_demo(args.cdk_out, work_dir, interrupt_at_step=args.interrupt_at_step,
                                 verbose=args.verbose, tracking=tracking)]
        elif args.command == "example":
            names = example_names() if args.all else args.names
            if not names:
                raise UsageError(f"name an example or give --all; the examples are: {', '.join(example_names())}")
            outcomes = run_examples(args.cdk_out, work_dir, names, verbose=args.verbose, tracking=tracking)
        elif args.command == "mlflow":
            from local_mode.tracking_server import serve

            return serve(port=args.port)
        else:
            from local_mode.sagemaker.settings import Interruption

            rules = [Interruption(n) for n in args.interrupt_at_step or []]
            rules += [Interruption(n, abrupt=True) for n in args.interrupt_abruptly_at_step]
            rules += [Interruption(n, abrupt=True, during_save=True) for n in args.interrupt_during_save]
            outcomes = run_files(args.cdk_out, work_dir, args.spec, args.data, rules, verbose=args.verbose,
                                 stalls=args.inject_stall, processes_per_host=args.processes_per_host,
                                 save_error=args.inject_save_error, tracking=tracking)
    except (AssemblyError, UsageError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # a second Ctrl-C, or one before a run started: no traceback
        print("stopped (Ctrl-C)", file=sys.stderr)
        return 130
    return 0 if all(o.status == "SUCCEEDED" for o in outcomes) else 1


def _exit(code: int) -> NoReturn:
    """Exit once everything is written and closed, without the interpreter's own teardown: after a run it frees
    torch's and transformers' thousands of modules one by one (about 2 s on 2 cores) for nothing. The exit handlers
    run first, then the streams are flushed."""
    atexit._run_exitfuncs()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    _exit(main())
