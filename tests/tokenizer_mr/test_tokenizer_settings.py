"""TokenizerSettings.validate: every error message, word for word, and which check wins when several fail.

The messages are what a user reads in the job's failure reason (FailureReason / the ERROR line), so the table
pins each one exactly; it was written before validate was split into its checks, to prove no message changed.
"""

from __future__ import annotations

import pytest

from tokenizer_mr.settings import SettingsError, TokenizerSettings
from tokenizer_mr.tokenizer_rules import MAX_VOCAB_SIZE

BYTES = "the 256-symbol byte-level alphabet plus"
ERRORS = [
    # (settings, for_reduce, the whole message)
    (dict(tokenizer_type="unigram"), False, "--tokenizer-type must be one of bpe, wordpiece, got 'unigram'"),
    (dict(text_field=""), False, "--text-field must not be empty"),
    (dict(style="t5"), False, "--style must be one of auto, gpt2, roberta, bert, got 't5'"),
    (dict(style="bert"), False, "--style bert needs --tokenizer-type wordpiece"),
    (dict(tokenizer_type="wordpiece", style="gpt2"), False, "--style gpt2 needs --tokenizer-type bpe"),
    (dict(tokenizer_type="wordpiece", style="roberta"), False, "--style roberta needs --tokenizer-type bpe"),
    (dict(special_tokens=("<s>", "")), False, "--special-tokens must be a JSON list of non-empty strings"),
    (dict(special_tokens=("<s>", 3)), False, "--special-tokens must be a JSON list of non-empty strings"),
    (dict(style="roberta", special_tokens=("<s>",)), False,
     '--special-tokens lacks </s>, which the roberta style needs (got ["<s>"])'),
    (dict(tokenizer_type="wordpiece", special_tokens=("[PAD]",)), False,
     '--special-tokens lacks [CLS], [SEP], [UNK], which the bert style needs (got ["[PAD]"])'),
    (dict(min_frequency=-1), False, "--min-frequency must be >= 0, got -1"),
    (dict(model_max_length=0), False, "--model-max-length must be >= 1, got 0"),
    (dict(tokenizer_type="wordpiece", limit_alphabet=0), False, "--limit-alphabet must be >= 1, got 0"),
    (dict(limit_alphabet=255), False,
     "--limit-alphabet 255 would drop bytes from the byte-level alphabet (256 symbols, all of equal rank, so which "
     "ones is arbitrary); leave it unset for bpe"),
    (dict(), True, "--vocab-size is required"),
    (dict(vocab_size=0), False, f"--vocab-size must be between 1 and {MAX_VOCAB_SIZE}, got 0"),
    (dict(vocab_size=MAX_VOCAB_SIZE + 1), True,
     f"--vocab-size must be between 1 and {MAX_VOCAB_SIZE}, got {MAX_VOCAB_SIZE + 1}"),
    (dict(vocab_size=260), True, f"--vocab-size 260 is smaller than {BYTES} 5 special tokens (261); use at least 261"),
    (dict(vocab_size=256, special_tokens=("<|endoftext|>",), style="gpt2"), False,
     f"--vocab-size 256 is smaller than {BYTES} 1 special tokens (257); use at least 257"),
    (dict(tokenizer_type="wordpiece", vocab_size=5), True,
     "--vocab-size 5 is smaller than 5 special tokens plus at least one character (6); use at least 6"),
    # several problems: the first check in this order wins
    (dict(tokenizer_type="x", text_field="", style="y"), True, "--tokenizer-type must be one of bpe, wordpiece, got 'x'"),
    (dict(text_field="", style="y", min_frequency=-1), True, "--text-field must not be empty"),
    (dict(style="bert", special_tokens=("",)), True, "--style bert needs --tokenizer-type wordpiece"),
    (dict(special_tokens=("",), min_frequency=-1), False, "--special-tokens must be a JSON list of non-empty strings"),
    (dict(style="roberta", special_tokens=("<s>",), min_frequency=-1), False,
     '--special-tokens lacks </s>, which the roberta style needs (got ["<s>"])'),
    (dict(min_frequency=-2, model_max_length=0, limit_alphabet=0), True, "--min-frequency must be >= 0, got -2"),
    (dict(model_max_length=-3, limit_alphabet=0), True, "--model-max-length must be >= 1, got -3"),
    (dict(limit_alphabet=0, vocab_size=0), True, "--limit-alphabet must be >= 1, got 0"),
    (dict(tokenizer_type="wordpiece", limit_alphabet=3, vocab_size=2), True,
     "--vocab-size 2 is smaller than 5 special tokens plus at least one character (6); use at least 6"),
    (dict(vocab_size=-1), True, f"--vocab-size must be between 1 and {MAX_VOCAB_SIZE}, got -1"),
]


@pytest.mark.parametrize(("kw", "for_reduce", "message"), ERRORS)
def test_each_bad_setting_has_its_message(kw, for_reduce, message):
    with pytest.raises(SettingsError) as exc:
        TokenizerSettings(**kw).validate(for_reduce=for_reduce)
    assert str(exc.value) == message


@pytest.mark.parametrize(
    ("kw", "for_reduce"),
    [
        (dict(), False),
        (dict(vocab_size=261), True),
        (dict(vocab_size=MAX_VOCAB_SIZE, limit_alphabet=256), True),
        (dict(tokenizer_type="wordpiece", vocab_size=6, limit_alphabet=1, lowercase=True), True),
        (dict(vocab_size=257, special_tokens=("<|endoftext|>",), style="gpt2"), True),
        (dict(style="roberta", special_tokens=("</s>", "<s>", "<s>")), False),  # duplicates count once
        (dict(tokenizer_type="wordpiece", style="bert", special_tokens=("[UNK]", "[SEP]", "[CLS]")), False),
    ],
)
def test_good_settings_validate_to_themselves(kw, for_reduce):
    settings = TokenizerSettings(**kw)
    assert settings.validate(for_reduce=for_reduce) is settings
