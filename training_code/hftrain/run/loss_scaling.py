"""Whether a model's own loss uses the Trainer's `num_items_in_batch` (gradient accumulation scaling).

transformers 5.3 decides it from the signature: a `forward` that declares `**kwargs` counts as consuming
`num_items_in_batch` (Trainer.__init__, "Model introspection"). The Trainer then passes the token count of all
accumulated micro-batches to the model and skips its own division by the number of micro-batches
(Trainer.training_step). Many heads declare `**kwargs` but compute a plain mean with `CrossEntropyLoss()`:
BartForConditionalGeneration, T5ForConditionalGeneration and the BERT/RoBERTa/DistilBERT classification heads.
For them neither normalization happens, so the logged loss and the gradient grow with
gradient_accumulation_steps (x4 at 4), and with `average_tokens_across_devices` also with the number of ranks
(huggingface/transformers#47688, open at the time of writing).

The heads that do use it pass their keyword arguments on to `self.loss_function(..., **kwargs)` (the causal-LM
heads); `consumes_num_items` looks for that call in the source of the model's `forward`. When in doubt it answers
False: the Trainer then divides each micro-batch's mean loss by the number of micro-batches, the correct scale
(per micro-batch rather than per token weighting, as before transformers 4.46).

The gradient is divided a second time: Trainer.training_step divides the loss by the number of micro-batches
(or the model divides by the token count of all of them), then `Accelerator.backward` divides by the
accelerator's `gradient_accumulation_steps` again, which the Trainer sets to the same number
(huggingface/transformers#40709, open). The gradient at accumulation 4 is then a quarter of the gradient of the
same rows in one batch, and `max_grad_norm` clips four times later. The Trainer does its own accumulation (it sets
`sync_gradients` itself and never calls `Accelerator.accumulate`), and in accelerate 1.15 nothing but `backward`
and DeepSpeed's config reads that number, so `settle` sets it to 1 (not under DeepSpeed: it takes its
`gradient_accumulation_steps` from there, and accelerate leaves DeepSpeed's loss alone).
"""

from __future__ import annotations

import inspect
import logging
import re

logger = logging.getLogger(__name__)

# `loss_function(` ... `**kwargs` ... `)`, allowing one level of nested parentheses in the arguments
_PASSES_KWARGS = re.compile(r"loss_function\((?:[^()]|\([^()]*\))*\*\*\w+")


def consumes_num_items(model) -> bool:
    """True when `model.forward` hands `num_items_in_batch` to its loss (see the module docstring)."""
    declared = getattr(type(model), "accepts_loss_kwargs", None)
    if declared is not None:  # the model says so itself
        return bool(declared)
    try:
        source = inspect.getsource(type(model).forward)
    except (OSError, TypeError):
        return False
    return bool(_PASSES_KWARGS.search(source))


def settle(trainer) -> None:
    """After Trainer.__init__: one division by the accumulation (see the module docstring)."""
    from accelerate.utils import DistributedType

    if trainer.accelerator.distributed_type != DistributedType.DEEPSPEED:
        trainer.accelerator.gradient_accumulation_steps = 1  # the Trainer has divided already
    if not getattr(trainer, "model_accepts_loss_kwargs", False):
        return
    model = trainer.accelerator.unwrap_model(trainer.model)
    if hasattr(model, "get_base_model"):  # PEFT: the wrapped model's forward computes the loss
        model = model.get_base_model()
    if not consumes_num_items(model):
        trainer.model_accepts_loss_kwargs = False
        logger.info("%s computes a mean loss without num_items_in_batch: the loss is divided by the number of "
                    "accumulated batches", type(model).__name__)
