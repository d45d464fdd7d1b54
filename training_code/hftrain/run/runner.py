"""One training run, start to finish (train.py's `main`): `TrainingRun` owns the run's state and its phases, in the
order `_run` calls them: setup (arguments, logging, seed, SIGTERM), data, model and tokenizer, tokenization, the
training layout, the resume decision; then the Trainer, training with checkpoint fallback, the final evaluation and
the outputs."""

from __future__ import annotations

import copy
import json
import logging
import math
import os
import sys
import time

from contract.checkpoint_marker import checkpoint_name
from hftrain import args as hp
from hftrain import smenv
from hftrain.checkpoint import background, resume, volume
from hftrain.checkpoint import history as run_history
from hftrain.checkpoint import interval as save_interval
from hftrain.checkpoint import manager as checkpoints
from hftrain.data import batching, coverage, packing, sharding, tokenized_cache
from hftrain.data.files import DataError
from hftrain.data.raw import data_source, first_rows, gather_sharded, load_raw, row_count
from hftrain.parallel import bandwidth, fsdp
from hftrain.parallel import process_group as distributed
from hftrain.parallel.nccl import NcclTransportCallback, NetworkError
from hftrain.recovery import generation, peer_copy
from hftrain.run import export, output, progress
from hftrain.run.callbacks import (
    CheckpointCallback,
    EpochCallback,
    LogLinesCallback,
    ReleaseStagedCheckpoint,
    SigtermCallback,
    emit_metrics,
)
from hftrain.run.failure import write_failure
from hftrain.run.goodput import GoodputCallback, GoodputClock
from hftrain.run.judged_eval import JudgedEvaluation
from hftrain.run.model_loading import (
    load_model,
    prepare_tokenizer,
    resolve_model_path,
    resolve_tokenizer_path,
)
from hftrain.run.progress import ProgressLineCallback
from hftrain.run.trainer import make_trainer_class
from hftrain.scoring import baselines
from hftrain.stall import injection as stall_injection
from hftrain.stall import watchdog as stall
from hftrain.stall.hooks import StallCallback, start_watchdog
from hftrain.tasks import get_task
from hftrain.tasks.base import ModelTaskMismatch
from hftrain.tracking.callback import MlflowTrackingCallback

logger = logging.getLogger("hftrain")

USER_ERRORS = (hp.ArgumentError, DataError, ModelTaskMismatch, resume.CheckpointMismatchError,
               volume.VolumeFullError, NetworkError)


def record_start(history: run_history.RunHistory, decision: resume.ResumeDecision, env, world: int,
                 data: dict | None = None) -> None:
    interruption = history.record_start({**decision.record(), "hosts": env.hosts, "world_size": world,
                                         **({"data": data} if data else {})}, resumed_step=decision.step)
    if interruption and interruption.get("unknown"):
        logger.info("interruption: %s; resumed from step %s", interruption["unknown"], decision.step)
    elif interruption:
        lost = interruption["lost_minutes"]
        logger.info("interruption: job %s reached step %d, resumed from step %s: %d step(s) lost (%s)",
                    interruption["job"], interruption["step_reached"], decision.step, interruption["lost_steps"],
                    "? minutes" if lost is None else f"{lost * 60:.1f} s" if lost < 1 else f"{lost:.2f} minutes")


def decide_resume(training_args, env, model, task_name: str) -> tuple[resume.ResumePlanner, resume.ResumeDecision]:
    """Every rank: verify the checkpoints and agree where to start (checkpoint/resume.py), before any training."""
    root = training_args.checkpoint_dir
    os.makedirs(root, exist_ok=True)
    if generation.current():  # a recovery in place: no download gave this host the other hosts' parts
        peer_copy.complete_from_peers(root, env.current_host, list(env.hosts))
    identity = checkpoints.model_identity(model.config, task_name)
    planner = resume.ResumePlanner(root, identity, model=model)
    if training_args.resume_from_checkpoint:
        return planner, planner.verify_explicit(training_args.resume_from_checkpoint)
    return planner, planner.plan(resume=training_args.resume)


def _map_kwargs(data_args, training_args):
    local_main = distributed.local_rank() == 0
    return {
        "num_proc": data_args.preprocessing_num_workers,
        "load_from_cache_file": (not data_args.overwrite_cache) or not local_main,
    }


class TrainingRun:
    """One run: its state, filled in phase by phase, and the phases themselves; `run` below calls them in order
    (the start-up phases setup .. decide_resume, then the Trainer, training, the final evaluation and the outputs)."""

    def __init__(self, model_args, data_args, training_args, clock: GoodputClock | None = None) -> None:
        self.model_args, self.data_args, self.args = model_args, data_args, training_args
        self.started = time.time()
        self.env = smenv.SageMakerEnv.from_environ()
        self.task = get_task(data_args.task, data_args)
        # What this process spends its time on (goodput.py); lines only from global rank 0 (set in setup).
        self.clock = clock or GoodputClock(job=self.env.job_name, host=self.env.current_host, enabled=False)
        self.clock.mark_imports_done()
        self.injection = stall_injection.mine()  # local mode's injected faults (stall/injection.py)

    # --- arguments, logging, seed, SIGTERM
    def setup(self) -> None:
        from transformers import set_seed
        from transformers.utils import logging as hf_logging

        args = self.args
        if args.enable_jit_checkpoint:
            logger.info("enable_jit_checkpoint is replaced by sigterm_checkpoint (multi-node safe)")
            args.enable_jit_checkpoint = False
        self.sigterm = SigtermCallback(save_every_seconds=args.save_every_minutes * 60 or None)
        if args.sigterm_checkpoint:
            self.sigterm.install()
        _ = args.device  # initializes torch.distributed under torchrun
        self.rank, self.world = distributed.rank(), distributed.world_size()
        self.clock.enabled = self.rank == 0
        # MLflow (hftrain/tracking), global rank 0: its worker starts now, its import and lookups off the loop
        self.tracking = MlflowTrackingCallback.from_environ(job=self.env.job_name, world_size=self.world,
                                                           hosts=self.env.num_hosts) if self.rank == 0 else None
        if self.tracking is not None:
            self.tracking.begin()
        log_level = args.get_process_log_level()
        logging.getLogger("hftrain").setLevel(logging.INFO if args.should_log else logging.WARNING)
        hf_logging.set_verbosity(log_level)
        if self.rank == 0:
            logger.info("task %s on %d host(s) %s, world size %d, device %s, bf16=%s fp16=%s", self.task.name,
                        self.env.num_hosts, self.env.hosts, self.world, args.device, args.bf16, args.fp16)
        set_seed(args.seed)
        self.task.adjust_training_args(args)
        # the network before the work (parallel/bandwidth.py): a GPU job across hosts below its floor ends here
        line = bandwidth.probe(instance_type=os.environ.get("SM_CURRENT_INSTANCE_TYPE"), hosts=self.env.num_hosts,
                               require=os.environ.get("HFTRAIN_EXPECT_EFA") == "1"
                               and os.environ.get("HFTRAIN_REQUIRE_EFA", "1") != "0")
        if self.rank == 0:
            logger.info(line)

    # --- data: this rank's raw rows, the columns, what the task reads from all ranks' data
    def load_data(self) -> None:
        data_args, cache_dir = self.data_args, self.model_args.cache_dir
        raw_train, self.sharded = load_raw(data_args, self.env, "train", cache_dir)
        raw_eval, eval_sharded = load_raw(data_args, self.env, "validation", cache_dir)
        self._account_for_every_object({"train": raw_train, "validation": raw_eval},
                                       {"train": self.sharded, "validation": eval_sharded})
        if eval_sharded:
            raw_eval = gather_sharded(raw_eval)
        self.raw_train = first_rows(raw_train, data_args.max_train_samples)
        self.raw_eval = first_rows(raw_eval, data_args.max_eval_samples)
        first = self.raw_train if self.raw_train is not None else self.raw_eval
        if first is not None:
            self.task.resolve_columns(first, "the training data" if self.raw_train is not None
                                      else "the validation data")
        if self.raw_train is not None and self.raw_eval is not None:
            self.task.check_columns(self.raw_eval, "the validation data")
        self.task.learn_from_data((self.raw_train, self.raw_eval), distributed.all_gather_objects)

    def _account_for_every_object(self, loaded: dict, sharded: dict[str, bool]) -> None:
        """Every host's objects read and skipped (data/coverage.py), known to every rank; a host with no readable
        rows of its share of the training data ends the run on every rank at once, with its objects named."""
        records = {}
        for which, dataset in loaded.items():
            source = data_source(self.data_args, self.env, which)
            if (source is None and which not in self.env.channels) or (source or "").startswith("hub:"):
                continue
            records[which] = coverage.host_record(source, self.data_args.data_format, row_count(dataset))
        self.coverage = coverage.gather(records, self.env.current_host, sharded, distributed.all_gather_objects)
        if self.sharded:
            for entry in self.coverage.get("train", {}).get("hosts", []):
                if not entry["rows"]:
                    raise coverage.no_rows_error("train", entry["host"], entry)

    # --- model and tokenizer
    def load_model_and_tokenizer(self) -> None:
        from transformers import AutoConfig, AutoTokenizer

        m = self.model_args
        self.model_path = resolve_model_path(m, self.env)
        tokenizer_path = resolve_tokenizer_path(m, self.env, self.model_path)
        self.config = AutoConfig.from_pretrained(self.model_path, cache_dir=m.cache_dir, revision=m.model_revision,
                                                 trust_remote_code=m.trust_remote_code)
        self.task.check_model(self.config)
        self.task.configure(self.config)
        self.tokenizer = prepare_tokenizer(
            # The model's own tokenizer comes from the same (pinned) revision as its config and weights.
            AutoTokenizer.from_pretrained(tokenizer_path, cache_dir=m.cache_dir, trust_remote_code=m.trust_remote_code,
                                          revision=m.model_revision if tokenizer_path == self.model_path else None),
            self.task,
        )
        self.model = self.build_model()

    def build_model(self):
        """The base weights (again after a failed checkpoint load: nothing of the checkpoint)."""
        tokenizer = self.tokenizer
        model = load_model(self.task, self.model_path, copy.deepcopy(self.config), self.model_args)
        embeddings = model.get_input_embeddings()
        if embeddings is not None and len(tokenizer) > embeddings.num_embeddings:
            logger.warning("tokenizer has %d tokens, model %d embeddings: resizing", len(tokenizer),
                           embeddings.num_embeddings)
            model.resize_token_embeddings(len(tokenizer))
        if model.config.pad_token_id is None:
            model.config.pad_token_id = tokenizer.pad_token_id
        if getattr(model.config, "is_encoder_decoder", False) and model.config.decoder_start_token_id is None:
            start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.pad_token_id
            model.config.decoder_start_token_id = start
            if getattr(model, "generation_config", None) is not None:
                model.generation_config.decoder_start_token_id = start
        return model

    # --- tokenization: once per node (local rank 0 first, the others read the cache); on a restart the
    # tokenized data set kept with the checkpoints (data/tokenized_cache.py) is loaded instead
    def tokenize(self) -> None:
        map_kwargs = _map_kwargs(self.data_args, self.args)

        def build():
            train = eval_ = None
            if self.raw_train is not None:
                train = self.task.tokenize_train(self.raw_train, self.tokenizer, self.config, map_kwargs)
            if self.raw_eval is not None:
                eval_ = self.task.tokenize_eval(self.raw_eval, self.tokenizer, self.config, map_kwargs)
            return train, eval_

        with self.args.main_process_first(local=True, desc="tokenization"):
            cache = self._tokenized_cache() if self.args.tokenized_cache else None
            if cache is None:
                train_features, eval_features = build()
            else:
                result = cache.load_or_build(build, hash_files=distributed.local_rank() == 0)
                train_features, eval_features = result.train, result.eval
                self.clock.tokenize_cache = result.status
                if self.rank == 0:
                    what = {"hit": "loaded the tokenized data set kept with the run from",
                            "miss": "tokenized the data set; kept it for restarts at",
                            "rebuilt": "tokenized the data set again (the cache was refused); kept it at",
                            "skipped": "tokenized the data set; the first host keeps it for restarts at",
                            "unsaved": "tokenized the data set; could not keep it at"}[result.status]
                    logger.info("tokenized cache: %s %s (%.2f s)", what, result.path, result.seconds)
        if eval_features is not None:
            eval_features = batching.longest_first(eval_features)  # before the metrics read the features
        # the verdict's examples (run/judged_eval.py), in their order: a few, evaluated before and after training
        self.judge_raw = self.judge_features = None
        if self.raw_eval is not None and len(self.raw_eval) and self.args.verdict_eval_samples and \
                self.args.eval_at_end and type(self.task).verdict is not None:
            self.judge_raw = first_rows(self.raw_eval, self.args.verdict_eval_samples)
            self.judge_features = self.task.tokenize_eval(self.judge_raw, self.tokenizer, self.config, map_kwargs)
        if self.raw_train is not None and len(self.raw_train) > 0 and (
                train_features is None or len(train_features) == 0):
            raise DataError("tokenization produced no training features (check the columns and max_seq_length)")
        self.train_features, self.eval_features = train_features, eval_features

    def _tokenized_cache(self) -> tokenized_cache.TokenizedCache | None:
        sources = [(which, source) for which in ("train", "validation")
                   if (source := data_source(self.data_args, self.env, which)) is not None]
        if self.raw_train is None and self.raw_eval is None:
            return None
        files = tokenized_cache.data_files_fingerprint(sources, self.data_args.data_format)
        digest, inputs = tokenized_cache.fingerprint(
            data_files=files, tokenizer=self.tokenizer, model_identity=checkpoints.model_identity(
                self.config, self.task.name), task=self.task, data_args=self.data_args)
        # Replicated data: every host has the same fingerprint, the first writes; sharded: each its own.
        writer = (self.sharded or self.env.host_index == 0) and distributed.local_rank() == 0
        return tokenized_cache.TokenizedCache(self.args.checkpoint_dir, digest, inputs, writer=writer,
                                              host=self.env.current_host if self.sharded else None)

    # --- who trains on what (data/sharding.py)
    def lay_out_training(self) -> None:
        args, features = self.args, self.train_features
        num_rows = len(features) if features is not None else 0
        self.layout = sharding.agree_layout(
            num_rows=num_rows,
            sharded=self.sharded,
            batch_size=args.per_device_train_batch_size,
            rank=self.rank,
            world_size=self.world,
            local_rank=distributed.local_rank(),
            local_world_size=distributed.local_world_size() if self.sharded else 1,
            first_row_fn=(lambda: features[0]) if num_rows else None,
        )
        if features is None:  # this host received no files: a filler row keeps it in step
            import datasets

            self.rows = sharding.WeightedRows(datasets.Dataset.from_list([self.layout.filler_row]))
            self.sampler = self._sampler(None, num_rows, 0, 0)
        else:
            self.rows = sharding.WeightedRows(features, extra_row=self.layout.filler_row)
            filler_index = num_rows if self.layout.filler_row is not None else None
            self.sampler = self._sampler(features, num_rows, num_rows, filler_index)

    def _sampler(self, features, num_rows: int, sampled_rows: int, filler_index):
        args, raw = self.args, self.raw_train
        lengths, grouping = batching.training_lengths(
            features if sampled_rows else None, args.train_sampling_strategy, args.per_device_train_batch_size,
            args.seed, distributed.all_gather_objects)
        if self.rank == 0:
            logger.info("training batches: %s", grouping)
        trace_path = sharding.trace_path_for(self.env.current_host, self.rank)
        trace_ids = None
        if trace_path and raw is not None and "id" in raw.column_names and len(raw) == num_rows:
            trace_ids = [str(x) for x in raw["id"]]
        return sharding.EpochBatchSampler(
            num_rows=sampled_rows,
            group_rank=self.layout.group_rank,
            group_size=self.layout.group_size,
            num_batches=self.layout.plan.num_batches,
            batch_size=args.per_device_train_batch_size,
            seed=args.data_seed if args.data_seed is not None else args.seed,
            shuffle=args.train_sampling_strategy != "sequential",
            lengths=lengths,
            filler_row=filler_index,
            trace_ids=trace_ids,
            trace_path=trace_path,
        )

    # --- checkpoints: every rank agrees on the newest checkpoint that verifies (or a logged fresh start)
    def decide_resume(self) -> None:
        args = self.args
        self.planner, self.decision = decide_resume(args, self.env, self.model, self.task.name)
        self.clock.start_step = self.clock.step = self.decision.step or 0
        self.history = None
        if self.rank == 0:
            self.history = run_history.RunHistory(args.checkpoint_dir, job=self.env.job_name,
                                                  host=self.env.current_host, every_seconds=args.progress_every_seconds)
            record_start(self.history, self.decision, self.env, self.world, self.coverage)
            self.clock.on_startup.append(self.history.record_startup_seconds)  # the next start-up limit's measure
        self._auto_interval()
        self.keep = args.save_total_limit
        args.save_total_limit = None  # rotation is ours (this run's verified checkpoints only)

    def _auto_interval(self) -> None:
        """save_interval auto (checkpoint/interval.py): every rank starts from rank 0's view of the run's history and
        measured saves, then follows its own saves' blocking time (a save is due when it is due on any rank)."""
        self.interval = None
        if self.args.save_interval != "auto":
            return
        history = self.history
        inputs = (history.read_history(), list(history.save_seconds)) if history is not None else None
        history_data, saves = distributed.all_gather_objects(inputs)[0]
        self.interval = save_interval.AutoInterval(
            prior_hours=self.args.interruption_prior_hours, history=history_data, previous_saves=saves,
            log=logger.info if self.rank == 0 else (lambda *a: None))
        self.sigterm.interval = self.interval
        self.clock.on_save.append(self.interval.record_save)  # each rank: its own blocking time
        if history is not None:
            self.clock.on_save.append(history.record_save_seconds)

    # --- trainer
    def prepare_trainer(self) -> None:
        self.trainer_cls = make_trainer_class(self.task.trainer_class)
        self.compute_metrics = (self.task.compute_metrics(self.raw_eval, self.eval_features, self.tokenizer)
                                if self.eval_features is not None else None)
        if self.args.eval_strategy != "no" and self.eval_features is None:
            raise DataError("eval_strategy is set but there is no validation data")

    def build_trainer(self):
        from transformers.trainer_callback import PrinterCallback

        args, workers = self.args, self.args.dataloader_num_workers
        train_collator = sharding.WeightedCollator(  # padding-free where it applies
            packing.train_collator(self.task, self.tokenizer, self.model, args, self.task.name))
        if self.injection is not None and self.injection.how == "loader":
            train_collator = stall_injection.HangingCollator(train_collator, self.injection, self.decision.step or 0)

        def train_loader():
            return sharding.EpochDataLoader(
                self.rows,
                batch_sampler=self.sampler,
                collate_fn=train_collator,
                num_workers=workers,
                pin_memory=args.dataloader_pin_memory,
                persistent_workers=args.dataloader_persistent_workers and workers > 0,
                prefetch_factor=args.dataloader_prefetch_factor if workers > 0 else None,
            )

        trainer = self.trainer_cls(
            model=self.model,
            args=args,
            train_dataset=self.rows,
            eval_dataset=self.eval_features,
            processing_class=self.tokenizer,
            data_collator=self.task.collator(self.tokenizer, self.model, args),
            compute_metrics=self.compute_metrics,
            callbacks=self._callbacks(),
            train_loader_factory=train_loader,
            goodput_clock=self.clock,
        )
        trainer.remove_callback(PrinterCallback)  # METRIC lines carry the same numbers
        if self.judged is not None:
            self.judged.trainer = trainer
        self._background_saves(trainer)
        return trainer

    def _background_saves(self, trainer) -> None:
        """Checkpoints written behind the loop (checkpoint/background.py), where the Trainer's saves allow it."""
        if not self.args.background_saves:
            return
        able, why = background.eligible(trainer)
        if not able:
            if self.rank == 0:
                logger.info("checkpoint saves block the loop for their whole time: %s", why)
            return
        marks = next(cb for cb in trainer.callback_handler.callbacks if isinstance(cb, CheckpointCallback))

        def complete(step: int, seconds: float) -> None:
            marks.complete(step)
            self.clock.checkpoint_complete(step, seconds)

        fault = stall_injection.mine()  # local mode's injected faults (never set by the pipeline)
        saves = background.BackgroundSaves(
            mark=marks.mark, on_complete=complete, node_leader=distributed.local_rank() == 0,
            agree=distributed.sum_each,
            inject_failure_at=background.injected_failure_step(os.environ.get(background.INJECT_ENV), self.rank),
            inject_delay=background.injected_delay(os.environ.get(background.DELAY_ENV)),
            inject_hang=lambda step: stall_injection.in_upload(fault, step),
            # the wait is a phase of its own (the save's limit): the heartbeat says what the rank waits for
            on_wait=lambda step: stall.HEART.mark(f"waiting for the background write of checkpoint {step}", "save"),
            describe=lambda err, step: volume.save_failure(err, self.args.checkpoint_dir, checkpoint_name(step),
                                                           lambda: volume.state_bytes(self.model, None)))
        trainer._saves = marks.saves = self.sigterm.saves = saves
        for callback in trainer.callback_handler.callbacks:
            if isinstance(callback, GoodputCallback):
                callback.saves = saves

    def _callbacks(self) -> list:
        decision = self.decision
        self.judged = None
        if self.judge_features is not None:
            self.judged = JudgedEvaluation(
                task=self.task, raw=self.judge_raw, features=self.judge_features, tokenizer=self.tokenizer,
                eval_kwargs=self.task.final_eval_kwargs(self.args), checkpoint_dir=self.args.checkpoint_dir,
                rank=self.rank, fresh=decision.step is None)
        return [*([self.judged] if self.judged else []),
            self.sigterm,
            CheckpointCallback(root=self.args.checkpoint_dir, host=self.env.current_host, hosts=self.env.hosts,
                               keep=self.keep, resumed_step=decision.step, ours=decision.ours,
                               identity=self.planner.identity, lineage=decision.lineage, history=self.history),
            EpochCallback(self.sampler, self.layout.plan.num_batches),
            ReleaseStagedCheckpoint(lambda: self.planner.release(decision)),
            LogLinesCallback(),
            ProgressLineCallback(),
            NcclTransportCallback(),  # which network NCCL chose (EFA or a TCP fallback)
            StallCallback(self.injection),  # every step's end is progress for the stall watchdog
            *self._tracking(),  # MLflow, when the job's environment names a tracking server (hftrain/tracking)
            GoodputCallback(self.clock),  # last: the markers and rotation of CheckpointCallback count as save time
        ]

    def _tracking(self) -> list:
        """The MLflow callback of global rank 0 (made in setup; a Trainer built again continues it)."""
        if getattr(self, "tracking", None) is None:
            return []
        self.tracking.resumed_step = self.decision.step
        return [self.tracking]

    # --- train: from the agreed checkpoint, falling back to an older one when it fails to load
    def train(self):
        args = self.args
        steps_per_epoch = math.ceil(self.layout.plan.num_batches / args.gradient_accumulation_steps)
        total_steps = args.max_steps if args.max_steps > 0 else math.ceil(args.num_train_epochs * steps_per_epoch)
        while True:
            trainer = self.build_trainer()
            try:
                metrics = self._train_once(trainer, total_steps)
                if trainer._saves is not None:
                    with self.clock.save_wait():  # the last checkpoint (a SIGTERM's above all) is complete first
                        trainer._saves.drain()
                return trainer, metrics
            except resume.CheckpointLoadError as err:
                if self.decision.step is None or args.resume_from_checkpoint:
                    raise
                self.planner.release(self.decision)
                self.decision = self.planner.next_after(self.decision.step, err.reason)
                if self.history is not None:
                    record_start(self.history, self.decision, self.env, self.world, self.coverage)
                self.model = self.build_model()  # the failed load may have changed some weights

    def _train_once(self, trainer, total_steps: int) -> dict:
        decision = self.decision
        if decision.step is None or decision.step < total_steps:
            self.clock.restore_started()
            result = trainer.train(resume_from_checkpoint=decision.load_path)
            return {k: v for k, v in result.metrics.items() if isinstance(v, int | float)}
        # the previous attempt finished training but not the final save: don't train a step more
        logger.info("training finished at %s already: writing the final model from it", decision.path)
        self.clock.restore_started()
        if trainer.is_fsdp_enabled and fsdp.version(self.args) == 2:
            fsdp.wrap_without_training(trainer)  # the Trainer loads shards into wrapped models only
            trainer._load_from_checkpoint(decision.load_path, trainer.model_wrapped)
        else:
            trainer._load_from_checkpoint(decision.load_path)
        self.planner.release(decision)
        self.clock.first_step_begins()  # start-up ends here: zero steps, then the final evaluation and model
        return {"train_global_step": float(decision.step)}

    # --- outputs
    def stopped_by_sigterm(self, trainer) -> bool:
        if not self.sigterm.stopped:
            if self.history is not None:
                self.history.beat(trainer.state.global_step, force=True, finished=True)
            return False
        if self.rank == 0:
            logger.warning("stopped by SIGTERM at step %d after saving a checkpoint", trainer.state.global_step)
        return True

    def evaluate(self, trainer, metrics: dict) -> None:
        if self.eval_features is None or not self.args.eval_at_end:
            return
        stall.HEART.mark("final evaluation", "final")
        with self.clock.final("eval"):
            scores = trainer.evaluate(**self.task.final_eval_kwargs(self.args))
            metrics.update({k: v for k, v in scores.items() if isinstance(v, int | float)})
            if self.rank == 0:
                trivial = baselines.compute(self.task, self.raw_train, self.raw_eval)
                emit_metrics(trivial)
                metrics.update(trivial)
            if self.judged is not None:  # every rank evaluates; rank 0 judges
                trained = self.judged.evaluate("judged")
                if self.rank == 0:
                    verdict = self.judged.metrics(trained, self.raw_train, trainer.state.global_step)
                    emit_metrics(verdict)
                    metrics.update(verdict)

    def write_outputs(self, trainer, metrics: dict) -> None:
        """The final model, written once by global rank 0 (all ranks join for sharded models), and metrics.json."""
        env = self.env
        stall.HEART.mark("final model write", "final")
        with self.clock.final("save"):
            fsdp.save_final_model(trainer, env.model_dir)
            if self.rank == 0:  # one writer: a host's ranks share its output dir
                export.make_readable_by_transformers4(env.model_dir)  # the inference image is transformers 4.x
                metrics["total_runtime_seconds"] = time.time() - self.started
                os.makedirs(env.output_data_dir, exist_ok=True)
                with open(os.path.join(env.output_data_dir, "metrics.json"), "w") as handle:
                    json.dump(metrics, handle, indent=2, sort_keys=True)
                logger.info("model written to %s, metrics to %s", env.model_dir, env.output_data_dir)


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
    except Exception as err:
        # a peer's collective error is a consequence: a stall announced wins, else the peer that went silent is
        # named first (stall/watchdog.py peer_failure; main's own message then finds the failure file written)
        peer = stall.peer_failure(err)
        if peer:
            write_failure(peer, where=_where())
        raise
    finally:  # also when the run raises: a process that goes on (in-process tests) keeps no watchdog
        if watchdog is not None:
            watchdog.stop()
        if getattr(job, "tracking", None) is not None:
            job.tracking.close()  # what is queued for MLflow, within a bounded wait (hftrain/tracking)


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
    stall_injection.at_phase(job.injection, "restore")
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
    output.tolerate_closed_output()  # a stop can end the reader of our output before the emergency save is done
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
        # "exit code 2" marks a settings or data error: the pipeline ends the run (contract/failure_causes.py)
        write_failure(str(err), where=f"{_where()}; a settings or data error, exit code 2")
        return 2
    except Exception as err:
        # Not the user's data or settings: the traceback (printed below) is for the log; FailureReason says what.
        first = str(err).strip().splitlines()[0] if str(err).strip() else ""
        write_failure(f"{type(err).__name__}: {first or 'no message'} (after step {stall.HEART.step}; an unexpected "
                      "error in the training code; the traceback is in the job's log)", where=_where())
        raise


def _where() -> str:
    return f"train.py on {os.environ.get('SM_CURRENT_HOST', 'algo-1')}, rank {os.environ.get('RANK', '0')}"
