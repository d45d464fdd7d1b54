"""The start-up phases of a run (runner.TrainingRun): setup, data, model and tokenizer, tokenization, the
training layout and the resume decision."""

from __future__ import annotations

import copy
import logging
import os

from hftrain.checkpoint import history as run_history
from hftrain.checkpoint import interval as save_interval
from hftrain.checkpoint import manager as checkpoints
from hftrain.checkpoint import resume
from hftrain.data import batching, sharding, tokenized_cache
from hftrain.data.files import DataError
from hftrain.data.raw import data_source, first_rows, gather_sharded, load_raw
from hftrain.parallel import bandwidth
from hftrain.parallel import process_group as distributed
from hftrain.run.callbacks import SigtermCallback
from hftrain.run.model_loading import (
    load_model,
    prepare_tokenizer,
    resolve_model_path,
    resolve_tokenizer_path,
)

logger = logging.getLogger("hftrain")


def record_start(history: run_history.RunHistory, decision: resume.ResumeDecision, env, world: int) -> None:
    interruption = history.record_start({**decision.record(), "hosts": env.hosts, "world_size": world},
                                        resumed_step=decision.step)
    if interruption and interruption.get("unknown"):
        logger.info("interruption: %s; resumed from step %s", interruption["unknown"], decision.step)
    elif interruption:
        lost = interruption["lost_minutes"]
        logger.info("interruption: job %s reached step %d, resumed from step %s: %d step(s) lost (%s minutes)",
                    interruption["job"], interruption["step_reached"], decision.step, interruption["lost_steps"],
                    "?" if lost is None else f"{lost:.2f}")


def decide_resume(training_args, env, model, task_name: str) -> tuple[resume.ResumePlanner, resume.ResumeDecision]:
    """Every rank: verify the checkpoints and agree where to start (checkpoint/resume.py), before any training."""
    root = training_args.checkpoint_dir
    os.makedirs(root, exist_ok=True)
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


class StartupPhases:
    """runner.TrainingRun's phases before training, in the order runner._run calls them."""

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
            record_start(self.history, self.decision, self.env, self.world)
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
