"""The tokenizer jobs' ContainerArguments parse and validate with training_code's own parsers."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from testkit.lambdas import SETTINGS, settings_dict

from hfsm_lambda.errors import SpecError
from hfsm_lambda.plan import job_requests
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.settings import Settings
from hfsm_lambda.spec import run_spec
from hfsm_lambda.training_contract import tokenizer_rules

tokenizer_map = pytest.importorskip("tokenizer_map")
tokenizer_reduce = pytest.importorskip("tokenizer_reduce")
tokenizer_settings = pytest.importorskip("tokenizer_mr.settings")
PLAIN = Settings.from_dict(settings_dict())
TOKENIZERS = st.fixed_dictionaries({"type": st.sampled_from(["bpe", "wordpiece"])}, optional={
    "vocab_size": st.integers(100, 100000), "min_frequency": st.integers(1, 100), "lowercase": st.booleans(),
    "model_max_length": st.integers(1, 100000), "text_field": st.sampled_from(["text", "body", "a.b"]),
    "special_tokens": st.lists(st.sampled_from(["<s>", "</s>", "<pad>", "[CLS]", "[SEP]", "<|endoftext|>", "[UNK]"]),
                               min_size=1, max_size=5, unique=True),
    "instance_count": st.integers(1, SETTINGS["max_instance_count"])})


def test_byte_level_alphabet_is_the_tokenizers_one():
    tokenizers = pytest.importorskip("tokenizers")
    assert tokenizer_rules.byte_level_alphabet() == frozenset(tokenizers.pre_tokenizers.ByteLevel.alphabet())


@settings(max_examples=40, deadline=None)
@given(TOKENIZERS)
def test_prepare_accepts_exactly_what_the_scripts_accept(tokenizer):
    spec = {"version": 1, "name": "tok", "task": "text-classification", "model": "bert-base-uncased",
            "data": {"train": {"s3": "datasets/a/"}}, "tokenizer": tokenizer}
    try:
        run = prepare_run(spec, PLAIN)
    except SpecError as err:
        assert all(p.startswith(("tokenizer.vocab_size: ", "tokenizer.special_tokens: ")) for p in err.problems)
        kind = tokenizer["type"]
        args = ["--tokenizer-type", kind, "--vocab-size", str(tokenizer.get("vocab_size", 32000)),
                "--special-tokens", json.dumps(tokenizer.get("special_tokens",
                                                             run_spec.DEFAULT_SPECIAL_TOKENS[kind]))]
        with pytest.raises(tokenizer_settings.SettingsError):  # the reduce job would fail the same way
            tokenizer_settings.settings_from_args(tokenizer_reduce.build_parser().parse_args(args)).validate(
                for_reduce=True)
        return
    for stage, module, for_reduce in (("map", tokenizer_map, False), ("reduce", tokenizer_reduce, True)):
        arguments = job_requests.processing_request(run, PLAIN, stage)["AppSpecification"]["ContainerArguments"]
        assert arguments[0] == f"{module.__name__}.py"
        parsed = module.build_parser().parse_args(arguments[1:])
        validated = tokenizer_settings.settings_from_args(parsed).validate(for_reduce=for_reduce)
        assert validated.tokenizer_type == tokenizer["type"]
        assert validated.lowercase == tokenizer.get("lowercase", False)
        if for_reduce:
            assert validated.vocab_size == run.spec.tokenizer.vocab_size
            assert list(validated.special_tokens) == list(run.spec.tokenizer.special_tokens)
