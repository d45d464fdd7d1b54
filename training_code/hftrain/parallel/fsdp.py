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
* Tied parameters: accelerate groups a tied input/output embedding pair but leaves other holders of the same
  weight (BART's and T5's encoder/decoder `embed_tokens`) to the root group, and torch 2.13 refuses a parameter
  in two groups at the first forward. `group_tied_parameters` shards all holders as one group first.
* The final model: for FSDP2 the Trainer's `save_model` gathers the full state dict with `cpu_offload=True`;
  on CPU that "offload" is a no-op and the tensors point at unsharded parameter storage that FSDP2 frees
  again (`RuntimeError: Attempted to access the data pointer on an invalid python storage` in safetensors).
  After the final evaluation (forward only) the root group is still unsharded and holds plain tensors.
  `save_final_model` reshards, gathers full tensors itself, copies them and ties them again before global
  rank 0 writes them.
"""

from __future__ import annotations

import logging
import os

from hftrain.args import ArgumentError
from hftrain.parallel import process_group as distributed

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


def tied_parameter_owners(model) -> list[list]:
    """Groups of modules that hold the same parameter object directly (tied weights), in model order.

    BART and T5 tie `shared`, `encoder.embed_tokens`, `decoder.embed_tokens` and `lm_head`: four modules, one
    weight. Modules that share a module (not only a parameter) count once.
    """
    owners: dict[int, list] = {}
    for _, module in model.named_modules():
        for param in module.parameters(recurse=False):
            group = owners.setdefault(id(param), [])
            if not any(m is module for m in group):
                group.append(module)
    groups: list[list] = []
    for modules in owners.values():
        if len(modules) < 2:
            continue
        merged = next((g for g in groups if any(m is o for m in modules for o in g)), None)
        if merged is None:
            groups.append(list(modules))
        else:
            merged.extend(m for m in modules if not any(m is o for o in merged))
    return groups


def group_tied_parameters(trainer) -> int:
    """FSDP2: put every module that holds a tied parameter into one `fully_shard` group, before accelerate wraps
    the model (returns the number of groups made; every rank calls it, before the optimizer is created).

    accelerate 1.15 (`fsdp2_prepare_model`, accelerate/utils/fsdp_utils.py) groups the input and output embedding
    when they are tied but leaves other holders of the same weight to the root group; BART's and T5's
    `encoder.embed_tokens` / `decoder.embed_tokens` then sit in the root while `shared` and `lm_head` sit in the
    tail group, and torch 2.13 stops at the first forward ("Parameter 'model.shared.weight' is shared with a
    parameter already managed by another FSDP group. For shared/tied parameters, use fully_shard([module_a,
    module_b]) ..."). A module that is already an FSDP module is skipped by accelerate's wrapping and a root
    `fully_shard` leaves parameters another group manages alone (torch: "fully_shard the shared module before its
    parents"), so the group made here stays one group. It is not resharded after forward, as accelerate's own
    tied-embedding group: the weight is used at the start (embeddings) and the end (lm_head) of the forward.
    """
    if not trainer.is_fsdp_enabled:
        return 0
    plugin = trainer.accelerator.state.fsdp_plugin
    if getattr(plugin, "fsdp_version", 1) != 2:
        return 0
    import torch
    from torch.distributed.fsdp import FSDPModule, MixedPrecisionPolicy, fully_shard

    model = trainer.accelerator.unwrap_model(trainer.model)
    groups = [[m for m in g if not isinstance(m, FSDPModule)] for g in tied_parameter_owners(model)]
    groups = [g for g in groups if len(g) > 1]
    if not groups:
        return 0
    if plugin.cpu_ram_efficient_loading:  # accelerate moves the model to meta and reloads it: not pre-shardable
        logger.warning("FSDP2 with cpu_ram_efficient_loading: tied parameters (%s) are left to accelerate's "
                       "wrapping", [type(m).__name__ for m in groups[0]])
        return 0
    kwargs = _tied_group_kwargs(trainer.accelerator, plugin, MixedPrecisionPolicy)
    for modules in groups:
        if trainer.accelerator.mixed_precision != "no":  # as accelerate does before sharding: fp32 master weights
            _upcast_trainable(modules, torch.float32)
        fully_shard(modules, **kwargs)
    if distributed.rank() == 0:
        logger.info("FSDP2: tied parameters sharded as one group each: %s",
                    "; ".join(", ".join(_module_name(model, m) for m in g) for g in groups))
    return len(groups)


def _tied_group_kwargs(accelerator, plugin, mixed_precision_policy: type) -> dict:
    """`fully_shard` arguments for a tied group: accelerate's offload, precision and mesh, no reshard after forward."""
    mesh = getattr(accelerator, "torch_device_mesh", None)
    return {
        "reshard_after_forward": False,
        "offload_policy": plugin.cpu_offload,
        "mp_policy": plugin.mixed_precision_policy or mixed_precision_policy(),
        "mesh": mesh[tuple(accelerator.parallelism_config.fsdp_dim_names)] if mesh is not None else None,
    }


def _upcast_trainable(modules: list, dtype) -> None:
    """The modules' own trainable parameters in `dtype` (fp32 master weights under mixed precision)."""
    for module in modules:
        for param in module.parameters(recurse=False):
            if param.requires_grad and param.dtype != dtype:
                param.data = param.data.to(dtype)


def _module_name(model, module) -> str:
    return next((name or "<root>" for name, m in model.named_modules() if m is module), type(module).__name__)


def _fsdp_modules(model) -> list:
    """The FSDP2 modules of `model` (none when FSDP2 has not wrapped it, e.g. a run that trained no step).

    By module type, the same on every rank: whether the parameters are DTensors depends on the moment (after a
    forward without backward, the final evaluation, groups that do not reshard after forward, the root's among
    them, hold plain unsharded tensors), and ranks that disagree on it would not all join the gather.
    """
    from torch.distributed.fsdp import FSDPModule

    return [m for m in model.modules() if isinstance(m, FSDPModule)]


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
    wrapped = _fsdp_modules(model)
    if wrapped:
        from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

        for module in wrapped:  # back to sharded DTensors: unsharded storage is freed under the caller's feet
            module.reshard()
        offload = not _on_cpu(trainer.args)  # on GPUs gather to host memory on rank 0 only
        state = get_model_state_dict(model, options=StateDictOptions(full_state_dict=True, cpu_offload=offload))
        state = _tie_like(model, {key: tensor.detach().to("cpu", copy=True) for key, tensor in state.items()})
    else:  # not wrapped by FSDP2: plain tensors
        state = None
    if trainer.args.should_save:
        os.makedirs(output_dir, exist_ok=True)
        model.save_pretrained(output_dir, state_dict=state)
        if trainer.processing_class is not None:
            trainer.processing_class.save_pretrained(output_dir)
        logger.info("consolidated FSDP2 model written to %s", output_dir)
    distributed.barrier()


def _tie_like(model, state: dict) -> dict:
    """Names of one (tied) parameter point at one tensor again, as in the model.

    The gathered full state dict holds a separate tensor per name; save_pretrained finds tied weights by shared
    storage (`remove_tied_weights_from_state_dict`), so without this BART's file holds the tied weight four
    times (model.shared, encoder/decoder embed_tokens, lm_head) where DDP's holds it once.
    """
    names: dict[int, list[str]] = {}
    for name, param in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name)
    for group in names.values():
        present = [name for name in group if name in state]
        for name in present[1:]:
            state[name] = state[present[0]]
    return state


def wrap_without_training(trainer) -> None:
    """Wrap the model as `train()` would, for a run that trains no step (every rank calls it).

    A run that resumes after its last step (the previous attempt stopped in the final evaluation or save) still
    loads the sharded checkpoint, evaluates and writes the final model. The Trainer loads FSDP shards into a
    wrapped model only, and accelerate 1.15 wraps an FSDP2 model only together with an optimizer ("When using
    FSDP2, a model and optimizer must be passed together to `Accelerator.prepare()`"): without this, evaluation
    stops there. Wrapped, evaluation runs sharded and `save_final_model` gathers as after training.
    """
    trainer.create_optimizer()  # also groups tied parameters (SageMakerTrainer.create_optimizer)
    model, trainer.optimizer = trainer.accelerator.prepare(trainer.model, trainer.optimizer)
    trainer.model = trainer.model_wrapped = model
