"""Benchmark: distributed tokenizer training (map/reduce) against `tokenizers`' single-node trainer.

    nice python benchmarks/bench_tokenizer.py [--size-gb 1.0] [--hosts 16] [--vocab-size 32000] [--workdir DIR]
        [--distinct-words 2] [--curve 1,2,4,8] [--curve-baseline-max 2] [--curve-body-mb 8] [--curve-only]

1. generates a corpus of `--size-gb` GB (Zipf word distribution over `--distinct-words` million pseudo-words, 32
   files, valid UTF-8 at any size) in the work dir (default /tmp/bench_tokenizer; reused on later runs, never
   committed);
2. trains byte-level BPE with `tokenizers` on the whole corpus, all cores (`Tokenizer.train(files)`): the baseline;
3. runs the map (`tokenizer_map.py`, one process per simulated instance, `--hosts` of them, files dealt out
   like ShardedByS3Key) and the reduce (`tokenizer_reduce.py`) on the counts of all hosts;
4. checks that the vocabulary and merges are identical, and prints the table: baseline time, map throughput
   (per process, per core, per CPU second), reduce time and peak memory, and the modeled wall time for 1, 4 and
   16 instances (of this machine's size; never more instances than map processes measured, the table says which
   were left out), with the ratios against the targets (reduce <= 0.1x the baseline's time and <= 1.0x its peak
   memory; map throughput per process >= 0.5x the trainer's throughput per core);
5. the cost curve: the reduce at `--curve` million distinct words (corpora whose lexicon has that many words,
   each at least once: `generate_corpus(every_type=True)`), 4 map hosts each, time and memory per million
   distinct words, the single-node trainer beside it up to `--curve-baseline-max` million (identical result
   checked there too).

Every step runs in its own process; times are wall-clock (and CPU) of that process, memory is its peak RSS.
Not part of the test suite (it takes minutes; tests/benchmarks/test_tokenizer_bench.py runs it on tiny settings).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
CODE = REPO / "training_code"
SPECIALS = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]

# ---- corpus -----------------------------------------------------------------------------------------------------
_CONS = list("bcdfghjklmnprstvwz") + ["ch", "sh", "th", "st", "tr", "pl"]
_VOWELS = list("aeiou") + ["ai", "ou", "ea", "ee"]
_PUNCT = [",", ".", ";", ":", "!", "?", "'s", ")", '"']
_EXOTIC = ["é", "ü", "ñ", "ç", "ø", "ß", "日本", "語", "中文", "한국", "😀", "→", "€", "λ", "д", "ж"]
_HEAD = ["the", "of", "and", "to", "a", "in", "is", "that", "for", "it", "was", "on", "with", "as", "he"]


def _lexicon(n_types: int, rng: np.random.Generator) -> list[bytes]:
    """`n_types` distinct pseudo-words (syllables, some capitalized / numeric / non-Latin / with punctuation),
    most frequent first. Draws candidates in batches until there are enough distinct ones."""
    sylls = [c + v for c in _CONS for v in _VOWELS] + [c + v + d for c in _CONS[:8] for v in _VOWELS[:5] for d in "nrst"]
    sp = np.arange(1, len(sylls) + 1, dtype=np.float64) ** -0.8  # some syllables much more common
    seen = set(_HEAD)
    out = list(_HEAD)
    batch = 0
    while len(out) < n_types:
        n = n_types * 6 // 5 if batch == 0 else max(1000, (n_types - len(out)) * 2)
        lengths = [1, 2, 3, 4, 5] if batch == 0 else [3, 4, 5]  # later batches: the long words are the new ones
        weights = [0.2, 0.35, 0.25, 0.15, 0.05] if batch == 0 else [0.5, 0.35, 0.15]
        k = rng.choice(lengths, size=n, p=weights).tolist()
        syl = rng.choice(len(sylls), size=(n, 5), p=sp / sp.sum()).tolist()
        deco = rng.random(n).tolist()
        punct = rng.integers(len(_PUNCT), size=n).tolist()
        exo = rng.integers(len(_EXOTIC), size=n).tolist()
        num = rng.integers(0, 100000, size=n).tolist()
        for i in range(n):
            w = "".join([sylls[j] for j in syl[i][: k[i]]])
            r = deco[i]
            if r < 0.08:
                w = w.capitalize()
            elif r < 0.10:
                w = w.upper()
            elif r < 0.13:
                w = str(num[i])
            elif r < 0.17:
                w = w[: len(w) // 2] + _EXOTIC[exo[i]] + w[len(w) // 2 :]
            if (r * 97) % 1 < 0.12:
                w = w + _PUNCT[punct[i]]
            if w not in seen:
                seen.add(w)
                out.append(w)
                if len(out) >= n_types:
                    break
        batch += 1
    return [w.encode("utf-8") for w in out[:n_types]]


def _lexicon_vectorized(n_types: int, rng: np.random.Generator) -> list[bytes]:
    """`n_types` distinct pseudo-words of the same kinds as `_lexicon` (2-5 syllables; capitalized, upper-case,
    numeric, non-Latin or punctuated variants), drawn with NumPy: millions in seconds (the cost curve's corpora)."""
    sylls = [c + v for c in _CONS for v in _VOWELS] + [c + v + d for c in _CONS[:8] for v in _VOWELS[:5] for d in "nrst"]
    syl = np.array([x.encode() for x in sylls])
    sp = np.arange(1, len(sylls) + 1, dtype=np.float64) ** -0.8
    exotic = np.array([x.encode() for x in _EXOTIC])
    punct = np.array([x.encode() for x in _PUNCT])
    words = np.array([x.encode() for x in _HEAD], dtype="S32")
    while words.size < n_types:
        n = max(10_000, (n_types - words.size) * 3 // 2)
        k = rng.choice([2, 3, 4, 5], size=n, p=[0.3, 0.35, 0.25, 0.1])
        idx = rng.choice(len(sylls), size=(n, 5), p=sp / sp.sum())
        w = syl[idx[:, 0]]
        for j in range(1, 5):
            w = np.where(k > j, np.char.add(w, syl[idx[:, j]]), w)
        w = w.astype("S32")  # room for what is appended below (at most 23 bytes; assignments keep the width)
        r = rng.random(n)
        for lo, hi, change in ((0.0, 0.08, np.char.capitalize), (0.08, 0.10, np.char.upper)):
            sel = (r >= lo) & (r < hi)
            w[sel] = change(w[sel])
        sel = (r >= 0.10) & (r < 0.13)
        w[sel] = rng.integers(0, 10_000_000, size=int(sel.sum())).astype("S8")
        sel = (r >= 0.13) & (r < 0.17)
        w[sel] = np.char.add(w[sel], exotic[rng.integers(len(exotic), size=int(sel.sum()))])
        sel = (r * 97) % 1 < 0.12
        w[sel] = np.char.add(w[sel], punct[rng.integers(len(punct), size=int(sel.sum()))])
        words = np.concatenate([words, w])
        _, first = np.unique(words, return_index=True)
        words = words[np.sort(first)]  # distinct, in the order drawn
    return words[:n_types].tolist()


class _Lexicon:
    """The lexicon's words in one buffer, to write any sequence of them as text with NumPy."""

    def __init__(self, words: list[bytes]):
        self.size = len(words)
        self.tlen = np.fromiter((len(b) for b in words), dtype=np.int64, count=len(words))
        self.blob = np.frombuffer(b"".join(words), dtype=np.uint8)
        self.toff = np.zeros(len(words), dtype=np.int64)
        np.cumsum(self.tlen[:-1], out=self.toff[1:])

    def text(self, idx: np.ndarray, rng: np.random.Generator) -> bytes:
        """The words `idx` separated by spaces, about 18 to a line."""
        lens = self.tlen[idx] + 1  # the word and a separator
        ends = np.cumsum(lens)
        src = np.repeat(self.toff[idx] - (ends - lens), lens) + np.arange(int(ends[-1]), dtype=np.int64)
        np.minimum(src, self.blob.size - 1, out=src)
        buf = self.blob[src]
        buf[ends - 1] = np.where(rng.random(idx.size) < 1 / 18, 10, 32).astype(np.uint8)  # ~18 words a line
        return buf.tobytes()


def generate_corpus(out_dir: Path, total_bytes: int, *, n_files: int = 32, n_types: int = 2_000_000,
                    zipf_s: float = 1.05, seed: int = 0, every_type: bool = False) -> list[Path]:
    """About `total_bytes` of text in `n_files` files; Zipf(s) token frequencies over the lexicon's ranks. Every
    file ends with a whole line (valid UTF-8 at any size). `every_type`: each of the `n_types` words also appears
    once more, after the sampled text (spread over the files), so the corpus holds all of them: the distinct
    words are set by `n_types` (the cost curve's parameter) rather than by the size."""
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = {"total_bytes": total_bytes, "n_files": n_files, "n_types": n_types, "zipf_s": zipf_s, "seed": seed,
            "every_type": every_type, "v": 4}
    marker = out_dir / "corpus.json"
    files = [out_dir / f"part-{i:04d}.txt" for i in range(n_files)]
    if marker.exists() and json.loads(marker.read_text()) == spec and all(f.exists() for f in files):
        print(f"reusing the corpus in {out_dir}", flush=True)
        return files
    marker.unlink(missing_ok=True)
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    lex = _Lexicon((_lexicon_vectorized if every_type else _lexicon)(n_types, rng))
    one_s = 1.0 - zipf_s
    span = (lex.size + 1) ** one_s - 1.0  # inverse of the continuous Zipf CDF over ranks 1..N
    per_file = total_bytes // n_files
    tail = np.array_split(rng.permutation(lex.size), n_files) if every_type else [None] * n_files
    chunk = int(np.clip(per_file // 6, 4096, 1 << 21))  # words drawn at a time: a bit more than a file's share
    for path, extra in zip(files, tail, strict=True):
        written = 0
        with open(path, "wb") as fh:
            while written < per_file:
                ranks = (rng.random(chunk) * span + 1.0) ** (1.0 / one_s)
                data = lex.text(np.minimum(ranks.astype(np.int64) - 1, lex.size - 1), rng)
                if written + len(data) > per_file:  # end on the last whole line that fits (none: stop here)
                    data = data[: data.rfind(b"\n", 0, per_file - written) + 1]
                if not data:
                    break
                fh.write(data)
                written += len(data)
            if extra is not None and extra.size:
                fh.write(lex.text(extra, rng)[:-1] + b"\n")
    marker.write_text(json.dumps(spec))
    size = sum(f.stat().st_size for f in files)
    print(f"generated {size / 1e9:.2f} GB in {n_files} files in {time.perf_counter() - t0:.0f} s", flush=True)
    return files


# ---- measured child processes -------------------------------------------------------------------------------------
def run_measured(cmd: list[str], env: dict | None = None, log_path: Path | None = None) -> dict:
    """Run `cmd`; returns wall seconds, CPU seconds (user+sys) and peak RSS of the child."""
    t0 = time.perf_counter()
    out = open(log_path, "w") if log_path else subprocess.DEVNULL  # noqa: SIM115
    peak = 0
    try:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
        while True:  # poll VmHWM (ru_maxrss of a child includes the parent's size at fork)
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            try:
                with open(f"/proc/{proc.pid}/status", encoding="ascii") as fh:
                    for line in fh:
                        if line.startswith("VmHWM:"):
                            peak = max(peak, int(line.split()[1]) * 1024)
            except OSError:
                pass
            time.sleep(0.1)
        proc.returncode = os.waitstatus_to_exitcode(status)
    finally:
        if log_path:
            out.close()
    wall = time.perf_counter() - t0
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        tail = log_path.read_text()[-3000:] if log_path else ""
        raise SystemExit(f"command failed ({code}): {' '.join(cmd)}\n{tail}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "rss": peak}


_BASELINE = """
import json, time
from tokenizer_mr.settings import TokenizerSettings
s = TokenizerSettings(tokenizer_type="bpe", vocab_size={vocab}, special_tokens=tuple({specials!r}))
tok, trainer = s.reference_trainer()
files = {files!r}
t0 = time.perf_counter()
tok.train(files, trainer)
train_s = time.perf_counter() - t0
tok.save({out!r})
json.dump({{"train_seconds": train_s}}, open({out!r} + ".time", "w"))
"""


def run_baseline(work: Path, files: list[Path], vocab: int, env: dict, log: Path) -> dict:
    """tokenizers' single-node trainer on the whole corpus, all cores; writes work/reference-tokenizer.json."""
    ref_path = str(work / "reference-tokenizer.json")
    script = _BASELINE.format(code=str(CODE), vocab=vocab, specials=SPECIALS, files=[str(f) for f in files],
                              out=ref_path)
    base = run_measured([sys.executable, "-c", script], env, log)
    base["train"] = json.loads(Path(ref_path + ".time").read_text())["train_seconds"]
    base["model"] = json.loads(Path(ref_path).read_text())["model"]
    return base


def run_maps(work: Path, files: list[Path], n_hosts: int, env: dict, counts_dir: Path, logs: Path) -> list[dict]:
    """One map process per simulated instance, one after the other; files dealt round robin (ShardedByS3Key)."""
    shutil.rmtree(counts_dir, ignore_errors=True)
    hosts = [f"algo-{i + 1}" for i in range(n_hosts)]
    maps = []
    for i, host in enumerate(hosts):
        host_base = work / "hosts" / host
        shutil.rmtree(host_base, ignore_errors=True)
        (host_base / "config").mkdir(parents=True)
        (host_base / "config" / "resourceconfig.json").write_text(json.dumps({"current_host": host, "hosts": hosts}))
        data = host_base / "processing" / "input" / "data"
        data.mkdir(parents=True)
        shard = files[i::n_hosts]
        for f in shard:
            (data / f.name).symlink_to(f)
        m = run_measured(
            [sys.executable, str(CODE / "tokenizer_map.py"), "--tokenizer-type", "bpe", "--text-field", "text",
             "--output-dir", str(counts_dir)],
            {**env, "SAGEMAKER_BASE_DIR": str(host_base)}, logs / f"map-{host}.log",
        )
        m["bytes"] = sum(f.stat().st_size for f in shard)
        maps.append(m)
        print(f"  map {host}: {m['bytes'] / 1e6:.0f} MB in {m['wall']:.1f} s ({m['cpu']:.0f} CPU s, "
              f"{m['rss'] / 1e6:.0f} MB peak)", flush=True)
    return maps


def run_reduce(counts_dir: Path, out_dir: Path, vocab: int, env: dict, log: Path) -> dict:
    """The reduce over the counts of all hosts; its tokenizer_stats.json as `stats`."""
    shutil.rmtree(out_dir, ignore_errors=True)
    red = run_measured(
        [sys.executable, str(CODE / "tokenizer_reduce.py"), "--tokenizer-type", "bpe", "--text-field", "text",
         "--vocab-size", str(vocab), "--special-tokens", json.dumps(SPECIALS),
         "--input-dir", str(counts_dir), "--output-dir", str(out_dir)],
        env, log,
    )
    red["stats"] = json.loads((out_dir / "tokenizer_stats.json").read_text())
    red["model"] = json.loads((out_dir / "tokenizer.json").read_text())["model"]
    return red


def same_model(a: dict, b: dict) -> bool:
    return a["vocab"] == b["vocab"] and a["merges"] == b["merges"]


# ---- the model of N instances -------------------------------------------------------------------------------------
MODELED_INSTANCES = (1, 4, 16)


def modeled_instances(measured_hosts: int) -> tuple[list[int], str]:
    """The instance counts the model reports: the standard ones up to the number of map processes measured (and
    that number): more instances than measured shards would be a guess. Returns them and a note on any left out."""
    shown = sorted({n for n in MODELED_INSTANCES if n <= measured_hosts} | {measured_hosts})
    left_out = [n for n in MODELED_INSTANCES if n > measured_hosts]
    note = (f"not modeled: {', '.join(map(str, left_out))} instances (only {measured_hosts} map process(es) "
            f"measured; run with --hosts {max(left_out)})") if left_out else ""
    return shown, note


def modeled_wall(maps: list[dict], startup: float, reduce: dict, n: int, cores: int, key: str = "wall") -> float:
    """Wall time with n instances (n <= len(maps)): the busiest instance's maps, then the reduce. key "cpu": from
    CPU seconds instead (map CPU spread over the cores, reduce CPU), i.e. as on an unshared machine."""
    if not 1 <= n <= len(maps):
        raise ValueError(f"{n} instances: only {len(maps)} map process(es) were measured")
    per = [0.0] * n
    for i, m in enumerate(maps):
        per[i % n] += (m["wall"] - startup) if key == "wall" else m["cpu"] / cores
    if key == "wall":
        return max(per) + startup + reduce["wall"]
    return max(per) + reduce["cpu"]


# ---- the cost curve: the reduce as the distinct words grow ------------------------------------------------------------
CURVE_BODY_BYTES = 8_000_000  # Zipf-sampled text per point; every lexicon word is added once on top (every_type)


def run_curve(points: list[float], work: Path, vocab: int, env: dict, logs: Path, *, baseline_max: float,
              hosts: int = 4, body_bytes: int = CURVE_BODY_BYTES) -> list[dict]:
    """For each point (millions of distinct words): a corpus with that many lexicon words (each at least once),
    the map on `hosts` processes, the reduce measured; the single-node trainer too up to `baseline_max`."""
    rows = []
    for millions in points:
        n_types = int(round(millions * 1e6))
        cdir = work / "curve" / f"{n_types}"
        print(f"curve: {millions:g} M distinct words ...", flush=True)
        files = generate_corpus(cdir / "corpus", body_bytes, n_files=8, n_types=n_types, every_type=True, seed=1)
        corpus_bytes = sum(f.stat().st_size for f in files)
        run_maps(cdir, files, hosts, env, cdir / "counts", logs)
        red = run_reduce(cdir / "counts", cdir / "tokenizer", vocab, env, logs / f"curve-{n_types}-reduce.log")
        row = {"target_m": millions, "bytes": corpus_bytes, "reduce": {k: red[k] for k in ("wall", "cpu", "rss")},
               "stats": red["stats"]}
        if millions <= baseline_max:
            base = run_baseline(cdir, files, vocab, env, logs / f"curve-{n_types}-baseline.log")
            row["baseline"] = {k: base[k] for k in ("train", "cpu", "rss")}
            row["exact"] = same_model(base["model"], red["model"])
        rows.append(row)
        st = red["stats"]
        print(f"  {st['unique_words']:,} distinct words: reduce {red['wall']:.1f} s, {red['cpu']:.1f} CPU s, "
              f"{red['rss'] / 1e6:.0f} MB peak", flush=True)
    return rows


def curve_table(rows: list[dict], cores: int) -> list[str]:
    """The curve as Markdown lines: time and memory per million distinct words, and the growth from the first
    point (linear growth keeps the per-million figures flat)."""
    out = ["| distinct words | characters | corpus | merges | reduce wall | reduce CPU | peak memory | "
           "CPU s per M words | MB per M words | single node (wall, CPU, peak) | reduce / single node |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        st, red = r["stats"], r["reduce"]
        m_words = st["unique_words"] / 1e6
        base = r.get("baseline")
        if base:
            vs = (f"{base['train']:.1f} s, {base['cpu']:.0f} CPU s, {base['rss'] / 1e6:.0f} MB"
                  f"{'' if r['exact'] else ' NOT IDENTICAL'}")
            ratio = f"{red['wall'] / base['train']:.3f}x wall, {red['cpu'] / (base['cpu'] / cores):.3f}x CPU"
        else:
            vs, ratio = "not run (time and memory of this machine)", "-"
        out.append(f"| {st['unique_words'] / 1e6:.2f} M | {st['learning']['characters'] / 1e6:.1f} M | "
                   f"{r['bytes'] / 1e6:.0f} MB | {st['merges']:,} | {red['wall']:.1f} s | {red['cpu']:.1f} s | "
                   f"{red['rss'] / 1e6:.0f} MB | {red['cpu'] / m_words:.2f} | {red['rss'] / 1e6 / m_words:.0f} | "
                   f"{vs} | {ratio} |")
    if len(rows) >= 2:
        first, last = rows[0], rows[-1]
        k_words = last["stats"]["unique_words"] / first["stats"]["unique_words"]
        k_cpu = last["reduce"]["cpu"] / first["reduce"]["cpu"]
        k_rss = last["reduce"]["rss"] / first["reduce"]["rss"]
        out.append("")
        out.append(f"growth from the first to the last point: distinct words x{k_words:.1f}, reduce CPU x{k_cpu:.1f}, "
                   f"peak memory x{k_rss:.1f} ({'no faster than linear' if max(k_cpu, k_rss) <= k_words * 1.1 else 'FASTER than linear'})")
    return out


def _print_table(rows: list[tuple[str, str]]) -> None:
    width = max(len(k) for k, _ in rows)
    print()
    print("| " + "figure".ljust(width) + " | value |")
    print("|" + "-" * (width + 2) + "|-------|")
    for k, v in rows:
        print(f"| {k.ljust(width)} | {v} |")


def _run_env() -> dict:
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "true", "RUNPROC_SKIP_PIP": "1"}
    env.pop("SAGEMAKER_BASE_DIR", None)
    return env


def _print_curve(curve: list[dict], args: argparse.Namespace, cores: int) -> list[str]:
    lines = curve_table(curve, cores) if curve else []
    if lines:
        print(f"\ncost curve: the reduce ({min(4, args.hosts)} map hosts, vocabulary {args.vocab_size}) as the distinct "
              f"words grow; each corpus: {args.curve_body_mb:g} MB of Zipf-sampled text plus every lexicon word once\n")
        print("\n".join(lines))
    return lines


def _curve_only(args: argparse.Namespace, work: Path, cores: int, t_start: float) -> int:
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    points = [float(x) for x in args.curve.split(",") if x.strip()]
    curve = run_curve(points, work, args.vocab_size, _run_env(), logs, baseline_max=args.curve_baseline_max,
                      hosts=min(4, args.hosts), body_bytes=int(args.curve_body_mb * 1e6))
    lines = _print_curve(curve, args, cores)
    print(f"\nbenchmark wall time: {time.perf_counter() - t_start:.0f} s")
    (work / "curve.json").write_text(json.dumps({"curve": lines, "raw": curve}, indent=2, default=str))
    return 0 if all(r.get("exact", True) for r in curve) else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-gb", type=float, default=1.0)
    ap.add_argument("--hosts", type=int, default=16, help="map processes (simulated instances)")
    ap.add_argument("--vocab-size", type=int, default=32000)
    ap.add_argument("--files", type=int, default=32, help="objects in the corpus")
    ap.add_argument("--distinct-words", type=float, default=2.0,
                    help="millions of words in the corpus generator's lexicon (Zipf-sampled: not all of them appear)")
    ap.add_argument("--curve", default="1,2,4,8",
                    help="millions of distinct words at which to measure the reduce ('' for none)")
    ap.add_argument("--curve-baseline-max", type=float, default=2.0,
                    help="run the single-node trainer at curve points up to this many millions of distinct words")
    ap.add_argument("--curve-body-mb", type=float, default=CURVE_BODY_BYTES / 1e6,
                    help="Zipf-sampled text per curve point (MB), on top of every lexicon word once")
    ap.add_argument("--curve-only", action="store_true", help="measure the cost curve only (no 1 GB run)")
    ap.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "bench_tokenizer"))
    args = ap.parse_args(argv)
    if args.hosts < 1 or args.files < 1 or args.size_gb <= 0:
        ap.error("--hosts, --files and --size-gb must be positive")
    work = Path(args.workdir)
    cores = os.cpu_count() or 1
    t_start = time.perf_counter()
    if args.curve_only:
        return _curve_only(args, work, cores, t_start)
    files = generate_corpus(work / "corpus", int(args.size_gb * 1e9), n_files=args.files,
                            n_types=int(args.distinct_words * 1e6))
    corpus_bytes = sum(f.stat().st_size for f in files)
    env = _run_env()
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    # 1. baseline: tokenizers' single-node trainer on the whole corpus, all cores
    print(f"baseline: tokenizers single-node training on {corpus_bytes / 1e9:.2f} GB, {cores} cores ...", flush=True)
    base = run_baseline(work, files, args.vocab_size, env, logs / "baseline.log")
    print(f"  {base['train']:.1f} s training ({base['wall']:.1f} s process, {base['cpu']:.0f} CPU s)", flush=True)

    # 2. map: one process per simulated instance
    counts_dir = work / "counts"
    maps = run_maps(work, files, args.hosts, env, counts_dir, logs)
    # the fixed cost of a map process (imports, set-up, writing): a host with an empty shard
    empty_base = work / "hosts" / "empty"
    shutil.rmtree(empty_base, ignore_errors=True)
    (empty_base / "processing" / "input" / "data").mkdir(parents=True)
    startup = run_measured([sys.executable, str(CODE / "tokenizer_map.py"), "--output-dir", str(work / "empty-counts")],
                           {**env, "SAGEMAKER_BASE_DIR": str(empty_base)}, logs / "map-empty.log")["wall"]

    # 3. reduce over the counts of all hosts
    print(f"reduce: {args.hosts} counts files ...", flush=True)
    red = run_reduce(counts_dir, work / "tokenizer", args.vocab_size, env, logs / "reduce.log")
    stats = red["stats"]

    # 4. exactness
    exact = same_model(base["model"], red["model"])

    # 5. the cost curve
    points = [float(x) for x in args.curve.split(",") if x.strip()]
    curve = run_curve(points, work, args.vocab_size, env, logs, baseline_max=args.curve_baseline_max,
                      hosts=min(4, args.hosts), body_bytes=int(args.curve_body_mb * 1e6)) if points else []

    # 6. figures
    map_bytes = sum(m["bytes"] for m in maps)
    map_wall = sum(m["wall"] for m in maps)
    map_cpu = sum(m["cpu"] for m in maps)
    tp_process = map_bytes / map_wall  # one map process (it uses all cores of its instance)
    tp_map_core = tp_process / cores
    tp_map_cpu = map_bytes / map_cpu
    tp_base_core = corpus_bytes / base["train"] / cores
    tp_base_cpu = corpus_bytes / base["cpu"]
    reduce_s = red["wall"]
    learning = stats["learning"]
    mb = 1e6
    rows = [
        ("corpus", f"{corpus_bytes / 1e9:.2f} GB, {stats['words']:,} words, {stats['unique_words']:,} unique, "
                   f"{len(files)} files"),
        ("machine", f"{cores} cores (shared; CPU seconds are the steadier measure)"),
        ("vocabulary", f"byte-level BPE, {args.vocab_size} tokens, {stats['merges']:,} merges"),
        ("identical vocab + merges", "yes" if exact else "NO"),
        ("single-node tokenizers training", f"{base['train']:.1f} s wall, {base['cpu']:.0f} CPU s, "
                                            f"{base['rss'] / mb:.0f} MB peak"),
        ("  throughput per core", f"{tp_base_core / mb:.2f} MB/s ({tp_base_cpu / mb:.2f} MB per CPU s)"),
        ("map (all hosts, sequentially)", f"{map_wall:.1f} s wall, {map_cpu:.0f} CPU s, "
                                          f"peak {max(m['rss'] for m in maps) / mb:.0f} MB per process"),
        ("  throughput per process", f"{tp_process / mb:.2f} MB/s ({tp_map_core / mb:.2f} MB/s per core, "
                                     f"{tp_map_cpu / mb:.2f} MB per CPU s)"),
        ("  fixed cost per map process", f"{startup:.1f} s"),
        ("reduce", f"{reduce_s:.1f} s wall ({stats['seconds_merge_counts']:.1f} s merging counts, "
                   f"{stats['seconds_learn']:.1f} s learning: {learning.get('implementation', 'python')}), "
                   f"{red['cpu']:.1f} CPU s, {red['rss'] / mb:.0f} MB peak"),
    ]
    base_cpu_wall = base["cpu"] / cores
    shown, not_modeled = modeled_instances(len(maps))
    for n in shown:
        t = modeled_wall(maps, startup, red, n, cores)
        tc = modeled_wall(maps, startup, red, n, cores, "cpu")
        rows.append((f"modeled wall, {n} instance(s)",
                     f"{t:.1f} s = {base['train'] / t:.2f}x faster than single node (from CPU s: {tc:.1f} s vs "
                     f"{base_cpu_wall:.1f} s = {base_cpu_wall / tc:.2f}x)"))
    if not_modeled:
        rows.append(("modeled wall, more instances", not_modeled))
    r_reduce = reduce_s / base["train"]
    # contention-free estimate: the baseline's CPU seconds spread over all cores vs the reduce's CPU seconds
    r_reduce_cpu = red["cpu"] / (base["cpu"] / cores)
    r_mem = red["rss"] / base["rss"]
    r_map_core = tp_map_core / tp_base_core
    r_map_cpu = tp_map_cpu / tp_base_cpu
    r_map_process = tp_process / tp_base_core
    rows += [
        ("target: reduce <= 0.1x single node",
         f"{r_reduce:.3f}x by wall, {r_reduce_cpu:.3f}x by CPU (reduce CPU s / (baseline CPU s / cores))  "
         f"{'MET' if max(r_reduce, r_reduce_cpu) <= 0.1 else 'NOT MET'}"),
        ("target: reduce peak <= 1.0x single node", f"{r_mem:.2f}x  {'MET' if r_mem <= 1.0 else 'NOT MET'}"),
        ("target: map >= 0.5x trainer per core",
         f"per process {r_map_process:.2f}x, per core {r_map_core:.2f}x, per CPU s {r_map_cpu:.2f}x  "
         f"{'MET' if min(r_map_core, r_map_cpu) >= 0.5 else 'NOT MET'}"),
    ]
    _print_table(rows)
    print("\nmodel: instances of this machine's size; map wall = the busiest instance's share of the measured map "
          "times (plus one fixed cost), then the reduce as measured with all hosts' counts; container start-up "
          "and S3 transfers are not included; never more instances than map processes measured.")
    curve_lines = _print_curve(curve, args, cores)
    curve_exact = all(r.get("exact", True) for r in curve)
    print(f"\nbenchmark wall time: {time.perf_counter() - t_start:.0f} s")
    raw = {"baseline": {k: v for k, v in base.items() if k != "model"}, "maps": maps, "map_startup": startup,
           "reduce": {k: v for k, v in red.items() if k != "model"}, "stats": stats, "cores": cores, "curve": curve}
    (work / "results.json").write_text(json.dumps({"rows": rows, "exact": exact, "curve": curve_lines, "raw": raw},
                                                  indent=2, ensure_ascii=False, default=str))
    return 0 if exact and curve_exact else 1


if __name__ == "__main__":
    sys.exit(main())
