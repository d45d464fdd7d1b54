"""Benchmark: distributed tokenizer training (map/reduce) against `tokenizers`' single-node trainer.

    nice python benchmarks/bench_tokenizer.py [--size-gb 1.0] [--hosts 16] [--vocab-size 32000] [--workdir DIR]

1. generates a corpus of `--size-gb` GB (Zipf word distribution over pseudo-words, 32 files) in the work dir
   (default /tmp/bench_tokenizer; reused on later runs, never committed);
2. trains byte-level BPE with `tokenizers` on the whole corpus, all cores (`Tokenizer.train(files)`): the baseline;
3. runs the map (`tokenizer_map.py`, one process per simulated instance, `--hosts` of them, files dealt out
   like ShardedByS3Key) and the reduce (`tokenizer_reduce.py`) on the counts of all hosts;
4. checks that the vocabulary and merges are identical, and prints the table: baseline time, map throughput
   (per process, per core, per CPU second), reduce time, peak memory, and the modeled wall time for 1, 4 and 16
   instances (of this machine's size), with the ratios against the targets
   (reduce <= 0.5 x baseline; map throughput per process >= 0.5 x the trainer's throughput per core).

Every step runs in its own process; times are wall-clock (and CPU) of that process, memory is its peak RSS.
Not part of the test suite (it takes minutes).
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
    most frequent first."""
    sylls = [c + v for c in _CONS for v in _VOWELS] + [c + v + d for c in _CONS[:8] for v in _VOWELS[:5] for d in "nrst"]
    n = n_types * 6 // 5
    k = rng.choice([1, 2, 3, 4, 5], size=n, p=[0.2, 0.35, 0.25, 0.15, 0.05]).tolist()
    sp = np.arange(1, len(sylls) + 1, dtype=np.float64) ** -0.8  # some syllables much more common
    syl = rng.choice(len(sylls), size=(n, 5), p=sp / sp.sum()).tolist()
    deco = rng.random(n).tolist()
    punct = rng.integers(len(_PUNCT), size=n).tolist()
    exo = rng.integers(len(_EXOTIC), size=n).tolist()
    num = rng.integers(0, 100000, size=n).tolist()
    seen = set(_HEAD)
    out = list(_HEAD)
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
    return [w.encode("utf-8") for w in out]


def generate_corpus(out_dir: Path, total_bytes: int, *, n_files: int = 32, n_types: int = 2_000_000,
                    zipf_s: float = 1.05, seed: int = 0) -> list[Path]:
    """About `total_bytes` of text in `n_files` files; Zipf(s) token frequencies over the lexicon's ranks."""
    out_dir.mkdir(parents=True, exist_ok=True)
    spec = {"total_bytes": total_bytes, "n_files": n_files, "n_types": n_types, "zipf_s": zipf_s, "seed": seed, "v": 3}
    marker = out_dir / "corpus.json"
    files = [out_dir / f"part-{i:04d}.txt" for i in range(n_files)]
    if marker.exists() and json.loads(marker.read_text()) == spec and all(f.exists() for f in files):
        print(f"reusing the corpus in {out_dir}", flush=True)
        return files
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    lex = _lexicon(n_types, rng)
    tlen = np.fromiter((len(b) for b in lex), dtype=np.int64, count=len(lex))
    blob = np.frombuffer(b"".join(lex), dtype=np.uint8)
    toff = np.zeros(len(lex), dtype=np.int64)
    np.cumsum(tlen[:-1], out=toff[1:])
    one_s = 1.0 - zipf_s
    span = (len(lex) + 1) ** one_s - 1.0  # inverse of the continuous Zipf CDF over ranks 1..N
    per_file = total_bytes // n_files
    for path in files:
        written = 0
        with open(path, "wb") as fh:
            while written < per_file:
                ranks = (rng.random(1 << 21) * span + 1.0) ** (1.0 / one_s)
                idx = np.minimum(ranks.astype(np.int64) - 1, len(lex) - 1)
                lens = tlen[idx] + 1  # the word and a separator
                ends = np.cumsum(lens)
                src = np.repeat(toff[idx] - (ends - lens), lens) + np.arange(int(ends[-1]), dtype=np.int64)
                np.minimum(src, blob.size - 1, out=src)
                buf = blob[src]
                buf[ends - 1] = np.where(rng.random(idx.size) < 1 / 18, 10, 32).astype(np.uint8)  # ~18 words a line
                data = buf.tobytes()
                if written + len(data) > per_file:
                    cut = data.rfind(b"\n", 0, per_file - written)
                    data = data[: cut + 1] if cut >= 0 else data[: per_file - written]
                if not data:
                    break
                fh.write(data)
                written += len(data)
    marker.write_text(json.dumps(spec))
    print(f"generated {total_bytes / 1e9:.2f} GB in {n_files} files in {time.perf_counter() - t0:.0f} s", flush=True)
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
import json, sys, time
sys.path.insert(0, {code!r})
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-gb", type=float, default=1.0)
    ap.add_argument("--hosts", type=int, default=16, help="map processes (simulated instances)")
    ap.add_argument("--vocab-size", type=int, default=32000)
    ap.add_argument("--files", type=int, default=32, help="objects in the corpus")
    ap.add_argument("--workdir", default=str(Path(tempfile.gettempdir()) / "bench_tokenizer"))
    args = ap.parse_args()
    work = Path(args.workdir)
    cores = os.cpu_count() or 1
    files = generate_corpus(work / "corpus", int(args.size_gb * 1e9), n_files=args.files)
    corpus_bytes = sum(f.stat().st_size for f in files)
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "true", "RUNPROC_SKIP_PIP": "1"}
    env.pop("SAGEMAKER_BASE_DIR", None)
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)

    # 1. baseline: tokenizers' single-node trainer on the whole corpus, all cores
    print(f"baseline: tokenizers single-node training on {corpus_bytes / 1e9:.2f} GB, {cores} cores ...", flush=True)
    ref_path = str(work / "reference-tokenizer.json")
    script = _BASELINE.format(code=str(CODE), vocab=args.vocab_size, specials=SPECIALS,
                              files=[str(f) for f in files], out=ref_path)
    base = run_measured([sys.executable, "-c", script], env, logs / "baseline.log")
    base["train"] = json.loads(Path(ref_path + ".time").read_text())["train_seconds"]
    print(f"  {base['train']:.1f} s training ({base['wall']:.1f} s process, {base['cpu']:.0f} CPU s)", flush=True)

    # 2. map: one process per simulated instance, files dealt out round robin (ShardedByS3Key-like)
    counts_dir = work / "counts"
    shutil.rmtree(counts_dir, ignore_errors=True)
    hosts = [f"algo-{i + 1}" for i in range(args.hosts)]
    shards = [files[i :: args.hosts] for i in range(args.hosts)]
    maps = []
    for i, host in enumerate(hosts):
        host_base = work / "hosts" / host
        shutil.rmtree(host_base, ignore_errors=True)
        (host_base / "config").mkdir(parents=True)
        (host_base / "config" / "resourceconfig.json").write_text(json.dumps({"current_host": host, "hosts": hosts}))
        data = host_base / "processing" / "input" / "data"
        data.mkdir(parents=True)
        for f in shards[i]:
            (data / f.name).symlink_to(f)
        m = run_measured(
            [sys.executable, str(CODE / "tokenizer_map.py"), "--tokenizer-type", "bpe", "--text-field", "text",
             "--output-dir", str(counts_dir)],
            {**env, "SAGEMAKER_BASE_DIR": str(host_base)}, logs / f"map-{host}.log",
        )
        m["bytes"] = sum(f.stat().st_size for f in shards[i])
        maps.append(m)
        print(f"  map {host}: {m['bytes'] / 1e6:.0f} MB in {m['wall']:.1f} s ({m['cpu']:.0f} CPU s, "
              f"{m['rss'] / 1e6:.0f} MB peak)", flush=True)
    # the fixed cost of a map process (imports, set-up, writing): a host with an empty shard
    empty_base = work / "hosts" / "empty"
    shutil.rmtree(empty_base, ignore_errors=True)
    (empty_base / "processing" / "input" / "data").mkdir(parents=True)
    startup = run_measured([sys.executable, str(CODE / "tokenizer_map.py"), "--output-dir", str(work / "empty-counts")],
                           {**env, "SAGEMAKER_BASE_DIR": str(empty_base)}, logs / "map-empty.log")["wall"]

    # 3. reduce over the counts of all hosts
    print(f"reduce: {args.hosts} counts files ...", flush=True)
    out_dir = work / "tokenizer"
    shutil.rmtree(out_dir, ignore_errors=True)
    red = run_measured(
        [sys.executable, str(CODE / "tokenizer_reduce.py"), "--tokenizer-type", "bpe", "--text-field", "text",
         "--vocab-size", str(args.vocab_size), "--special-tokens", json.dumps(SPECIALS),
         "--input-dir", str(counts_dir), "--output-dir", str(out_dir)],
        env, logs / "reduce.log",
    )
    stats = json.loads((out_dir / "tokenizer_stats.json").read_text())

    # 4. exactness
    ref = json.loads(Path(ref_path).read_text())["model"]
    got = json.loads((out_dir / "tokenizer.json").read_text())["model"]
    exact = ref["vocab"] == got["vocab"] and ref["merges"] == got["merges"]

    # 5. figures
    map_bytes = sum(m["bytes"] for m in maps)
    map_wall = sum(m["wall"] for m in maps)
    map_cpu = sum(m["cpu"] for m in maps)
    tp_process = map_bytes / map_wall  # one map process (it uses all cores of its instance)
    tp_map_core = tp_process / cores
    tp_map_cpu = map_bytes / map_cpu
    tp_base_core = corpus_bytes / base["train"] / cores
    tp_base_cpu = corpus_bytes / base["cpu"]
    reduce_s = red["wall"]

    def modeled(n: int, key: str = "wall") -> float:
        """Wall time with n instances: the busiest instance's maps, then the reduce. key "cpu": from CPU
        seconds instead (map CPU spread over the cores, reduce CPU), i.e. as on an unshared machine."""
        per = [0.0] * n
        for i, m in enumerate(maps):
            per[i % n] += (m["wall"] - startup) if key == "wall" else m["cpu"] / cores
        if key == "wall":
            return max(per) + startup + reduce_s
        return max(per) + red["cpu"]

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
                   f"{stats['seconds_learn']:.1f} s learning), {red['cpu']:.0f} CPU s, {red['rss'] / mb:.0f} MB peak"),
    ]
    base_cpu_wall = base["cpu"] / cores
    for n in (1, 4, 16):
        t = modeled(n)
        tc = modeled(n, "cpu")
        rows.append((f"modeled wall, {n} instance(s)",
                     f"{t:.1f} s = {base['train'] / t:.2f}x faster than single node (from CPU s: {tc:.1f} s vs "
                     f"{base_cpu_wall:.1f} s = {base_cpu_wall / tc:.2f}x)"))
    r_reduce = reduce_s / base["train"]
    # contention-free estimate: the baseline's CPU seconds spread over all cores vs the reduce's CPU seconds
    r_reduce_cpu = red["cpu"] / (base["cpu"] / cores)
    r_map_core = tp_map_core / tp_base_core
    r_map_cpu = tp_map_cpu / tp_base_cpu
    r_map_process = tp_process / tp_base_core
    rows += [
        ("target: reduce <= 0.5x single node",
         f"{r_reduce:.3f}x by wall, {r_reduce_cpu:.3f}x by CPU (reduce CPU s / (baseline CPU s / cores))  "
         f"{'MET' if max(r_reduce, r_reduce_cpu) <= 0.5 else 'NOT MET'}"),
        ("target: map >= 0.5x trainer per core",
         f"per process {r_map_process:.2f}x, per core {r_map_core:.2f}x, per CPU s {r_map_cpu:.2f}x  "
         f"{'MET' if min(r_map_core, r_map_cpu) >= 0.5 else 'NOT MET'}"),
    ]
    width = max(len(k) for k, _ in rows)
    print()
    print("| " + "figure".ljust(width) + " | value |")
    print("|" + "-" * (width + 2) + "|-------|")
    for k, v in rows:
        print(f"| {k.ljust(width)} | {v} |")
    print("\nmodel: instances of this machine's size; map wall = the busiest instance's share of the measured map "
          "times (plus one fixed cost), then the reduce as measured with all hosts' counts; container start-up "
          "and S3 transfers are not included.")
    raw = {"baseline": base, "maps": maps, "map_startup": startup, "reduce": red, "stats": stats, "cores": cores}
    (work / "results.json").write_text(json.dumps({"rows": rows, "exact": exact, "raw": raw}, indent=2,
                                                  ensure_ascii=False, default=str))
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
