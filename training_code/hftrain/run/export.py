"""The final model in a form the registered inference image reads (transformers 4.51.3, see README Deploying).

transformers 5.x saves `tokenizer_config.json` with `"tokenizer_class": "TokenizersBackend"`, a name 4.x does not
know (`ValueError: Tokenizer class TokenizersBackend does not exist or is not currently imported`). In 5.x that
class *is* `PreTrainedTokenizerFast` (an alias), which 4.x has and which loads the same `tokenizer.json`; so the
class name is written as `PreTrainedTokenizerFast`, and 5.x-only bookkeeping keys are dropped. The inference
image cannot be a 5.x one instead: transformers 5 removed the question-answering and summarization pipelines
that the inference toolkit builds from HF_TASK. `check_readable` verifies the result; the slow test
tests/integration/test_inference_image.py serves each task's model under 4.51.3.
"""

from __future__ import annotations

import json
import os

TOKENIZER_CONFIG = "tokenizer_config.json"
CLASS_FOR_4X = {"TokenizersBackend": "PreTrainedTokenizerFast"}
FIVE_ONLY_KEYS = ("backend", "is_local")
# Tokenizer classes transformers 4.x can instantiate from tokenizer.json alone.
READABLE_BY_4X = ("PreTrainedTokenizerFast", "BertTokenizerFast", "RobertaTokenizerFast", "BartTokenizerFast",
                  "T5TokenizerFast", "GPT2TokenizerFast", "DistilBertTokenizerFast")


class ExportError(RuntimeError):
    """The saved model would not load in the inference image."""


def make_readable_by_transformers4(model_dir: str) -> None:
    path = os.path.join(model_dir, TOKENIZER_CONFIG)
    if not os.path.isfile(path):
        return
    with open(path) as handle:
        config = json.load(handle)
    config["tokenizer_class"] = CLASS_FOR_4X.get(config.get("tokenizer_class"), config.get("tokenizer_class"))
    for key in FIVE_ONLY_KEYS:
        config.pop(key, None)
    with open(path, "w") as handle:
        json.dump(config, handle, indent=2, sort_keys=True)
        handle.write("\n")
    check_readable(model_dir)


def check_readable(model_dir: str) -> None:
    """ExportError unless the tokenizer files name a class transformers 4.x has, next to a tokenizer.json."""
    with open(os.path.join(model_dir, TOKENIZER_CONFIG)) as handle:
        name = json.load(handle).get("tokenizer_class")
    if name not in READABLE_BY_4X:
        raise ExportError(f"{TOKENIZER_CONFIG} names tokenizer_class {name!r}, which the inference image's "
                          f"transformers 4.x cannot load; expected one of {', '.join(READABLE_BY_4X)}")
    if not os.path.isfile(os.path.join(model_dir, "tokenizer.json")):
        raise ExportError(f"{model_dir} has no tokenizer.json for {name}")
