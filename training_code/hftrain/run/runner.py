"""One training run, start to finish: arguments, data, model, layout, checkpoints, Trainer, outputs (train.py's
`main`)."""

from __future__ import annotations

import logging
import os
import sys
import time

from hftrain import args as hp
from hftrain import smenv
from hftrain.checkpoint import resume, volume
from hftrain.data.files import DataError
from hftrain.data.raw import data_source, gather_sharded, load_raw, row_count
from hftrain.parallel import process_group as distributed
from hftrain.parallel.nccl import NetworkError
from hftrain.run import progress
from hftrain.run.failure import write_failure
from hftrain.run.goodput import GoodputClock
from hftrain.run.model_loading import (
    load_model,
    prepare_tokenizer,
    resolve_model_path,
    resolve_tokenizer_path,
)
from hftrain.run.startup import StartupPhases, decide_resume
from hftrain.run.trainer import make_trainer_class
from hftrain.run.training import TrainingPhases
from hftrain.stall import injection as stall_injection
from hftrain.stall import watchdog as stall
from hftrain.stall.hooks import start_watchdog
from hftrain.tasks import get_task
from hftrain.tasks.base import ModelTaskMismatch

# Importable from here as before the phases moved to startup.py / training.py (tests, smddp_standin).
__all__ = ["TrainingRun", "data_source", "decide_resume", "gather_sharded", "load_model", "load_raw", "main",
           "make_trainer_class", "prepare_tokenizer", "resolve_model_path", "resolve_tokenizer_path", "run"]

logger = logging.getLogger("hftrain")

USER_ERRORS = (hp.ArgumentError, DataError, ModelTaskMismatch, resume.CheckpointMismatchError,
               volume.VolumeFullError, NetworkError)


class TrainingRun(StartupPhases, TrainingPhases):
    """One run's state, filled in phase by phase; `run` below calls the phases in order (startup.py holds the
    start-up phases, training.py the Trainer and the outputs)."""

    def __init__(self, model_args, data_args, training_args, clock: GoodputClock | None = None) -> None:
        self.model_args, self.data_args, self.args = model_args, data_args, training_args
        self.started = time.time()
        self.env = smenv.SageMakerEnv.from_environ()
        self.task = get_task(data_args.task, data_args)
        # What this process spends its time on (goodput.py); lines only from global rank 0 (set in setup).
        self.clock = clock or GoodputClock(job=self.env.job_name, host=self.env.current_host, enabled=False)
        self.clock.mark_imports_done()
        self.injection = stall_injection.mine()  # local mode's injected faults (stall/injection.py)


def _startup_lines(job: TrainingRun, phase: str, seconds: float) -> None:
    """The start-up phase just done, in one line on global rank 0 (progress.setup_line)."""
    if job.rank != 0:
        return
    if phase == "data_load":
        text = f"data loaded: {row_count(job.raw_train)} training / {row_count(job.raw_eval)} validation rows on this host"
    elif phase == "model_load":
        params = sum(p.numel() for p in job.model.parameters())
        text = f"model loaded: {type(job.model).__name__}, {params / 1e6:.1f}M parameters"
    elif phase == "tokenize":
        rows = row_count(job.raw_train) + row_count(job.raw_eval)
        text = f"tokenized {rows} examples at {rows / max(seconds, 1e-6):,.0f}/s"
    else:
        decision = job.decision
        text = (f"restoring checkpoint {os.path.basename(decision.path)} (step {decision.step})" if decision.path
                else "no checkpoint to restore: starting at step 0")
    progress.setup_line(f"{text} ({seconds:.1f} s)")


def run(model_args, data_args, training_args, clock: GoodputClock | None = None) -> int:
    job = TrainingRun(model_args, data_args, training_args, clock)
    watchdog = start_watchdog(training_args)  # every rank, before anything can hang (stall/watchdog.py)
    try:
        return _run(job, training_args)
    finally:  # also when the run raises: a process that goes on (in-process tests) keeps no watchdog
        if watchdog is not None:
            watchdog.stop()


def _run(job: TrainingRun, training_args) -> int:
    for phase, step in (("setup", job.setup), ("data_load", job.load_data), ("model_load", job.load_model_and_tokenizer),
                        ("tokenize", job.tokenize), ("layout", job.lay_out_training),
                        ("resume_verify", job.decide_resume)):
        stall.HEART.mark(phase, "startup")
        stall_injection.at_phase(job.injection, phase)
        began = time.time()
        with job.clock.phase(phase):  # the start-up parts of the goodput ledger (goodput.py)
            step()
        if phase == "setup" and job.rank == 0:
            progress.setup_line(f"{job.task.name} on {job.env.num_hosts} host(s), {job.world} process(es), device "
                                f"{training_args.device.type}")
        elif phase not in ("setup", "layout"):
            _startup_lines(job, phase, time.time() - began)
    stall.HEART.mark("restore", "startup")
    job.prepare_trainer()
    trainer, metrics = job.train()
    if not job.stopped_by_sigterm(trainer):
        job.evaluate(trainer, metrics)
        job.write_outputs(trainer, metrics)
    job.sigterm.uninstall()
    distributed.barrier()
    job.clock.end()
    return 0


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        level=logging.INFO,
        stream=sys.stderr,
    )
    try:
        model_args, data_args, training_args = hp.parse_args(argv)
        return run(model_args, data_args, training_args)
    except USER_ERRORS as err:
        sys.stderr.write(f"ERROR: {err}\n")
        sys.stderr.flush()
        write_failure(str(err), where=_where())
        return 2
    except Exception as err:
        # Not the user's data or settings: the traceback (printed below) is for the log; FailureReason says what.
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        write_failure(f"{type(err).__name__}: {first or 'no message'} (an unexpected error in the training code; "
                      "the traceback is in the job's log)", where=_where())
        raise


def _where() -> str:
    return f"train.py on {os.environ.get('SM_CURRENT_HOST', 'algo-1')}, rank {os.environ.get('RANK', '0')}"
