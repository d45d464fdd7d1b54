"""Helpers for the tokenizer map/reduce tests: small corpora, sharding, the single-node reference, the
distributed run (in-process map per host, merge, learn)."""

from __future__ import annotations

import json
import random
from collections.abc import Sequence
from pathlib import Path

from tokenizer_mr.container import HostInfo
from tokenizer_mr.counts import find_counts_files, merge_counts
from tokenizer_mr.jobs import learn, run_map
from tokenizer_mr.settings import TokenizerSettings


def _unicode_lines(rng: random.Random) -> list[str]:
    pieces = [
        "naïve café", "cafe\u0301", "Ünïcödé", "straße", "ΑΒΓ αβγ λόγος", "Привет мир", "שלום עולם", "مرحبا بالعالم",
        "नमस्ते दुनिया", "日本語のテキスト", "中文字符", "한국어 문장", "😀😃😄", "👩‍👩‍👧‍👦", "👍🏽", "∑∫√∞",
        "ＦＵＬＬ　ＷＩＤＴＨ", "zero\u200bwidth", "tab\there", "I'm", "don't", "3.14159", "42", "e-mail", "ÀÉÎÕÜ",
        "ﬁnance", "Ωmega", "\u00a0nbsp", "x²", "½",
    ]
    lines = []
    for _ in range(300):
        words = [rng.choice(pieces) for _ in range(rng.randint(0, 9))]
        end = rng.choice(["\n", "\n", "\r\n", " \n", "!\n"])
        lines.append(" ".join(words) + end)
    return lines


def _duplicate_lines(rng: random.Random) -> list[str]:
    base = [
        "the quick brown fox jumps over the lazy dog\n",
        "aaaa aaa aa a aaaaaaa bbb ababab abab\n",
        "to be or not to be that is the question\n",
        "----- ===== ..... !!!!!\n",
        "mississippi missing misses\n",
    ]
    lines = [rng.choice(base) for _ in range(600)]
    lines += ["a" * n + "\n" for n in range(1, 30)]
    return lines


def _special_lines(rng: random.Random) -> list[str]:
    words = ["<s>", "</s>", "[CLS]", "[SEP]", "<|endoftext|>", "<mask>", "hello", "world", "<", "s", ">", "ss", "<<s>>"]
    return [" ".join(rng.choice(words) for _ in range(rng.randint(1, 12))) + "\n" for _ in range(300)]


def _zipf_lines(rng: random.Random) -> list[str]:
    syll = ["ka", "to", "ri", "mu", "se", "na", "po", "li", "ve", "do", "qu", "xi"]
    vocab = ["".join(rng.choice(syll) for _ in range(rng.randint(1, 4))) for _ in range(400)]
    weights = [1.0 / (r + 1) for r in range(len(vocab))]
    return [" ".join(rng.choices(vocab, weights, k=rng.randint(1, 15))) + "\n" for _ in range(500)]


CORPORA = {
    "unicode": _unicode_lines,
    "duplicates": _duplicate_lines,
    "tiny": lambda rng: ["hello world\n", "hi\n", "\n"],
    "specials": _special_lines,
    "zipf": _zipf_lines,
}


def corpus_lines(name: str, seed: int = 0) -> list[str]:
    return CORPORA[name](random.Random(f"{name}-{seed}"))


def write_shards(lines: Sequence[str], n_hosts: int, root: Path, *, n_files: int | None = None) -> list[list[Path]]:
    """Split the lines over files and the files over hosts like ShardedByS3Key does (round robin), so that
    with 2+ hosts one host gets an empty file and with 7 hosts some hosts get no file at all."""
    n_files = n_files or max(1, min(5, n_hosts))
    chunks = [lines[i::n_files] for i in range(n_files)]
    if n_hosts > 1:
        chunks.append([])  # an empty object
    files = []
    for i, chunk in enumerate(chunks):
        path = root / "corpus" / f"part-{i:03d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes("".join(chunk).encode("utf-8"))
        files.append(path)
    hosts: list[list[Path]] = [[] for _ in range(n_hosts)]
    for i, f in enumerate(files):
        hosts[(i + n_hosts - 1) % n_hosts].append(f)  # the last host gets the first file: host 1 may be empty
    return hosts


def reference(settings: TokenizerSettings, files: Sequence[Path] = (), texts: Sequence[str] | None = None):
    """Vocab and merges (None for WordPiece) of tokenizers' single-node trainer on the whole corpus."""
    tok, trainer = settings.reference_trainer()
    if texts is not None:
        tok.train_from_iterator(list(texts), trainer)
    else:
        tok.train([str(f) for f in files], trainer)
    model = json.loads(tok.to_str())["model"]
    merges = [tuple(m) for m in model["merges"]] if "merges" in model else None
    return model["vocab"], merges


def prefixed_order(vocab: dict[str, int]) -> list[str]:
    """The `##x` tokens in the id order a tokenizers run gave them (it depends on its hash seed)."""
    return [t for t, _ in sorted(vocab.items(), key=lambda kv: kv[1]) if t.startswith("##") and len(t) == 3]


def distributed(settings: TokenizerSettings, host_files: list[list[Path]], work: Path, *, order=None, **map_kw):
    """Run the map on every host (in-process, each on its own input dir), merge the counts and learn."""
    hosts = tuple(f"algo-{i + 1}" for i in range(len(host_files)))
    counts_dir = work / "counts"
    for i, files in enumerate(host_files):
        in_dir = work / f"in-{i + 1}"
        in_dir.mkdir(parents=True, exist_ok=True)
        for f in files:
            (in_dir / f.name).write_bytes(f.read_bytes())
        run_map(settings, in_dir, counts_dir, host=HostInfo(hosts[i], hosts), **map_kw)
    merged = merge_counts(find_counts_files(counts_dir), settings)
    return learn(settings, merged.words, merged.counts, prefixed_order=order)
