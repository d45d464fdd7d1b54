"""The Trainer subclass every task trains with: our train dataloader, weighted batches, guarded checkpoint loads.

The library workarounds it applies live in compat.py, tasks/loss_scaling.py and parallel/fsdp.py.
"""

from __future__ import annotations

import logging
import os
import time

from contract.checkpoint_marker import checkpoint_name
from hftrain.checkpoint import background, resume, volume
from hftrain.data import packing, sharding
from hftrain.parallel import fsdp
from hftrain.run import compat
from hftrain.run.goodput import GoodputClock
from hftrain.run.loss_scaling import settle as settle_loss_scaling
from hftrain.stall import injection as stall_injection
from hftrain.stall import watchdog as stall

logger = logging.getLogger("hftrain")


def make_trainer_class(base):  # noqa: C901 - mccabe counts every method of the class it makes as one function
    class SageMakerTrainer(base):
        """The task's Trainer, reading training batches from the agreed layout and honouring
        zero-weight batches (see data/sharding.py)."""

        def __init__(self, *a, train_loader_factory=None, goodput_clock=None, background_saves=None, **kw):
            self._train_loader_factory = train_loader_factory
            # checkpoint/background.py: saves written behind the loop (None: every save blocks for its whole time)
            self._saves = background_saves
            self._deferred: list | None = None  # the current save's writes, while they are being collected
            # goodput.py: save and evaluation time during training (a clock that writes nothing unless given one)
            self._goodput = goodput_clock or GoodputClock(enabled=False)
            self._injected = stall_injection.mine()  # local mode's injected fault, if any (hftrain/stall/injection.py)
            super().__init__(*a, **kw)
            settle_loss_scaling(self)  # loss and gradient divided once by the accumulation (tasks/loss_scaling.py)

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

        def _evaluate(self, *a, **kw):
            stall.HEART.mark("evaluation", "eval")  # the stall watchdog's longer limit applies
            try:
                self._goodput.eval_begins()
                try:
                    return super()._evaluate(*a, **kw)
                finally:
                    self._goodput.eval_ends()
            finally:
                stall.HEART.mark("train", "train")

        def get_batch_samples(self, *a, **kw):
            stall.HEART.at("data")  # where a step waits when its data loader hangs
            try:
                with stall.HEART.own_time():  # this rank's own time (stall/stragglers.py)
                    return super().get_batch_samples(*a, **kw)
            finally:
                stall.HEART.at("forward_backward")

        def _load_optimizer_and_scheduler(self, checkpoint):
            if checkpoint is None:
                return super()._load_optimizer_and_scheduler(checkpoint)
            resume.guarded_load("optimizer/scheduler", checkpoint,
                               lambda: self._load_optimizer_and_scheduler_on_cpu(checkpoint))

        def _load_optimizer_and_scheduler_on_cpu(self, checkpoint):
            with compat.cpu_map_location(self.args):
                return super()._load_optimizer_and_scheduler(checkpoint)

        def _load_from_checkpoint(self, resume_from_checkpoint, model=None):
            def load():
                super(SageMakerTrainer, self)._load_from_checkpoint(resume_from_checkpoint, model)
                compat.reload_missed_weights(self, resume_from_checkpoint, model)

            resume.guarded_load("model weights", resume_from_checkpoint, load)

        def _save_checkpoint(self, model, trial):
            step = self.state.global_step
            self._goodput.save_begins(step, background=self._saves is not None)  # ends in GoodputCallback.on_save
            stall.HEART.mark(f"checkpoint save of step {step}", "save")
            stall_injection.in_save(self._injected, step)  # local mode's injected hang
            try:
                result = (super()._save_checkpoint(model, trial) if self._saves is None
                          else self._save_in_background(model, trial, step))
            except background.BackgroundSaveError:  # the previous save's failure, said as it is
                raise
            except Exception as err:  # a full volume says so (checkpoint/volume.py); anything else as it is
                volume.raise_save_failure(err, self.args.checkpoint_dir, checkpoint_name(step),
                                          lambda: volume.state_bytes(self.model, self.optimizer))
            stall.HEART.mark("train", "train")
            return result

        def _save_in_background(self, model, trial, step: int):
            """The Trainer's own save with its two large writes (weights, optimizer) deferred to a thread on a
            snapshot: the small files are written now, the rest by checkpoint/background.py."""
            self._saves.wait_for_room()  # at most one save in flight
            self._deferred = []
            try:
                result = super()._save_checkpoint(model, trial)
                writes = self._deferred
            finally:
                self._deferred = None
            self._saves.submit(step, os.path.join(self._get_output_dir(trial=trial), checkpoint_name(step)), writes)
            return result

        def _save(self, output_dir=None, state_dict=None):
            if self._deferred is None:
                return super()._save(output_dir, state_dict)
            self._deferred.append(background.model_write(self, output_dir, state_dict, super()._save))
            return None

        def _save_optimizer_and_scheduler(self, output_dir):
            if self._deferred is None:
                return super()._save_optimizer_and_scheduler(output_dir)
            self._deferred.extend(background.optimizer_writes(self, output_dir))
            return None

        def _load_rng_state(self, checkpoint):
            try:
                super()._load_rng_state(checkpoint)
            except Exception as err:  # noqa: BLE001 - RNG state only makes a resume bit-exact
                logger.warning("RNG state of %s not restored (%s): training continues, not bit-exact", checkpoint, err)

        def _get_eval_sampler(self, eval_dataset):
            return compat.ordered_eval_sampler(self.args, eval_dataset)

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            weight = inputs.pop("loss_weight", None)
            with stall.HEART.own_time():  # the forward pass: this rank's own time, not the wait for its peers
                began = time.perf_counter()
                if packing.is_packed(inputs):  # padding-free rows: the span loss per example (data/packing.py)
                    out = packing.segment_span_loss(model, inputs, return_outputs=return_outputs)
                else:
                    out = super().compute_loss(model, inputs, return_outputs=return_outputs,
                                               num_items_in_batch=num_items_in_batch)
                # local mode's injected straggler (never set by the pipeline)
                stall_injection.straggle(self._injected, self.state.global_step, time.perf_counter() - began)
            return sharding.weighted_loss(out, weight, return_outputs)

    SageMakerTrainer.__name__ = f"SageMaker{base.__name__}"
    return SageMakerTrainer
