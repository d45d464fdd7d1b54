"""The training phases of a run (runner.TrainingRun): the Trainer, training with checkpoint fallback, the final
evaluation and the outputs."""

from __future__ import annotations

import json
import logging
import math
import os
import time

from hftrain.checkpoint import resume
from hftrain.data import packing, sharding
from hftrain.data.files import DataError
from hftrain.parallel import fsdp
from hftrain.parallel.nccl import NcclTransportCallback
from hftrain.run import export
from hftrain.run.callbacks import (
    CheckpointCallback,
    EpochCallback,
    LogLinesCallback,
    ReleaseStagedCheckpoint,
    emit_metrics,
)
from hftrain.run.goodput import GoodputCallback
from hftrain.run.progress import ProgressLineCallback
from hftrain.run.startup import record_start
from hftrain.run.trainer import make_trainer_class
from hftrain.scoring import baselines
from hftrain.stall import injection as stall_injection
from hftrain.stall import watchdog as stall
from hftrain.stall.hooks import StallCallback

logger = logging.getLogger("hftrain")


class TrainingPhases:
    """runner.TrainingRun's phases from the Trainer to the outputs (after StartupPhases)."""

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
        return trainer

    def _callbacks(self) -> list:
        decision = self.decision
        return [
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
            GoodputCallback(self.clock),  # last: the markers and rotation of CheckpointCallback count as save time
        ]

    # --- train: from the agreed checkpoint, falling back to an older one when it fails to load
    def train(self):
        args = self.args
        steps_per_epoch = math.ceil(self.layout.plan.num_batches / args.gradient_accumulation_steps)
        total_steps = args.max_steps if args.max_steps > 0 else math.ceil(args.num_train_epochs * steps_per_epoch)
        while True:
            trainer = self.build_trainer()
            try:
                return trainer, self._train_once(trainer, total_steps)
            except resume.CheckpointLoadError as err:
                if self.decision.step is None or args.resume_from_checkpoint:
                    raise
                self.planner.release(self.decision)
                self.decision = self.planner.next_after(self.decision.step, err.reason)
                if self.history is not None:
                    record_start(self.history, self.decision, self.env, self.world)
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
