"""FSDP through the Trainer: FSDP2 also on CPU (gloo), and one consolidated final model.

Why this module exists (accelerate 1.15 / transformers 5.3 / torch 2.13, checked in the installed packages):

* accelerate switches to FSDP only for GPU-like distributed types: `AcceleratorState.__init__` sets
  `DistributedType.FSDP` inside `elif self.distributed_type in [MULTI_GPU, MULTI_MLU, ..., MULTI_NEURON]`
  (accelerate/state.py). A CPU run stays `MULTI_CPU` and the Trainer silently trains plain DDP while the
  user asked for full sharding. FSDP2 itself (`torch.distributed.fsdp.fully_shard`) runs on a CPU device
  mesh with gloo, so on CPU `enable_on_cpu` puts accelerate's state into FSDP mode right after the
  accelerator is created; accelerate and the Trainer then wrap, shard, checkpoint and resume exactly as on GPUs.
* FSDP1 cannot run on CPU at all: with the Trainer's default `sync_module_states=true` accelerate raises
  `RuntimeError: There are currently no available devices found, must be one of 'XPU', 'CUDA', 'MLU', 'NPU',
  'MUSA', or 'HPU'.` in `FullyShardedDataParallelPlugin.__post_init__` (accelerate/utils/dataclasses.py);
  with `sync_module_states=false` torch raises `ValueError: Inconsistent compute device and device_id on
  rank 1: cpu vs cpu:0` in `_get_compute_device` (torch/distributed/fsdp/_init_utils.py). `check_cpu_support`
  turns that into an ArgumentError before the run starts. The pipeline sends fsdp_config version 2.
* The final model: for FSDP2 the Trainer's `save_model` gathers the full state dict with `cpu_offload=True`;
  on CPU that "offload" is a no-op and the tensors point at unsharded parameter storage that FSDP2 frees
  again (`RuntimeError: Attempted to access the data pointer on an invalid python storage` in safetensors).
  `save_final_model` gathers full tensors itself and copies them before global rank 0 writes them.
"""

from __future__ import annotations

import logging
import os

from . import distributed
from .args import ArgumentError

logger = logging.getLogger(__name__)


def version(training_args) -> int | None:
    """The FSDP version the run asks for (None: no FSDP)."""
    if not getattr(training_args, "fsdp", None):
        return None
    config = training_args.fsdp_config or {}
    return int(config.get("version", 1))


def _on_cpu(training_args) -> bool:
    return training_args.device.type == "cpu"


def check_cpu_support(training_args) -> None:
    """FSDP1 on CPU fails inside accelerate/torch (see the module docstring): say so before the run starts."""
    if version(training_args) == 1 and _on_cpu(training_args) and training_args.world_size > 1:
        raise ArgumentError(
            "fsdp_config version 1 (FSDP1) cannot run on CPU: accelerate needs an accelerator device for it "
            "(\"There are currently no available devices found\"). Set \"version\": 2 in distribution.fsdp.config "
            "(the pipeline's default) to run FSDP2, which also runs on CPU"
        )


def enable_on_cpu(trainer) -> bool:
    """After `create_accelerator_and_postprocess`: turn FSDP2 on for a multi-process CPU run (True when it did)."""
    args = trainer.args
    if trainer.is_fsdp_enabled or not args.fsdp_plugin_args or version(args) != 2:
        return False
    if not _on_cpu(args) or args.world_size <= 1:
        return False
    from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

    state = trainer.accelerator.state
    state.fsdp_plugin = FullyShardedDataParallelPlugin(**args.fsdp_plugin_args)
    state.distributed_type = DistributedType.FSDP
    trainer.is_fsdp_enabled = True
    for name in ("limit_all_gathers", "activation_checkpointing"):  # the Trainer's own post-creation step
        setattr(state.fsdp_plugin, name, args.fsdp_config.get(name, getattr(state.fsdp_plugin, name)))
    if distributed.rank() == 0:
        logger.info("FSDP2 on CPU: %d ranks, full sharding over a gloo device mesh", args.world_size)
    return True


def _is_wrapped(model) -> bool:
    """True once FSDP2 has sharded the model (its parameters are DTensors)."""
    from torch.distributed.tensor import DTensor

    return any(isinstance(p, DTensor) for p in model.parameters())


def save_final_model(trainer, output_dir: str) -> None:
    """The consolidated model + tokenizer in `output_dir`, loadable with `from_pretrained` (every rank calls it)."""
    plugin = getattr(trainer.accelerator.state, "fsdp_plugin", None) if trainer.is_fsdp_enabled else None
    if plugin is None:
        trainer.save_model(output_dir)
        return
    if getattr(plugin, "fsdp_version", 1) != 2:
        plugin.set_state_dict_type("FULL_STATE_DICT")
        trainer.save_model(output_dir)
        return
    model = trainer.accelerator.unwrap_model(trainer.model, keep_torch_compile=False)
    if _is_wrapped(model):
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        offload = not _on_cpu(trainer.args)  # on GPUs gather to host memory on rank 0 only
        state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=offload))
        state = {key: tensor.detach().to("cpu", copy=True) for key, tensor in state.items()}
    else:  # nothing trained in this process (the previous attempt finished): plain tensors
        state = None
    if trainer.args.should_save:
        os.makedirs(output_dir, exist_ok=True)
        model.save_pretrained(output_dir, state_dict=state)
        if trainer.processing_class is not None:
            trainer.processing_class.save_pretrained(output_dir)
        logger.info("consolidated FSDP2 model written to %s", output_dir)
    distributed.barrier()


def load_full_weights(model, checkpoint: str) -> None:
    """Fill an unwrapped model with the weights of an FSDP2 sharded checkpoint (every rank calls it).

    The Trainer can only load a sharded checkpoint into a model it has already wrapped; a run that resumes
    after its last step writes the final model without training, so it reads the shards directly.
    """
    import torch.distributed.checkpoint as dcp

    shards = os.path.join(checkpoint, "pytorch_model_fsdp_0")
    state = {"model": model.state_dict()}  # accelerate saves {"model": state_dict}
    dcp.load(state, checkpoint_id=shards)
    model.load_state_dict(state["model"])
