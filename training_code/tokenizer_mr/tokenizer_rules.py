"""The tokenizer jobs' settings rules, declared once: types, styles, special tokens, vocabulary limits.

`tokenizer_mr.settings` (the map and reduce jobs) enforces them with `tokenizers`; the pipeline's Prepare Lambda
(lambda/spec/run_spec.py) checks a run spec's `tokenizer` against the same values before any job starts.

Standard library only, and nothing from this package: the Lambda asset carries a byte-for-byte copy of this file,
made at synth (stacks/assets/lambda_asset.py), and Prepare imports it as the top-level module `tokenizer_rules`
(lambda/training_contract.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

TOKENIZER_TYPES = ("bpe", "wordpiece")
STYLES = ("auto", "gpt2", "roberta", "bert")
DEFAULT_SPECIAL_TOKENS = {
    "bpe": ("<s>", "<pad>", "</s>", "<unk>", "<mask>"),  # RoBERTa / BART order: ids 0-4
    "wordpiece": ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"),  # tokenizers' BertWordPieceTokenizer order
}
CONTINUING_SUBWORD_PREFIX = "##"
BYTE_LEVEL_ALPHABET_SIZE = 256
MAX_VOCAB_SIZE = 1 << 24
STYLE_TOKENIZER_TYPE = {"bert": "wordpiece", "gpt2": "bpe", "roberta": "bpe"}  # a style works with this type only
STYLE_SPECIAL_TOKENS = {"roberta": ("<s>", "</s>"), "bert": ("[CLS]", "[SEP]", "[UNK]"), "gpt2": ()}  # it needs these


@lru_cache(maxsize=1)
def byte_level_alphabet() -> frozenset[str]:
    """The 256 symbols of the byte-level (GPT-2) pre-tokenizer, as `tokenizers.pre_tokenizers.ByteLevel.alphabet()`
    returns them (a test checks): printable bytes map to themselves, the others to chr(256), chr(257), ..."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    extra = iter(range(256, 512))
    return frozenset(chr(b) if b in keep else chr(next(extra)) for b in range(256))


def min_vocab_size(tokenizer_type: str, specials: Iterable[str]) -> int:
    """A lower bound of the tokens present before any merge, known without the counts: bpe starts from the
    byte-level alphabet plus the special tokens, wordpiece needs the special tokens plus one character."""
    if tokenizer_type == "bpe":
        return len(byte_level_alphabet() | set(specials))
    return len(set(specials)) + 1
