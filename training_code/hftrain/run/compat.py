"""Workarounds for behaviour of the pinned libraries (transformers 5.3, torch 2.13) that the Trainer subclass needs.

Each one has a test in tests/training/test_compat.py that shows the library behaviour it works around; when a
library release fixes it, that test fails and says the workaround can go. Related ones kept in their own modules
because they are larger: tasks/loss_scaling.py (gradient accumulation scaling, transformers#47688 and #40709) and parallel/fsdp.py
(FSDP on CPU, FSDP2 tied weights, FSDP2 loads without training).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator

from hftrain.checkpoint import manager as checkpoints

logger = logging.getLogger("hftrain")


@contextlib.contextmanager
def cpu_map_location(args) -> Iterator[None]:
    """While the Trainer loads the optimizer state: map a `torch.device` map_location to plain "cpu".

    Under DDP, transformers maps the optimizer state to `args.device`; on CPU (gloo) that is `cpu:0`, a location
    torch.load cannot restore to ("don't know how to restore data location of torch.storage.UntypedStorage (tagged
    with cpu:0)"). Plain "cpu" is the same memory. Does nothing unless `args` is a multi-process CPU run.
    """
    if args.device.type != "cpu" or args.world_size <= 1:
        yield
        return
    import torch

    original = torch.load

    def load(*args, **kwargs):
        if isinstance(kwargs.get("map_location"), torch.device):
            kwargs["map_location"] = "cpu"
        return original(*args, **kwargs)

    torch.load = load
    try:
        yield
    finally:
        torch.load = original


_LEGACY_NAMES = (("LayerNorm.gamma", "LayerNorm.weight"), ("LayerNorm.beta", "LayerNorm.bias"))


def reload_missed_weights(trainer, checkpoint: str, model=None) -> int:
    """After the Trainer's `_load_from_checkpoint(checkpoint, model)`: the legacy-named weights it misses
    (`reload_legacy_named_weights`), for loads of a plain state dict (FSDP and DeepSpeed load their own)."""
    if trainer.is_fsdp_enabled or trainer.is_deepspeed_enabled:
        return 0
    return reload_legacy_named_weights(checkpoint, model if model is not None else trainer.model)


def reload_legacy_named_weights(checkpoint: str, model) -> int:
    """Restore weights the Trainer's resume misses in transformers 5.3.

    save_pretrained writes BERT/RoBERTa-style `LayerNorm.weight/bias` under their legacy names
    `LayerNorm.gamma/beta`; from_pretrained renames them back, but Trainer._load_from_checkpoint loads the
    state dict as-is (strict=False), so those parameters silently keep their pre-resume values. Returns the
    number of tensors restored.
    """
    from safetensors.torch import load_file

    files = checkpoints.safetensors_files(checkpoint)
    if files is None:
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


def ordered_eval_sampler(args, eval_dataset):
    """The evaluation sampler for `Trainer._get_eval_sampler`: sequential on one process, else the Trainer's.

    transformers 5.3 shuffles evaluation under group_by_length (an unseeded LengthGroupedSampler), so predictions
    would not line up with the features (QA post-processing). Evaluation keeps the order of its features, which
    the runner puts longest first (batching.longest_first). None means: the Trainer's own choice.
    """
    if args.world_size <= 1 and eval_dataset is not None:
        import torch

        return torch.utils.data.SequentialSampler(eval_dataset)
    return None
