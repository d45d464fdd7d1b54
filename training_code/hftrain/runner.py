"""One training run, start to finish: arguments, data, model, layout, checkpoints, Trainer, outputs."""

from __future__ import annotations

import copy
import hashlib
import json
import logging
import math
import os
import sys
import tarfile
import tempfile
import time
from pathlib import Path

from . import args as hp
from . import (
    baselines,
    batching,
    checkpoints,
    distributed,
    export,
    fsdp,
    packing,
    resume,
    run_history,
    sharding,
    smenv,
)
from .callbacks import CheckpointCallback, EpochCallback, LogLinesCallback, SigtermCallback, emit_metrics
from .data import DataError, load_hub, load_local
from .failure import write_failure
from .loss_scaling import settle as settle_loss_scaling
from .nccl import NcclTransportCallback
from .progress import ProgressLineCallback
from .tasks import get_task
from .tasks.base import ModelTaskMismatch

logger = logging.getLogger("hftrain")

USER_ERRORS = (hp.ArgumentError, DataError, ModelTaskMismatch, resume.CheckpointMismatchError)


# ---------------------------------------------------------------- Trainer with our train dataloader


def make_trainer_class(base):
    class SageMakerTrainer(base):
        """The task's Trainer, reading training batches from the agreed layout and honouring
        zero-weight batches (see sharding.py)."""

        def __init__(self, *a, train_loader_factory=None, **kw):
            self._train_loader_factory = train_loader_factory
            super().__init__(*a, **kw)
            settle_loss_scaling(self)  # loss and gradient divided once by the accumulation (loss_scaling.py)

        def create_accelerator_and_postprocess(self):
            fsdp.check_cpu_support(self.args)
            super().create_accelerator_and_postprocess()
            fsdp.enable_on_cpu(self)  # accelerate turns FSDP on for GPU runs only

        def create_optimizer(self, model=None):
            fsdp.group_tied_parameters(self)  # before accelerate's FSDP2 wrapping, which follows this call
            return super().create_optimizer(model)

        def get_train_dataloader(self):
            if self._train_loader_factory is None:
                return super().get_train_dataloader()
            return self._train_loader_factory()

        def _guarded_load(self, what: str, checkpoint, load):
            """Run one load on every rank; if it fails on any, all raise CheckpointLoadError together (the
            runner then falls back to an older checkpoint instead of crashing or hanging)."""
            error = None
            try:
                load()
            except Exception as err:  # noqa: BLE001 - any load failure is a reason to fall back
                error = err
            if distributed.any_rank(error is not None):
                reason = f"{what}: {type(error).__name__}: {error}" if error else f"{what} failed on another rank"
                raise resume.CheckpointLoadError(str(checkpoint), reason) from error

        def _load_optimizer_and_scheduler(self, checkpoint):
            if checkpoint is None:
                return super()._load_optimizer_and_scheduler(checkpoint)
            self._guarded_load("optimizer/scheduler", checkpoint,
                               lambda: self._load_optimizer_and_scheduler_on_cpu(checkpoint))

        def _load_optimizer_and_scheduler_on_cpu(self, checkpoint):
            # Under DDP transformers maps the optimizer state to args.device; on CPU (gloo) that is "cpu:0",
            # a location torch.load cannot restore to. Plain "cpu" is the same memory.
            if self.args.device.type != "cpu" or self.args.world_size <= 1:
                return super()._load_optimizer_and_scheduler(checkpoint)
            import torch

            original = torch.load

            def load(*args, **kwargs):
                if isinstance(kwargs.get("map_location"), torch.device):
                    kwargs["map_location"] = "cpu"
                return original(*args, **kwargs)

            torch.load = load
            try:
                return super()._load_optimizer_and_scheduler(checkpoint)
            finally:
                torch.load = original

        def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
            def load():
                super(SageMakerTrainer, self)._load_from_checkpoint(resume_from_checkpoint, model)
                if not (self.is_fsdp_enabled or self.is_deepspeed_enabled):
                    reload_legacy_named_weights(resume_from_checkpoint, model if model is not None else self.model)

            self._guarded_load("model weights", resume_from_checkpoint, load)

        def _load_rng_state(self, checkpoint):
            try:
                super()._load_rng_state(checkpoint)
            except Exception as err:  # noqa: BLE001 - RNG state only makes a resume bit-exact
                logger.warning("RNG state of %s not restored (%s): training continues, not bit-exact", checkpoint, err)

        def _get_eval_sampler(self, eval_dataset):
            # transformers 5.3 shuffles evaluation under group_by_length (an unseeded LengthGroupedSampler), so
            # predictions would not line up with the features (QA post-processing). Evaluation keeps the order
            # of its features, which the runner puts longest first (batching.longest_first).
            if self.args.world_size <= 1 and eval_dataset is not None:
                import torch

                return torch.utils.data.SequentialSampler(eval_dataset)
            return None

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            weight = inputs.pop("loss_weight", None)
            if packing.is_packed(inputs):  # padding-free rows: the span loss per example (packing.py)
                out = packing.segment_span_loss(model, inputs, return_outputs=return_outputs)
            else:
                out = super().compute_loss(model, inputs, return_outputs=return_outputs,
                                           num_items_in_batch=num_items_in_batch)
            if weight is None:
                return out
            if return_outputs:
                loss, outputs = out
                return loss * weight, outputs
            return out * weight

    SageMakerTrainer.__name__ = f"SageMaker{base.__name__}"
    return SageMakerTrainer


_LEGACY_NAMES = (("LayerNorm.gamma", "LayerNorm.weight"), ("LayerNorm.beta", "LayerNorm.bias"))


def reload_legacy_named_weights(checkpoint: str, model) -> int:
    """Restore weights the Trainer's resume misses in transformers 5.3.

    save_pretrained writes BERT/RoBERTa-style `LayerNorm.weight/bias` under their legacy names
    `LayerNorm.gamma/beta`; from_pretrained renames them back, but Trainer._load_from_checkpoint loads the
    state dict as-is (strict=False), so those parameters silently keep their pre-resume values. Returns the
    number of tensors restored.
    """
    from safetensors.torch import load_file

    index = os.path.join(checkpoint, "model.safetensors.index.json")
    if os.path.isfile(index):
        with open(index) as handle:
            files = sorted(set(json.load(handle)["weight_map"].values()))
    elif os.path.isfile(os.path.join(checkpoint, "model.safetensors")):
        files = ["model.safetensors"]
    else:
        return 0
    wanted = set(model.state_dict().keys())
    restored = {}
    for name in files:
        for key, tensor in load_file(os.path.join(checkpoint, name), device="cpu").items():
            new_key = key
            for old, new in _LEGACY_NAMES:
                if key.endswith(old):
                    new_key = key[: -len(old)] + new
            if new_key != key and new_key in wanted:
                restored[new_key] = tensor
    if restored:
        model.load_state_dict(restored, strict=False)
        logger.info("restored %d legacy-named tensors (LayerNorm gamma/beta) from %s", len(restored), checkpoint)
    return len(restored)


# ---------------------------------------------------------------- model location


def _extract_model_archive(archive: str) -> str:
    """model.tar.gz -> a directory (extracted once per node: local rank 0 first, the others wait)."""
    digest = hashlib.sha256(f"{archive}:{os.path.getsize(archive)}:{os.path.getmtime(archive)}".encode()).hexdigest()
    target = Path(tempfile.gettempdir()) / f"hftrain-model-{digest[:16]}"
    if distributed.local_rank() == 0 and not (target / ".done").exists():
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive, "r:*") as tar:
            tar.extractall(target, filter="data")
        (target / ".done").write_text("ok")
    distributed.barrier()
    # an archive that holds one top-level directory
    entries = [p for p in target.iterdir() if p.name != ".done"]
    if len(entries) == 1 and entries[0].is_dir() and not (target / "config.json").exists():
        return str(entries[0])
    return str(target)


def resolve_model_path(model_args, env: smenv.SageMakerEnv) -> str:
    channel = env.channels.get("model")
    if model_args.model_name_or_path:
        if channel and os.path.isdir(channel) and os.listdir(channel):
            logger.warning("both model_name_or_path and a model channel are set: using %s", model_args.model_name_or_path)
        path = model_args.model_name_or_path
    elif channel and os.path.isdir(channel):
        path = channel
    else:
        raise hp.ArgumentError(
            "no model: set the model_name_or_path hyperparameter (a Hub id or directory) or send a `model` channel"
        )
    if os.path.isfile(path) and (path.endswith((".tar.gz", ".tgz", ".tar"))):
        return _extract_model_archive(path)
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "config.json")):
        archives = sorted(p for p in os.listdir(path) if p.endswith((".tar.gz", ".tgz")))
        if archives:
            return _extract_model_archive(os.path.join(path, archives[0]))
        raise DataError(f"the model directory {path} has no config.json and no model.tar.gz")
    return path


def resolve_tokenizer_path(model_args, env: smenv.SageMakerEnv, model_path: str) -> str:
    if model_args.tokenizer_name_or_path:
        return model_args.tokenizer_name_or_path
    channel = env.channels.get("tokenizer")
    if channel and os.path.isdir(channel) and os.listdir(channel):
        for root, _dirs, files in os.walk(channel):  # the tokenizer stage may nest its output
            if "tokenizer.json" in files or "tokenizer_config.json" in files:
                return root
        raise DataError(f"the tokenizer channel {channel} has no tokenizer.json / tokenizer_config.json")
    return model_path


# ---------------------------------------------------------------- data


def load_raw(data_args, env, which: str, cache_dir):
    """(dataset or None, sharded) for 'train' or 'validation'."""
    explicit = data_args.train_path if which == "train" else data_args.validation_path
    if explicit:
        return load_local(explicit, data_format=data_args.data_format, cache_dir=cache_dir), False
    channel = env.channels.get(which)
    if channel and not os.path.isdir(channel) and env.is_sharded(which):
        return None, True  # ShardedByS3Key with fewer objects than hosts: this host got none
    if channel and os.path.isdir(channel):
        sharded = env.is_sharded(which)
        return load_local(channel, data_format=data_args.data_format, cache_dir=cache_dir, allow_empty=sharded), sharded
    if data_args.dataset_name:
        split = data_args.train_split if which == "train" else data_args.validation_split
        if not split:
            return None, False
        return load_hub(data_args.dataset_name, data_args.dataset_config_name, split, cache_dir), False
    if which == "train":
        raise DataError(
            "no training data: send a `train` channel (SM_CHANNEL_TRAIN), or set train_path (e.g. an FSx path) "
            "or dataset_name (Hub, online only)"
        )
    return None, False


def gather_sharded(dataset):
    """A sharded validation channel: every rank gets every host's rows (validation sets are small)."""
    import datasets

    rows = dataset.to_list() if (dataset is not None and distributed.local_rank() == 0) else []
    everything = [row for part in distributed.all_gather_objects(rows) for row in part]
    if not everything:
        return None
    return datasets.Dataset.from_list(everything)


def prepare_tokenizer(tokenizer, task_name: str):
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is not None:
            tokenizer.pad_token = tokenizer.eos_token
        else:
            raise DataError("the tokenizer has no pad token and no eos token to pad with; add a [PAD] token")
    if task_name == "question-answering" and not getattr(tokenizer, "is_fast", True):
        raise DataError("question answering needs a fast tokenizer (offset mappings)")
    return tokenizer


def load_model(task, model_path, config, model_args):
    kwargs = dict(
        config=config,
        cache_dir=model_args.cache_dir,
        revision=model_args.model_revision,
        trust_remote_code=model_args.trust_remote_code,
        **task.model_kwargs(),
    )
    try:
        return task.auto_model.from_pretrained(model_path, attn_implementation=model_args.attn_implementation, **kwargs)
    except (ValueError, ImportError) as err:
        if model_args.attn_implementation == "eager" or "attn" not in str(err).lower() and "sdpa" not in str(err).lower():
            raise
        logger.warning("attention %s unavailable for this model (%s); using eager", model_args.attn_implementation, err)
        return task.auto_model.from_pretrained(model_path, attn_implementation="eager", **kwargs)


# ---------------------------------------------------------------- checkpoints


def _record_start(history: run_history.RunHistory, decision: resume.ResumeDecision, env, world: int) -> None:
    interruption = history.record_start({**decision.record(), "hosts": env.hosts, "world_size": world},
                                        resumed_step=decision.step)
    if interruption:
        lost = interruption["lost_minutes"]
        logger.info("interruption: job %s reached step %d, resumed from step %s: %d step(s) lost (%s minutes)",
                    interruption["job"], interruption["step_reached"], decision.step, interruption["lost_steps"],
                    "?" if lost is None else f"{lost:.2f}")


def decide_resume(training_args, env, model, task_name: str) -> tuple[resume.ResumePlanner, resume.ResumeDecision]:
    """Every rank: verify the checkpoints and agree where to start (resume.py), before any training."""
    root = training_args.checkpoint_dir
    os.makedirs(root, exist_ok=True)
    identity = checkpoints.model_identity(model.config, task_name)
    planner = resume.ResumePlanner(root, identity, model=model)
    if training_args.resume_from_checkpoint:
        return planner, planner.verify_explicit(training_args.resume_from_checkpoint)
    return planner, planner.plan(resume=training_args.resume)


# ---------------------------------------------------------------- the run


def _map_kwargs(data_args, training_args):
    local_main = distributed.local_rank() == 0
    return {
        "num_proc": data_args.preprocessing_num_workers,
        "load_from_cache_file": (not data_args.overwrite_cache) or not local_main,
    }


def run(model_args, data_args, training_args) -> int:
    from transformers import AutoConfig, AutoTokenizer, set_seed
    from transformers.utils import logging as hf_logging

    started = time.time()
    env = smenv.SageMakerEnv.from_environ()
    if training_args.enable_jit_checkpoint:
        logger.info("enable_jit_checkpoint is replaced by sigterm_checkpoint (multi-node safe)")
        training_args.enable_jit_checkpoint = False

    sigterm = SigtermCallback(save_every_seconds=training_args.save_every_minutes * 60 or None)
    if training_args.sigterm_checkpoint:
        sigterm.install()

    _ = training_args.device  # initializes torch.distributed under torchrun
    rank, world = distributed.rank(), distributed.world_size()
    log_level = training_args.get_process_log_level()
    logging.getLogger("hftrain").setLevel(logging.INFO if training_args.should_log else logging.WARNING)
    hf_logging.set_verbosity(log_level)
    if rank == 0:
        logger.info(
            "task %s on %d host(s) %s, world size %d, device %s, bf16=%s fp16=%s",
            data_args.task, env.num_hosts, env.hosts, world, training_args.device, training_args.bf16,
            training_args.fp16,
        )
    set_seed(training_args.seed)
    cache_dir = model_args.cache_dir
    if data_args.task == "summarization" and training_args.generation_max_length is None:
        training_args.generation_max_length = data_args.val_max_target_length  # also for evaluations mid-training

    # --- data
    task = get_task(data_args.task, data_args)
    raw_train, sharded = load_raw(data_args, env, "train", cache_dir)
    raw_eval, eval_sharded = load_raw(data_args, env, "validation", cache_dir)
    if eval_sharded:
        raw_eval = gather_sharded(raw_eval)
    if raw_train is not None and data_args.max_train_samples:
        raw_train = raw_train.select(range(min(len(raw_train), data_args.max_train_samples)))
    if raw_eval is not None and data_args.max_eval_samples:
        raw_eval = raw_eval.select(range(min(len(raw_eval), data_args.max_eval_samples)))
    first = raw_train if raw_train is not None else raw_eval
    if first is not None:
        task.resolve_columns(first, "the training data" if raw_train is not None else "the validation data")
    if raw_train is not None and raw_eval is not None:
        task.check_columns(raw_eval, "the validation data")
    if data_args.task == "text-classification":
        from .tasks.classification import ordered_labels

        local = set()
        for ds in (raw_train, raw_eval):
            if ds is not None:
                local |= set(ordered_labels(ds.unique(data_args.label_column)))
        task.set_labels(ordered_labels({x for part in distributed.all_gather_objects(sorted(local)) for x in part}))

    # --- model and tokenizer
    model_path = resolve_model_path(model_args, env)
    tokenizer_path = resolve_tokenizer_path(model_args, env, model_path)
    config = AutoConfig.from_pretrained(model_path, cache_dir=cache_dir, revision=model_args.model_revision,
                                        trust_remote_code=model_args.trust_remote_code)
    task.check_model(config)
    task.configure(config)
    tokenizer = prepare_tokenizer(
        # The model's own tokenizer comes from the same (pinned) revision as its config and weights.
        AutoTokenizer.from_pretrained(tokenizer_path, cache_dir=cache_dir, trust_remote_code=model_args.trust_remote_code,
                                      revision=model_args.model_revision if tokenizer_path == model_path else None),
        data_args.task,
    )

    def build_model():  # again after a failed checkpoint load: the base weights, nothing of the checkpoint
        model = load_model(task, model_path, copy.deepcopy(config), model_args)
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

    model = build_model()

    # --- tokenization: once per node (local rank 0 first, the others read the cache)
    map_kwargs = _map_kwargs(data_args, training_args)
    train_features = eval_features = None
    with training_args.main_process_first(local=True, desc="tokenization"):
        if raw_train is not None:
            train_features = task.tokenize_train(raw_train, tokenizer, config, map_kwargs)
        if raw_eval is not None:
            eval_features = task.tokenize_eval(raw_eval, tokenizer, config, map_kwargs)
    if eval_features is not None:
        eval_features = batching.longest_first(eval_features)  # before the metrics read the features
    if raw_train is not None and len(raw_train) > 0 and (train_features is None or len(train_features) == 0):
        raise DataError("tokenization produced no training features (check the columns and max_seq_length)")

    # --- who trains on what
    num_rows = len(train_features) if train_features is not None else 0
    layout = sharding.agree_layout(
        num_rows=num_rows,
        sharded=sharded,
        batch_size=training_args.per_device_train_batch_size,
        rank=rank,
        world_size=world,
        local_rank=distributed.local_rank(),
        local_world_size=distributed.local_world_size() if sharded else 1,
        first_row_fn=(lambda: train_features[0]) if num_rows else None,
    )
    if train_features is None:  # this host received no files: a filler row keeps it in step
        import datasets

        train_features = datasets.Dataset.from_list([layout.filler_row])
        rows = sharding.WeightedRows(train_features)
        num_rows_for_sampler, filler_index = 0, 0
    else:
        rows = sharding.WeightedRows(train_features, extra_row=layout.filler_row)
        num_rows_for_sampler = num_rows
        filler_index = num_rows if layout.filler_row is not None else None
    lengths, grouping = batching.training_lengths(
        train_features if num_rows_for_sampler else None, training_args.train_sampling_strategy,
        training_args.per_device_train_batch_size, training_args.seed, distributed.all_gather_objects)
    if rank == 0:
        logger.info("training batches: %s", grouping)
    trace_path = sharding.trace_path_for(env.current_host, rank)
    trace_ids = None
    if trace_path and raw_train is not None and "id" in raw_train.column_names and len(raw_train) == num_rows:
        trace_ids = [str(x) for x in raw_train["id"]]
    sampler = sharding.EpochBatchSampler(
        num_rows=num_rows_for_sampler,
        group_rank=layout.group_rank,
        group_size=layout.group_size,
        num_batches=layout.plan.num_batches,
        batch_size=training_args.per_device_train_batch_size,
        seed=training_args.data_seed if training_args.data_seed is not None else training_args.seed,
        shuffle=training_args.train_sampling_strategy != "sequential",
        lengths=lengths,
        filler_row=filler_index,
        trace_ids=trace_ids,
        trace_path=trace_path,
    )
    workers = training_args.dataloader_num_workers

    # --- checkpoints: every rank agrees on the newest checkpoint that verifies (or a logged fresh start)
    planner, decision = decide_resume(training_args, env, model, data_args.task)
    history = None
    if rank == 0:
        history = run_history.RunHistory(training_args.checkpoint_dir, job=env.job_name, host=env.current_host,
                                         every_seconds=training_args.progress_every_seconds)
        _record_start(history, decision, env, world)
    keep = training_args.save_total_limit
    training_args.save_total_limit = None  # rotation is ours (this run's verified checkpoints only)
    trainer_cls = make_trainer_class(task.trainer_class)
    compute_metrics = task.compute_metrics(raw_eval, eval_features, tokenizer) if eval_features is not None else None
    if training_args.eval_strategy != "no" and eval_features is None:
        raise DataError("eval_strategy is set but there is no validation data")

    def build_trainer(model, decision):
        train_collator = sharding.WeightedCollator(
            packing.train_collator(task, tokenizer, model, training_args, data_args.task))  # padding-free where it applies

        def train_loader():
            return sharding.EpochDataLoader(
                rows,
                batch_sampler=sampler,
                collate_fn=train_collator,
                num_workers=workers,
                pin_memory=training_args.dataloader_pin_memory,
                persistent_workers=training_args.dataloader_persistent_workers and workers > 0,
                prefetch_factor=training_args.dataloader_prefetch_factor if workers > 0 else None,
            )

        callbacks = [
            sigterm,
            CheckpointCallback(
                root=training_args.checkpoint_dir,
                host=env.current_host,
                hosts=env.hosts,
                keep=keep,
                resumed_step=decision.step,
                ours=decision.ours,
                identity=planner.identity,
                lineage=decision.lineage,
                history=history,
            ),
            EpochCallback(sampler, layout.plan.num_batches),
            LogLinesCallback(),
            ProgressLineCallback(),
            NcclTransportCallback(),  # which network NCCL chose (EFA or a TCP fallback)
        ]
        trainer = trainer_cls(
            model=model,
            args=training_args,
            train_dataset=rows,
            eval_dataset=eval_features,
            processing_class=tokenizer,
            data_collator=task.collator(tokenizer, model, training_args),
            compute_metrics=compute_metrics,
            callbacks=callbacks,
            train_loader_factory=train_loader,
        )
        from transformers.trainer_callback import PrinterCallback

        trainer.remove_callback(PrinterCallback)  # METRIC lines carry the same numbers
        return trainer

    steps_per_epoch = math.ceil(layout.plan.num_batches / training_args.gradient_accumulation_steps)
    total_steps = training_args.max_steps if training_args.max_steps > 0 else math.ceil(
        training_args.num_train_epochs * steps_per_epoch)
    while True:
        trainer = build_trainer(model, decision)
        try:
            if decision.step is not None and decision.step >= total_steps:
                # the previous attempt finished training but not the final save: don't train a step more
                logger.info("training finished at %s already: writing the final model from it", decision.path)
                if trainer.is_fsdp_enabled and fsdp.version(training_args) == 2:
                    fsdp.wrap_without_training(trainer)  # the Trainer loads shards into wrapped models only
                    trainer._load_from_checkpoint(decision.path, trainer.model_wrapped)
                else:
                    trainer._load_from_checkpoint(decision.path)
                metrics = {"train_global_step": float(decision.step)}
            else:
                result = trainer.train(resume_from_checkpoint=decision.path)
                metrics = {k: v for k, v in result.metrics.items() if isinstance(v, int | float)}
            break
        except resume.CheckpointLoadError as err:
            if decision.step is None or training_args.resume_from_checkpoint:
                raise
            decision = planner.next_after(decision.step, err.reason)
            if history is not None:
                _record_start(history, decision, env, world)
            model = build_model()  # the failed load may have changed some weights
    if history is not None and not sigterm.stopped:
        history.beat(trainer.state.global_step, force=True, finished=True)
    if sigterm.stopped:
        if rank == 0:
            logger.warning("stopped by SIGTERM at step %d after saving a checkpoint", trainer.state.global_step)
        sigterm.uninstall()
        distributed.barrier()
        return 0

    if eval_features is not None and training_args.eval_at_end:
        eval_kwargs = {}
        if data_args.task == "summarization":
            eval_kwargs = {"max_length": data_args.val_max_target_length,
                           "num_beams": training_args.generation_num_beams}
        metrics.update({k: v for k, v in trainer.evaluate(**eval_kwargs).items() if isinstance(v, int | float)})
        if rank == 0:
            trivial = baselines.compute(task, data_args, raw_train, raw_eval)
            emit_metrics(trivial)
            metrics.update(trivial)

    # --- the final model: written once, by global rank 0 (all ranks join for sharded models)
    fsdp.save_final_model(trainer, env.model_dir)
    if rank == 0:
        export.make_readable_by_transformers4(env.model_dir)  # the registered inference image is transformers 4.x
        metrics["total_runtime_seconds"] = time.time() - started
        os.makedirs(env.output_data_dir, exist_ok=True)
        with open(os.path.join(env.output_data_dir, "metrics.json"), "w") as handle:
            json.dump(metrics, handle, indent=2, sort_keys=True)
        logger.info("model written to %s, metrics to %s", env.model_dir, env.output_data_dir)
    sigterm.uninstall()
    distributed.barrier()
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
