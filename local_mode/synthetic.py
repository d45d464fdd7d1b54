"""Generated, learnable data and tiny models built from configs (no downloads): the local demo, tests, benchmarks.

Tasks:
* question answering: the answer is the two words after the marker word "key" (v2: no marker, no answer);
* classification: the label follows a word rule (which colour word the text holds; pairs: same first word);
* summarization: the summary is the document's first sentence.

A task's rows for a run spec come from the function its registry entry names (`local.rows` in
training_code/hftrain/tasks/), called with the spec's hyperparameters; local_mode/spec_inputs.py then renames
the columns to the names the spec gives.
"""

from __future__ import annotations

import json
import math
import random
from pathlib import Path
from typing import Any

WORDS = [
    f"{a}{b}"
    for a in ("ka", "lo", "mi", "nu", "pe", "ra", "si", "to", "vu", "ze", "bo", "da", "fe", "gu")
    for b in ("n", "r", "s", "t", "l", "m", "x", "p")
]
COLOURS = ("red", "blue", "green")
MARKER = "key"
SPECIAL_WORDS = list(COLOURS) + [MARKER, "what", "follows", "?", "."]


def _sentence(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(n))


def _squad_length(rng: random.Random) -> int:
    """Context length in words with a SQuAD-like shape: median ~120, long right tail (some > 384 tokens)."""
    return int(min(600, max(25, rng.lognormvariate(math.log(120), 0.45))))


def qa_examples(n: int, seed: int = 0, *, v2: bool = False, squad_lengths: bool = False,
                context_words: tuple[int, int] = (20, 60)) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        length = _squad_length(rng) if squad_lengths else rng.randint(*context_words)
        words = [rng.choice(WORDS) for _ in range(length)]
        has_answer = not (v2 and rng.random() < 0.3)
        answer_text, answer_start = [], []
        if has_answer:
            pos = rng.randint(0, length - 3)
            words[pos] = MARKER
            context = " ".join(words)
            start = len(" ".join(words[: pos + 1])) + 1
            text = f"{words[pos + 1]} {words[pos + 2]}"
            assert context[start : start + len(text)] == text
            answer_text, answer_start = [text], [start]
        else:
            context = " ".join(words)
        rows.append(
            {
                "id": f"q{seed}-{i}",
                "question": f"what follows {MARKER} ?",
                "context": context,
                "answers": {"text": answer_text, "answer_start": answer_start},
            }
        )
    return rows


def cls_examples(n: int, seed: int = 0, *, pairs: bool = False, words: tuple[int, int] = (8, 20)) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        if pairs:
            a = _sentence(rng, rng.randint(*words)).split()
            b = _sentence(rng, rng.randint(*words)).split()
            same = rng.random() < 0.5
            if same:
                b[0] = a[0]
            elif b[0] == a[0]:
                b[0] = next(w for w in WORDS if w != a[0])
            rows.append({"id": f"c{seed}-{i}", "premise": " ".join(a), "hypothesis": " ".join(b),
                         "label": "same" if same else "different"})
        else:
            tokens = _sentence(rng, rng.randint(*words)).split()
            label = rng.randrange(3)
            tokens[rng.randrange(len(tokens))] = COLOURS[label]
            rows.append({"id": f"c{seed}-{i}", "text": " ".join(tokens), "label": COLOURS[label]})
    return rows


def summ_examples(n: int, seed: int = 0, *, sentences: tuple[int, int] = (3, 5),
                  words: tuple[int, int] = (4, 7)) -> list[dict]:
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        sents = [_sentence(rng, rng.randint(*words)) + " ." for _ in range(rng.randint(*sentences))]
        rows.append({"id": f"s{seed}-{i}", "document": " ".join(sents), "summary": sents[0]})
    return rows


# ------------------------------------------- a task's rows for a run spec (named by the task's `local.rows`)


def question_answering_rows(n: int, seed: int, hyperparameters: dict[str, Any]) -> list[dict]:
    return qa_examples(n, seed, v2=bool(hyperparameters.get("version_2_with_negative")))


def text_classification_rows(n: int, seed: int, hyperparameters: dict[str, Any]) -> list[dict]:
    """Pairs when the spec names a text pair column (not "none"), else single texts."""
    pair = hyperparameters.get("text_pair_column")
    return cls_examples(n, seed, pairs=bool(pair) and str(pair).lower() != "none")


def summarization_rows(n: int, seed: int, hyperparameters: dict[str, Any]) -> list[dict]:
    return summ_examples(n, seed)


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as handle:
        for row in rows:
            handle.write(json.dumps(row) + "\n")
    return path


def corpus() -> list[str]:
    rng = random.Random(1234)
    lines = [" ".join(WORDS), " ".join(SPECIAL_WORDS)]
    lines += [_sentence(rng, 30) for _ in range(300)]
    return lines


# ---------------------------------------------------------------- tokenizers


def _wordpiece():
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tok.normalizer = normalizers.BertNormalizer(lowercase=True)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tok.train_from_iterator(corpus(), trainers.WordPieceTrainer(vocab_size=400, special_tokens=specials,
                                                                         show_progress=False))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0", pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)],
    )
    tok.decoder = decoders.WordPiece()
    return tok, dict(pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                     mask_token="[MASK]"), ["input_ids", "token_type_ids", "attention_mask"]


def _bytelevel_bpe(kind: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    tok.train_from_iterator(
        corpus(),
        trainers.BpeTrainer(vocab_size=500, special_tokens=specials, show_progress=False,
                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
    )
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>",
        special_tokens=[("<s>", 0), ("</s>", 2)],
    )
    tok.decoder = decoders.ByteLevel()
    return tok, dict(bos_token="<s>", eos_token="</s>", pad_token="<pad>", unk_token="<unk>", cls_token="<s>",
                     sep_token="</s>", mask_token="<mask>"), ["input_ids", "attention_mask"]


def _unigram_t5():
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.Unigram())
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    specials = ["<pad>", "</s>", "<unk>"]
    tok.train_from_iterator(corpus(), trainers.UnigramTrainer(vocab_size=400, special_tokens=specials,
                                                              unk_token="<unk>", show_progress=False))
    tok.post_processor = processors.TemplateProcessing(
        single="$A </s>", pair="$A </s> $B </s>", special_tokens=[("</s>", 1)]
    )
    tok.decoder = decoders.Metaspace()
    return tok, dict(eos_token="</s>", pad_token="<pad>", unk_token="<unk>"), ["input_ids", "attention_mask"]


def build_tokenizer(kind: str):
    from transformers import PreTrainedTokenizerFast

    if kind in ("bert", "distilbert"):
        tok, specials, names = _wordpiece()
        if kind == "distilbert":  # DistilBERT takes no token types
            names = ["input_ids", "attention_mask"]
    elif kind in ("roberta", "bart"):
        tok, specials, names = _bytelevel_bpe(kind)
    elif kind == "t5":
        tok, specials, names = _unigram_t5()
    else:
        raise ValueError(kind)
    return PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=512, model_input_names=names, **specials)


# ---------------------------------------------------------------- models


def build_config(kind: str, tokenizer, size: str = "tiny"):
    from transformers import BartConfig, BertConfig, DistilBertConfig, RobertaConfig, T5Config

    vocab = len(tokenizer)
    hidden, layers, heads, ffn = (64, 2, 2, 128) if size == "tiny" else (128, 2, 4, 256)
    if size == "large":  # BERT-large dimensions (GPU benchmark)
        hidden, layers, heads, ffn = 1024, 24, 16, 4096
    if kind == "bert":
        return BertConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
                          intermediate_size=ffn, max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id,
                          hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    if kind == "distilbert":
        return DistilBertConfig(vocab_size=vocab, dim=hidden, n_layers=layers, n_heads=heads, hidden_dim=ffn,
                                max_position_embeddings=512, pad_token_id=tokenizer.pad_token_id, dropout=0.0,
                                attention_dropout=0.0)
    if kind == "roberta":
        return RobertaConfig(vocab_size=vocab, hidden_size=hidden, num_hidden_layers=layers,
                             num_attention_heads=heads, intermediate_size=ffn, max_position_embeddings=514,
                             pad_token_id=1, bos_token_id=0, eos_token_id=2, type_vocab_size=1,
                             hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    if kind == "bart":
        return BartConfig(vocab_size=vocab, d_model=hidden, encoder_layers=layers, decoder_layers=layers,
                          encoder_attention_heads=heads, decoder_attention_heads=heads, encoder_ffn_dim=ffn,
                          decoder_ffn_dim=ffn, max_position_embeddings=512, pad_token_id=1, bos_token_id=0,
                          eos_token_id=2, decoder_start_token_id=2, forced_eos_token_id=2, dropout=0.0,
                          attention_dropout=0.0, activation_dropout=0.0)
    if kind == "t5":
        return T5Config(vocab_size=vocab, d_model=hidden, d_kv=hidden // heads, d_ff=ffn, num_layers=layers,
                        num_decoder_layers=layers, num_heads=heads, pad_token_id=0, eos_token_id=1,
                        decoder_start_token_id=0, dropout_rate=0.0, feed_forward_proj="relu")
    raise ValueError(kind)


MODEL_KINDS = ("bert", "distilbert", "roberta", "bart", "t5")


def build_model_dir(kind: str, directory: Path, *, size: str = "tiny", seed: int = 0) -> Path:
    """A pretrained-style directory (config, random weights, tokenizer) that from_pretrained loads."""
    import torch
    from transformers import AutoModel, GenerationConfig

    directory = Path(directory)
    if (directory / "config.json").exists():
        return directory
    tokenizer = build_tokenizer(kind)
    config = build_config(kind, tokenizer, size)
    torch.manual_seed(seed)
    model = AutoModel.from_config(config)
    if kind in ("bart", "t5"):
        model.generation_config = GenerationConfig(
            decoder_start_token_id=config.decoder_start_token_id, eos_token_id=config.eos_token_id,
            pad_token_id=config.pad_token_id, max_length=64, num_beams=1,
        )
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory
