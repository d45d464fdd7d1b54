"""Tokenizer settings shared by the map and the reduce, and the `tokenizers` objects they imply.

The normalizer and pre-tokenizer built here are used three ways: by the map to count words, by the reduce to
check that counts were made with the same pipeline, and (in tests and the benchmark) by the single-node
`tokenizers` trainer that the distributed result must equal.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from typing import Any

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

# The rules, declared once in a standard-library module the Lambda asset also carries.
from .tokenizer_rules import (
    BYTE_LEVEL_ALPHABET_SIZE,
    CONTINUING_SUBWORD_PREFIX,
    DEFAULT_SPECIAL_TOKENS,
    MAX_VOCAB_SIZE,
    STYLE_SPECIAL_TOKENS,
    STYLE_TOKENIZER_TYPE,
    STYLES,
    TOKENIZER_TYPES,
    min_vocab_size,
)


class SettingsError(ValueError):
    """A setting that cannot work; the message names the setting and says what to change."""


@dataclass(frozen=True)
class TokenizerSettings:
    tokenizer_type: str = "bpe"
    lowercase: bool = False
    text_field: str = "text"
    # reduce settings (the map accepts them too, to fail early on bad values)
    vocab_size: int | None = None
    min_frequency: int = 0
    special_tokens: tuple[str, ...] | None = None  # None: the type's defaults
    limit_alphabet: int | None = None
    model_max_length: int = 512
    style: str = "auto"

    # ---- derived values -------------------------------------------------------------------------------------
    @property
    def specials(self) -> tuple[str, ...]:
        if self.special_tokens is None:
            return DEFAULT_SPECIAL_TOKENS[self.tokenizer_type]
        return tuple(dict.fromkeys(self.special_tokens))  # first occurrence wins, as in tokenizers

    @property
    def resolved_style(self) -> str:
        if self.style != "auto":
            return self.style
        if self.tokenizer_type == "wordpiece":
            return "bert"
        return "roberta" if {"<s>", "</s>"} <= set(self.specials) else "gpt2"

    def min_vocab_size(self) -> int:
        """A lower bound of the tokens present before any merge, known without the counts."""
        return min_vocab_size(self.tokenizer_type, self.specials)

    # ---- validation: the checks run in this order and the first problem found is the one reported -------------
    def validate(self, *, for_reduce: bool) -> TokenizerSettings:
        self._check_type_and_style()
        self._check_special_tokens()
        self._check_limits()
        self._check_vocab_size(for_reduce)
        return self

    def _check_type_and_style(self) -> None:
        if self.tokenizer_type not in TOKENIZER_TYPES:
            raise SettingsError(f"--tokenizer-type must be one of {', '.join(TOKENIZER_TYPES)}, got {self.tokenizer_type!r}")
        if not self.text_field:
            raise SettingsError("--text-field must not be empty")
        if self.style not in STYLES:
            raise SettingsError(f"--style must be one of {', '.join(STYLES)}, got {self.style!r}")
        needs = STYLE_TOKENIZER_TYPE.get(self.style)
        if needs is not None and self.tokenizer_type != needs:
            raise SettingsError(f"--style {self.style} needs --tokenizer-type {needs}")

    def _check_special_tokens(self) -> None:
        specials = self.specials
        if any(not isinstance(t, str) or not t for t in specials):
            raise SettingsError("--special-tokens must be a JSON list of non-empty strings")
        style = self.resolved_style
        missing = [t for t in STYLE_SPECIAL_TOKENS[style] if t not in specials]
        if missing:
            raise SettingsError(
                f"--special-tokens lacks {', '.join(missing)}, which the {style} style needs "
                f"(got {json.dumps(list(specials))})"
            )

    def _check_limits(self) -> None:
        if self.min_frequency < 0:
            raise SettingsError(f"--min-frequency must be >= 0, got {self.min_frequency}")
        if self.model_max_length < 1:
            raise SettingsError(f"--model-max-length must be >= 1, got {self.model_max_length}")
        if self.limit_alphabet is None:
            return
        if self.limit_alphabet < 1:
            raise SettingsError(f"--limit-alphabet must be >= 1, got {self.limit_alphabet}")
        if self.tokenizer_type == "bpe" and self.limit_alphabet < BYTE_LEVEL_ALPHABET_SIZE:
            raise SettingsError(
                f"--limit-alphabet {self.limit_alphabet} would drop bytes from the byte-level alphabet "
                f"({BYTE_LEVEL_ALPHABET_SIZE} symbols, all of equal rank, so which ones is arbitrary); "
                "leave it unset for bpe"
            )

    def _check_vocab_size(self, for_reduce: bool) -> None:
        if self.vocab_size is None:
            if for_reduce:
                raise SettingsError("--vocab-size is required")
            return
        if not 1 <= self.vocab_size <= MAX_VOCAB_SIZE:
            raise SettingsError(f"--vocab-size must be between 1 and {MAX_VOCAB_SIZE}, got {self.vocab_size}")
        floor = self.min_vocab_size()
        if self.vocab_size < floor:
            what = (
                f"the {BYTE_LEVEL_ALPHABET_SIZE}-symbol byte-level alphabet plus {len(self.specials)} special tokens"
                if self.tokenizer_type == "bpe"
                else f"{len(self.specials)} special tokens plus at least one character"
            )
            raise SettingsError(f"--vocab-size {self.vocab_size} is smaller than {what} ({floor}); use at least {floor}")

    # ---- tokenizers objects ---------------------------------------------------------------------------------
    def normalizer(self):
        if self.tokenizer_type == "wordpiece":
            return normalizers.BertNormalizer(
                clean_text=True, handle_chinese_chars=True, strip_accents=None, lowercase=self.lowercase
            )
        return normalizers.Lowercase() if self.lowercase else None

    def pre_tokenizer(self):
        if self.tokenizer_type == "wordpiece":
            return pre_tokenizers.BertPreTokenizer()
        return pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)

    def pipeline(self) -> Tokenizer:
        """A tokenizer with this type's normalizer and pre-tokenizer and an empty BPE model (for counting)."""
        tok = Tokenizer(models.BPE())
        norm = self.normalizer()
        if norm is not None:
            tok.normalizer = norm
        tok.pre_tokenizer = self.pre_tokenizer()
        return tok

    def pipeline_fingerprint(self) -> dict[str, Any]:
        """The normalizer and pre-tokenizer as tokenizers serializes them: counts are valid only for these."""
        spec = json.loads(self.pipeline().to_str())
        return {"normalizer": spec.get("normalizer"), "pre_tokenizer": spec.get("pre_tokenizer")}

    def initial_alphabet(self) -> list[str]:
        return sorted(pre_tokenizers.ByteLevel.alphabet()) if self.tokenizer_type == "bpe" else []

    def continuing_subword_prefix(self) -> str | None:
        return CONTINUING_SUBWORD_PREFIX if self.tokenizer_type == "wordpiece" else None

    def reference_trainer(self) -> tuple[Tokenizer, Any]:
        """The single-node `tokenizers` set-up equal to this map/reduce: `tok.train(files, trainer)` (text files)
        or `tok.train_from_iterator(texts, trainer)` yields the reference vocabulary (and merges)."""
        if self.vocab_size is None:
            raise SettingsError("--vocab-size is required")
        common: dict[str, Any] = {
            "vocab_size": self.vocab_size,
            "min_frequency": self.min_frequency,
            "show_progress": False,
            "special_tokens": list(self.specials),
        }
        if self.limit_alphabet is not None:
            common["limit_alphabet"] = self.limit_alphabet
        if self.tokenizer_type == "bpe":
            tok = Tokenizer(models.BPE())
            trainer = trainers.BpeTrainer(initial_alphabet=self.initial_alphabet(), **common)
        else:
            tok = Tokenizer(models.WordPiece(unk_token="[UNK]", continuing_subword_prefix=CONTINUING_SUBWORD_PREFIX))
            trainer = trainers.WordPieceTrainer(continuing_subword_prefix=CONTINUING_SUBWORD_PREFIX, **common)
        norm = self.normalizer()
        if norm is not None:
            tok.normalizer = norm
        tok.pre_tokenizer = self.pre_tokenizer()
        return tok, trainer

    def describe(self) -> dict[str, Any]:
        return {
            "tokenizer_type": self.tokenizer_type,
            "lowercase": self.lowercase,
            "text_field": self.text_field,
            "vocab_size": self.vocab_size,
            "min_frequency": self.min_frequency,
            "special_tokens": list(self.specials),
            "limit_alphabet": self.limit_alphabet,
            "model_max_length": self.model_max_length,
            "style": self.resolved_style,
        }


# ---- command line ---------------------------------------------------------------------------------------------
def parse_bool(value: str) -> bool:
    v = str(value).strip().lower()
    if v in ("true", "1", "yes", "on"):
        return True
    if v in ("false", "0", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {value!r}")


def parse_special_tokens(value: str) -> tuple[str, ...]:
    try:
        tokens = json.loads(value)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc.msg}): {value!r}") from None
    if not isinstance(tokens, list) or not all(isinstance(t, str) and t for t in tokens):
        raise argparse.ArgumentTypeError(f"expected a JSON list of non-empty strings, got {value!r}")
    return tuple(tokens)


def add_settings_arguments(parser: argparse.ArgumentParser, *, reduce: bool) -> None:
    g = parser.add_argument_group("tokenizer settings (the same for map and reduce)")
    g.add_argument("--tokenizer-type", choices=TOKENIZER_TYPES, default="bpe",
                   help="bpe: byte-level BPE (GPT-2/RoBERTa/BART); wordpiece: BERT WordPiece")
    g.add_argument("--text-field", default="text", help="field holding the text in jsonl/parquet input")
    g.add_argument("--lowercase", type=parse_bool, default=False, help="lowercase before pre-tokenizing (true|false)")
    r = parser.add_argument_group("vocabulary settings" + ("" if reduce else " (optional here: checked early)"))
    r.add_argument("--vocab-size", type=int, default=None, required=reduce, help="target vocabulary size")
    r.add_argument("--min-frequency", type=int, default=0, help="minimum pair count for a merge")
    r.add_argument("--special-tokens", type=parse_special_tokens, default=None,
                   help="JSON list; default: RoBERTa tokens for bpe, BERT tokens for wordpiece")
    r.add_argument("--limit-alphabet", type=int, default=None,
                   help="keep at most this many initial characters (wordpiece; bpe needs all 256 bytes)")
    r.add_argument("--model-max-length", type=int, default=512, help="model_max_length in tokenizer_config.json")
    r.add_argument("--style", choices=STYLES, default="auto",
                   help="post-processor style; auto: roberta if <s> and </s> are special tokens, else gpt2 "
                        "(bpe); bert (wordpiece)")


def settings_from_args(args: argparse.Namespace) -> TokenizerSettings:
    return TokenizerSettings(
        tokenizer_type=args.tokenizer_type,
        lowercase=args.lowercase,
        text_field=args.text_field,
        vocab_size=args.vocab_size,
        min_frequency=args.min_frequency,
        special_tokens=args.special_tokens,
        limit_alphabet=args.limit_alphabet,
        model_max_length=args.model_max_length,
        style=args.style,
    )


def post_processor(settings: TokenizerSettings, token_id) -> Any:
    """The post-processor for single texts and pairs, per style (token_id: str -> int)."""
    style = settings.resolved_style
    if style == "roberta":
        return processors.RobertaProcessing(
            sep=("</s>", token_id("</s>")), cls=("<s>", token_id("<s>")), trim_offsets=True, add_prefix_space=False
        )
    if style == "bert":
        return processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", token_id("[CLS]")), ("[SEP]", token_id("[SEP]"))],
        )
    return processors.ByteLevel(trim_offsets=False)  # gpt2: no special tokens around texts


def decoder(settings: TokenizerSettings) -> Any:
    if settings.tokenizer_type == "wordpiece":
        return decoders.WordPiece(prefix=CONTINUING_SUBWORD_PREFIX)
    return decoders.ByteLevel()
