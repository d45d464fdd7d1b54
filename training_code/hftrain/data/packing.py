"""Padding-free training batches: the examples of a batch in one row, with per-example position ids and
variable-length attention, so that no compute is spent on padding.

transformers' `DataCollatorWithFlattening` does this for causal language models (token-level labels, one
`labels` row). The tasks here have per-example targets, so this module packs them itself and keeps the targets
per example:

* the collator concatenates a batch's `input_ids` (and `token_type_ids`) into one row of shape [1, T], restarts
  `position_ids` at every example (RoBERTa-style embeddings start at padding_idx + 1), and adds
  `cu_seq_lens_q/k` (cumulative lengths, the varlen attention convention) and `max_length_q/k`;
* `packed_attention_forward` is registered with transformers' AttentionInterface as `hftrain_packed`: given
  cumulative lengths it attends within each example only (torch's `varlen_attn` flash kernel on CUDA in
  bf16/fp16 when attention dropout is 0; otherwise SDPA on jagged nested tensors, which runs the flash /
  memory-efficient varlen kernels on CUDA and one exact attention per example on CPU); without them (padded
  evaluation batches) it is plain SDPA;
* question answering: the span loss is computed per example, over that example's tokens only
  (`segment_span_loss`).

Where it applies: question answering with BERT-, RoBERTa-, XLM-R- and CamemBERT-style encoders whose attention
goes through the attention interface (transformers 5), with `attn_implementation` sdpa (switched to
`hftrain_packed`) or flash_attention_2/3 (transformers' own varlen path). Elsewhere batches are padded
dynamically: classification heads pool the first token of each *row* (a packed row would give one prediction
for many examples), and BART/T5 compute encoder positions from the row, with no position_ids input.

The loss equals the loss of the same examples without any padding; the stock QA heads also spread softmax mass
over padding positions of a padded batch, so their padded loss is slightly larger (see tests/training/
test_packing.py, which checks both).
"""

from __future__ import annotations

import logging

import torch

logger = logging.getLogger(__name__)

PACKED_ATTENTION = "hftrain_packed"
# model_type -> how position ids start (BERT: 0; RoBERTa family: padding_idx + 1)
_POSITION_START = {"bert": "zero", "roberta": "after_pad", "xlm-roberta": "after_pad", "camembert": "after_pad"}
PACKABLE_TASKS = ("question-answering",)
PACKED_KEYS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")


def _varlen_attn():
    try:
        from torch.nn.attention.varlen import varlen_attn

        return varlen_attn
    except ImportError:  # torch < 2.9
        return None


def _jagged(x: torch.Tensor, offsets: torch.Tensor) -> torch.Tensor:
    """[1, H, T, D] -> nested [N, H, j, D] (one component per example)."""
    return torch.nested.nested_tensor_from_jagged(x[0].transpose(0, 1), offsets).transpose(1, 2)


def packed_attention_forward(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None,
                             is_causal=None, cu_seq_lens_q=None, cu_seq_lens_k=None, max_length_q=None,
                             max_length_k=None, **kwargs):
    """An AttentionInterface function: per-example attention for packed rows, SDPA for padded batches."""
    if cu_seq_lens_q is None:
        from transformers.integrations.sdpa_attention import sdpa_attention_forward

        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    if query.shape[0] != 1:
        raise ValueError(f"packed attention expects one row, got a batch of {query.shape[0]}")
    causal = bool(is_causal if is_causal is not None else getattr(module, "is_causal", False))
    cu_k = cu_seq_lens_k if cu_seq_lens_k is not None else cu_seq_lens_q
    varlen = _varlen_attn()
    if varlen is not None and query.is_cuda and query.dtype in (torch.float16, torch.bfloat16) and dropout == 0.0:
        out = varlen(query[0].transpose(0, 1), key[0].transpose(0, 1), value[0].transpose(0, 1),
                     cu_seq_lens_q.to(torch.int32), cu_k.to(torch.int32), int(max_length_q),
                     int(max_length_k if max_length_k is not None else max_length_q), scale=scaling,
                     window_size=(-1, 0) if causal else (-1, -1))
        return out.unsqueeze(0), None  # [1, T, H, D]
    if not query.is_cuda:  # CPU: one dense attention per example (cheaper than nested tensors' CPU path)
        bounds_q, bounds_k = cu_seq_lens_q.tolist(), cu_k.tolist()
        parts = [
            torch.nn.functional.scaled_dot_product_attention(
                query[:, :, a:b], key[:, :, c:d], value[:, :, c:d], dropout_p=dropout, scale=scaling,
                is_causal=causal)
            for a, b, c, d in zip(bounds_q[:-1], bounds_q[1:], bounds_k[:-1], bounds_k[1:], strict=True)
        ]
        return torch.cat(parts, dim=2).transpose(1, 2).contiguous(), None
    offsets_q, offsets_k = cu_seq_lens_q.to(torch.int64), cu_k.to(torch.int64)
    out = torch.nn.functional.scaled_dot_product_attention(
        _jagged(query, offsets_q), _jagged(key, offsets_k), _jagged(value, offsets_k),
        dropout_p=dropout, scale=scaling, is_causal=causal)
    return out.transpose(1, 2).values().unsqueeze(0), None  # [1, T, H, D]


def register() -> None:
    """Make `hftrain_packed` a valid attn_implementation (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(PACKED_ATTENTION, packed_attention_forward)
    AttentionMaskInterface.register(PACKED_ATTENTION, sdpa_mask)  # padded batches get SDPA's masks


# ---------------------------------------------------------------- when it applies


def decide(setting: str, task_name: str, model, *, attn_implementation: str, on_gpu: bool) -> tuple[bool, str]:
    """(padding-free on?, why) for the `padding_free` hyperparameter (auto | true | false).

    auto turns it on where it saves compute: on a GPU, for the model/task pairs above. On CPU it stays off under
    auto: with length-grouped batches little padding is left, and the per-example attention costs more calls.
    """
    if setting == "false":
        return False, "padding_free false"
    why_not = None
    model_type = getattr(model.config, "model_type", "")
    if task_name not in PACKABLE_TASKS:
        why_not = f"{task_name} heads need one example per row (padding-free is for question answering)"
    elif getattr(model.config, "is_encoder_decoder", False) or model_type not in _POSITION_START:
        why_not = f"the {model_type!r} model is not one of {sorted(_POSITION_START)}"
    elif attn_implementation not in ("sdpa", "flash_attention_2", "flash_attention_3", PACKED_ATTENTION):
        why_not = f"attn_implementation {attn_implementation} has no variable-length path"
    elif not getattr(model, "_supports_attention_backend", False):
        why_not = f"{type(model).__name__} does not route attention through transformers' attention interface"
    if why_not:
        if setting == "true":
            logger.warning("padding_free true ignored: %s; batches are padded dynamically", why_not)
        return False, why_not
    if setting == "auto" and not on_gpu:
        return False, "auto: off on CPU (length-grouped dynamic padding)"
    return True, "on"


def enable(model, attn_implementation: str) -> None:
    """Switch an sdpa model to the packed attention (flash_attention_2/3 handle cu_seq_lens themselves)."""
    if attn_implementation in ("flash_attention_2", "flash_attention_3"):
        return
    register()
    model.set_attn_implementation(PACKED_ATTENTION)


def train_collator(task, tokenizer, model, training_args, task_name: str):
    """The inner training collator: padding-free where `decide` says so (switching the model's attention),
    else the task's dynamic-padding collator. Logs the choice once."""
    attn = model.config._attn_implementation
    on, why = decide(training_args.padding_free, task_name, model, attn_implementation=attn,
                     on_gpu=training_args.device.type == "cuda")
    if training_args.process_index == 0:
        logger.info("padding-free training batches: %s", "on" if on else f"off ({why})")
    if not on:
        return task.collator(tokenizer, model, training_args)
    enable(model, attn)
    return PackedQACollator(position_start(model.config))


def position_start(config) -> int:
    kind = _POSITION_START.get(getattr(config, "model_type", ""), "zero")
    return (config.pad_token_id + 1) if kind == "after_pad" else 0


# ---------------------------------------------------------------- batches and loss


class PackedQACollator:
    """QA features -> one padding-free row with per-example positions and span targets in row coordinates.

    `max_length_q/k` are rounded up to a multiple of `bucket` (an upper bound is all the kernels need): under
    torch.compile an int argument that changed every step would recompile every step.
    """

    def __init__(self, position_start: int = 0, bucket: int = 64) -> None:
        self.position_start = position_start
        self.bucket = max(1, bucket)

    def __call__(self, features: list[dict]) -> dict:
        input_ids: list[int] = []
        token_types: list[int] = []
        positions: list[int] = []
        starts, ends, cu = [], [], [0]
        with_types = "token_type_ids" in features[0]
        for feature in features:
            ids = list(feature["input_ids"])
            offset = cu[-1]
            input_ids += ids
            if with_types:
                token_types += list(feature["token_type_ids"])
            positions += range(self.position_start, self.position_start + len(ids))
            starts.append(offset + int(feature["start_positions"]))
            ends.append(offset + int(feature["end_positions"]))
            cu.append(offset + len(ids))
        longest = max(b - a for a, b in zip(cu[:-1], cu[1:], strict=True))
        longest = -(-longest // self.bucket) * self.bucket
        batch = {
            "input_ids": torch.tensor([input_ids], dtype=torch.long),
            "position_ids": torch.tensor([positions], dtype=torch.long),
            "cu_seq_lens_q": torch.tensor(cu, dtype=torch.int32),
            "cu_seq_lens_k": torch.tensor(cu, dtype=torch.int32),
            "max_length_q": longest,
            "max_length_k": longest,
            "start_positions": torch.tensor(starts, dtype=torch.long),
            "end_positions": torch.tensor(ends, dtype=torch.long),
        }
        if with_types:
            batch["token_type_ids"] = torch.tensor([token_types], dtype=torch.long)
        return batch


def is_packed(inputs: dict) -> bool:
    return inputs.get("cu_seq_lens_q") is not None and "start_positions" in inputs


def segment_cross_entropy(logits: torch.Tensor, cu_seq_lens: torch.Tensor, targets: torch.Tensor,
                          max_length: int) -> torch.Tensor:
    """Mean over examples of the cross entropy of a softmax over each example's own positions.

    logits [T] of one packed row; cu_seq_lens [N + 1]; targets [N] in row coordinates.
    """
    cu = cu_seq_lens.to(device=logits.device, dtype=torch.long)
    starts, lengths = cu[:-1], cu[1:] - cu[:-1]
    steps = torch.arange(max_length, device=logits.device)
    index = (starts[:, None] + steps[None, :]).clamp(max=logits.shape[-1] - 1)
    inside = steps[None, :] < lengths[:, None]
    scores = logits[index].float().masked_fill(~inside, float("-inf"))
    return torch.nn.functional.cross_entropy(scores, targets.to(logits.device) - starts)


def segment_span_loss(model, inputs: dict, return_outputs: bool = False):
    """The QA loss of a packed batch: (start + end cross entropy) / 2, as the HF QA heads define it."""
    inputs = dict(inputs)
    starts, ends = inputs.pop("start_positions"), inputs.pop("end_positions")
    outputs = model(**inputs)
    cu, longest = inputs["cu_seq_lens_q"], int(inputs["max_length_q"])
    loss = (segment_cross_entropy(outputs.start_logits[0], cu, starts, longest)
            + segment_cross_entropy(outputs.end_logits[0], cu, ends, longest)) / 2
    return (loss, outputs) if return_outputs else loss
