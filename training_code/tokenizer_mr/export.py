"""Turning a learned vocabulary into the files `AutoTokenizer.from_pretrained` loads.

Written to the output directory:
- `tokenizer.json`: normalizer, pre-tokenizer, model (the learned vocabulary, and merges for BPE), the special
  tokens as added tokens, the post-processor for single texts and pairs, the decoder;
- `tokenizer_config.json`: tokenizer class (`PreTrainedTokenizerFast`, loadable by transformers 4.x and 5.x),
  `model_max_length`, the special-token roles (bos/eos/unk/sep/pad/cls/mask) and the model input names
  (written directly: the reduce does not need to import transformers);
- `vocab.json` + `merges.txt` (BPE) or `vocab.txt` (WordPiece), for tools that read those;
- `tokenizer_stats.json`: settings and training figures (not read by transformers).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenizers import AddedToken, Tokenizer, models

from .bpe import BpeResult
from .settings import TokenizerSettings, decoder, post_processor
from .tokenizer_rules import CONTINUING_SUBWORD_PREFIX

# Special-token roles per style, from the conventional token strings.
_ROLES = {
    "roberta": {"bos_token": "<s>", "eos_token": "</s>", "sep_token": "</s>", "cls_token": "<s>",
                "unk_token": "<unk>", "pad_token": "<pad>", "mask_token": "<mask>"},
    "gpt2": {"bos_token": "<|endoftext|>", "eos_token": "<|endoftext|>", "unk_token": "<|endoftext|>",
             "pad_token": "<pad>"},
    "bert": {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
             "mask_token": "[MASK]"},
}


def build_tokenizer(settings: TokenizerSettings, result: BpeResult) -> Tokenizer:
    """The trained tokenizer; its model equals what tokenizers' single-node trainer produces."""
    vocab = result.vocab_dict
    if settings.tokenizer_type == "bpe":
        model = models.BPE(vocab=vocab, merges=list(result.merges))
    else:
        model = models.WordPiece(
            vocab=vocab, unk_token="[UNK]", continuing_subword_prefix=CONTINUING_SUBWORD_PREFIX,
            max_input_chars_per_word=100,
        )
    tok = Tokenizer(model)
    norm = settings.normalizer()
    if norm is not None:
        tok.normalizer = norm
    tok.pre_tokenizer = settings.pre_tokenizer()
    # RoBERTa's <mask> swallows the space before it (lstrip), as in roberta-base's tokenizer.json
    lstrip = {"<mask>"} if settings.resolved_style == "roberta" else set()
    tok.add_special_tokens([AddedToken(t, special=True, lstrip=t in lstrip) for t in settings.specials])
    tok.post_processor = post_processor(settings, lambda t: vocab[t])
    tok.decoder = decoder(settings)
    return tok


def special_token_roles(settings: TokenizerSettings) -> dict[str, str]:
    present = set(settings.specials)
    return {role: t for role, t in _ROLES[settings.resolved_style].items() if t in present}


def tokenizer_config(settings: TokenizerSettings) -> dict[str, Any]:
    cfg: dict[str, Any] = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "backend": "tokenizers",
        "model_max_length": settings.model_max_length,
        "clean_up_tokenization_spaces": False,
        "model_input_names": (
            ["input_ids", "token_type_ids", "attention_mask"]  # BERT models take segment ids
            if settings.resolved_style == "bert"
            else ["input_ids", "attention_mask"]
        ),
    }
    cfg.update(special_token_roles(settings))
    return cfg


def save_tokenizer(
    settings: TokenizerSettings, tok: Tokenizer, output_dir: Path, stats: dict[str, Any]
) -> list[str]:
    """Write the tokenizer files; returns their names."""
    output_dir.mkdir(parents=True, exist_ok=True)
    tok.save(str(output_dir / "tokenizer.json"))
    (output_dir / "tokenizer_config.json").write_text(
        json.dumps(tokenizer_config(settings), indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    written = ["tokenizer.json", "tokenizer_config.json"]
    written += [Path(p).name for p in tok.model.save(str(output_dir))]
    (output_dir / "tokenizer_stats.json").write_text(
        json.dumps({"settings": settings.describe(), **stats}, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
    )
    written.append("tokenizer_stats.json")
    return sorted(written)
