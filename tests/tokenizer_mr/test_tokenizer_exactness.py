"""The distributed result equals tokenizers' single-node trainer on the whole corpus: identical vocabulary
and merges, for several corpora split into 1, 2, 3 and 7 shards (with an empty object and empty hosts)."""

from __future__ import annotations

import json

import pytest
from testkit.tokenizer import corpus_lines, distributed, prefixed_order, reference, write_shards

from tokenizer_mr.settings import TokenizerSettings

# "hello" / "world" as special tokens: merges re-create them and must reuse their ids, as tokenizers does.
BPE_SPECIALS = ("<s>", "<pad>", "</s>", "<unk>", "<mask>", "<|endoftext|>", "hello", "Ġworld")
WP_SPECIALS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "<s>", "</s>", "world")

CASES = {
    "unicode-bpe": ("unicode", dict(tokenizer_type="bpe", vocab_size=520)),
    "unicode-wordpiece-lower": ("unicode", dict(tokenizer_type="wordpiece", vocab_size=420, lowercase=True)),
    "duplicates-bpe": ("duplicates", dict(tokenizer_type="bpe", vocab_size=400)),
    "duplicates-wordpiece": ("duplicates", dict(tokenizer_type="wordpiece", vocab_size=160)),
    "tiny-bpe": ("tiny", dict(tokenizer_type="bpe", vocab_size=300)),
    "tiny-wordpiece": ("tiny", dict(tokenizer_type="wordpiece", vocab_size=40)),
    "specials-bpe": ("specials", dict(tokenizer_type="bpe", vocab_size=330, special_tokens=BPE_SPECIALS)),
    "specials-wordpiece": ("specials", dict(tokenizer_type="wordpiece", vocab_size=120, special_tokens=WP_SPECIALS)),
    "minfreq-bpe-lower": ("zipf", dict(tokenizer_type="bpe", vocab_size=700, min_frequency=40, lowercase=True)),
    "minfreq-wordpiece": ("zipf", dict(tokenizer_type="wordpiece", vocab_size=600, min_frequency=25)),
}
_REFERENCE: dict[str, tuple] = {}


def _reference(case: str, settings: TokenizerSettings, tmp_path_factory):
    if case not in _REFERENCE:
        files = write_shards(corpus_lines(CASES[case][0]), 1, tmp_path_factory.mktemp("ref"))[0]
        _REFERENCE[case] = reference(settings, files)
    return _REFERENCE[case]


@pytest.mark.parametrize("n_hosts", [1, 2, 3, 7])
@pytest.mark.parametrize("case", sorted(CASES))
def test_identical_to_single_node(case, n_hosts, tmp_path, tmp_path_factory):
    corpus, kw = CASES[case]
    settings = TokenizerSettings(**kw).validate(for_reduce=True)
    ref_vocab, ref_merges = _reference(case, settings, tmp_path_factory)
    host_files = write_shards(corpus_lines(corpus), n_hosts, tmp_path)
    if n_hosts == 7:
        assert any(not files for files in host_files), "a host without files is part of the check"
    # WordPiece: tokenizers numbers the ##-continuations in its (randomly seeded) hash order; replay that order.
    order = prefixed_order(ref_vocab) if settings.tokenizer_type == "wordpiece" else None
    result = distributed(settings, host_files, tmp_path, order=order)
    assert result.vocab_dict == ref_vocab
    if ref_merges is not None:
        assert result.merges == ref_merges
    assert len(ref_vocab) <= settings.vocab_size


def test_min_frequency_stops_early(tmp_path, tmp_path_factory):
    corpus, kw = CASES["minfreq-bpe-lower"]
    settings = TokenizerSettings(**kw)
    vocab, _ = _reference("minfreq-bpe-lower", settings, tmp_path_factory)
    assert len(vocab) < settings.vocab_size  # the case really exercises min_frequency


def test_wordpiece_limit_alphabet(tmp_path):
    lines = corpus_lines("unicode")
    settings = TokenizerSettings(tokenizer_type="wordpiece", vocab_size=300)
    # choose a limit that does not cut between equal counts (tokenizers would drop an arbitrary one there)
    from collections import Counter

    from tokenizer_mr.counts import count_words

    chars: Counter[str] = Counter()
    for w, c in count_words(settings, lines).items():
        for ch in w:
            chars[ch] += c
    ranked = sorted(chars.values(), reverse=True)
    limit = next(k for k in range(40, len(ranked)) if ranked[k - 1] != ranked[k])
    settings = TokenizerSettings(tokenizer_type="wordpiece", vocab_size=300, limit_alphabet=limit)
    files = write_shards(lines, 3, tmp_path)
    ref_vocab, _ = reference(settings, [f for h in files for f in h])
    result = distributed(settings, files, tmp_path, order=prefixed_order(ref_vocab))
    assert result.vocab_dict == ref_vocab


@pytest.mark.parametrize("fmt", ["jsonl", "parquet"])
def test_jsonl_and_parquet_inputs(fmt, tmp_path):
    import pyarrow as pa
    import pyarrow.parquet as pq

    lines = corpus_lines("unicode")
    texts = [ln.rstrip("\n") for ln in lines]
    hosts = [[], [], []]
    for i in range(3):
        chunk = texts[i::3]
        path = tmp_path / "src" / f"part-{i}.{fmt}"
        path.parent.mkdir(parents=True, exist_ok=True)
        if fmt == "jsonl":
            path.write_text("".join(json.dumps({"id": j, "body": t}) + "\n" for j, t in enumerate(chunk)), encoding="utf-8")
        else:
            pq.write_table(pa.table({"id": list(range(len(chunk))), "body": chunk}), path)
        hosts[i].append(path)
    settings = TokenizerSettings(tokenizer_type="bpe", vocab_size=450, text_field="body")
    ref_vocab, ref_merges = reference(settings, texts=texts)
    result = distributed(settings, hosts, tmp_path)
    assert result.vocab_dict == ref_vocab
    assert result.merges == ref_merges


def test_many_count_parts_give_the_same_result(tmp_path, tmp_path_factory):
    """The map writes a counts part per chunk (bounded memory); the reduce sums them."""
    corpus, kw = CASES["duplicates-bpe"]
    settings = TokenizerSettings(**kw)
    ref_vocab, ref_merges = _reference("duplicates-bpe", settings, tmp_path_factory)
    host_files = write_shards(corpus_lines(corpus), 2, tmp_path)
    result = distributed(settings, host_files, tmp_path, chunk_chars=2000)
    assert len(list((tmp_path / "counts").glob("counts-algo-1.part*.parquet"))) > 3
    assert result.vocab_dict == ref_vocab and result.merges == ref_merges


def test_wordpiece_default_order_is_deterministic(tmp_path):
    """Without a replayed order, the ##-continuations are numbered as tokenizers would if its word map iterated
    in sorted order: first appearance over the sorted words. The same for any sharding."""
    from tokenizer_mr.counts import count_words

    settings = TokenizerSettings(tokenizer_type="wordpiece", vocab_size=400)
    lines = corpus_lines("unicode")
    one = distributed(settings, write_shards(lines, 1, tmp_path / "a"), tmp_path / "a")
    seven = distributed(settings, write_shards(lines, 7, tmp_path / "b"), tmp_path / "b")
    assert one.vocab == seven.vocab and one.merges == seven.merges
    expected: list[str] = []
    for word in sorted(count_words(settings, lines)):
        for ch in word[1:]:
            if "##" + ch not in expected:
                expected.append("##" + ch)
    assert [t for t in one.vocab[: one.initial_size] if t.startswith("##")] == expected
