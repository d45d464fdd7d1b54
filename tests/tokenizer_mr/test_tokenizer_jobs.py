"""The processing-job contract: map and reduce started through runproc.sh from their container paths
(/opt/ml/processing/..., host from /opt/ml/config/resourceconfig.json) under a relocated base dir; the
tokenizer files load with AutoTokenizer; bad settings and missing text fail early with a one-line reason."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from testkit.tokenizer import corpus_lines, reference

import tokenizer_map
import tokenizer_reduce
from tokenizer_mr.settings import TokenizerSettings

HOSTS = ("algo-1", "algo-2", "algo-3")


def _runproc(base: Path, env: dict, *args: str) -> subprocess.CompletedProcess:
    env = {**env, "SAGEMAKER_BASE_DIR": str(base)}
    script = base / "processing" / "input" / "code" / "runproc.sh"
    return subprocess.run(["/bin/bash", str(script), *args], env=env, capture_output=True, text=True, timeout=300)


def _write_data(base: Path, files: dict[str, str]) -> None:
    data = base / "processing" / "input" / "data"
    data.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (data / name).write_text(text, encoding="utf-8")


def _gather_counts(hosts: list[Path], reduce_base: Path) -> None:
    """What S3 does: every host uploads its counts to one prefix, the reduce downloads that prefix."""
    target = reduce_base / "processing" / "input" / "counts"
    target.mkdir(parents=True, exist_ok=True)
    for base in hosts:
        for f in (base / "processing" / "output" / "counts").glob("*"):
            shutil.copy(f, target / f.name)


def test_bpe_processing_jobs_through_runproc(processing_host, runproc_env, tmp_path):
    lines = corpus_lines("unicode") + corpus_lines("zipf")
    bases = [processing_host(h, HOSTS) for h in HOSTS]
    _write_data(bases[0], {"a.txt": "".join(lines[0::3]), "b.txt": "".join(lines[1::3])})
    # algo-2 got no object at all (more hosts than objects); algo-3 one object
    _write_data(bases[2], {"c.txt": "".join(lines[2::3])})
    common = ["--tokenizer-type", "bpe", "--text-field", "text", "--lowercase", "false"]
    for base in bases:
        proc = _runproc(base, runproc_env, "tokenizer_map.py", *common)
        assert proc.returncode == 0, proc.stdout + proc.stderr
        host = json.loads((base / "config" / "resourceconfig.json").read_text())["current_host"]
        assert (base / "processing" / "output" / "counts" / f"counts-{host}.part00000.parquet").exists()
        assert "tokenizer-map: done" in proc.stdout and "runproc: " in proc.stdout
        assert (base / "processing" / "input" / "code" / "tokenizer_mr" / "bpe.py").exists()  # unpacked there
    reduce_base = processing_host("algo-1", ("algo-1",), name="reduce")
    _gather_counts(bases, reduce_base)
    specials = ["<s>", "<pad>", "</s>", "<unk>", "<mask>"]
    proc = _runproc(reduce_base, runproc_env, "tokenizer_reduce.py", *common, "--vocab-size", "600",
                    "--min-frequency", "2", "--special-tokens", json.dumps(specials), "--model-max-length", "128")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = reduce_base / "processing" / "output" / "tokenizer"
    assert {"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"} <= {p.name for p in out.iterdir()}
    assert "3 host(s)" in (reduce_base / "output" / "message").read_text()

    # identical to the single-node trainer on the whole corpus
    corpus = tmp_path / "whole.txt"
    corpus.write_text("".join(lines[0::3]) + "".join(lines[1::3]) + "".join(lines[2::3]), encoding="utf-8")
    ref_vocab, ref_merges = reference(
        TokenizerSettings(tokenizer_type="bpe", vocab_size=600, min_frequency=2, special_tokens=tuple(specials)), [corpus]
    )
    model = json.loads((out / "tokenizer.json").read_text())["model"]
    assert model["vocab"] == ref_vocab and [tuple(m) for m in model["merges"]] == ref_merges

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(out)
    assert tok.model_max_length == 128
    assert (tok.bos_token, tok.eos_token, tok.pad_token, tok.mask_token) == ("<s>", "</s>", "<pad>", "<mask>")
    enc = tok("naïve café", "Привет мир")
    toks = tok.convert_ids_to_tokens(enc["input_ids"])
    assert toks[0] == "<s>" and toks[-1] == "</s>" and toks.count("</s>") == 3  # <s> A </s></s> B </s>
    assert tok.decode(enc["input_ids"], skip_special_tokens=True) == "naïve caféПривет мир"
    masked = tok.convert_ids_to_tokens(tok("mir <mask>")["input_ids"])
    assert masked[-2] == "<mask>" and masked[-3] != "Ġ"  # <mask> takes the space before it, as in RoBERTa


def test_wordpiece_reduce_in_process_writes_a_bert_tokenizer(tmp_path, monkeypatch, capsys):
    base = tmp_path / "opt-ml"
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(base))
    (base / "config").mkdir(parents=True)
    (base / "config" / "resourceconfig.json").write_text(json.dumps({"current_host": "algo-1", "hosts": ["algo-1"]}))
    _write_data(base, {"x.jsonl": "".join(json.dumps({"body": ln}) + "\n" for ln in corpus_lines("unicode"))})
    args = ["--tokenizer-type", "wordpiece", "--text-field", "body", "--lowercase", "true"]
    assert tokenizer_map.main(args) == 0
    shutil.copytree(base / "processing" / "output" / "counts", base / "processing" / "input" / "counts")
    assert tokenizer_reduce.main([*args, "--vocab-size", "300", "--model-max-length", "64"]) == 0
    assert "tokenizer-reduce: done" in capsys.readouterr().out

    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base / "processing" / "output" / "tokenizer")
    enc = tok("Naïve café", "straße")
    toks = tok.convert_ids_to_tokens(enc["input_ids"])
    assert toks[0] == "[CLS]" and toks.count("[SEP]") == 2 and toks[-1] == "[SEP]"
    first_sep = toks.index("[SEP]")
    assert enc["token_type_ids"] == [0] * (first_sep + 1) + [1] * (len(toks) - first_sep - 1)
    assert all(t == t.lower() for t in toks if not t.startswith("["))
    assert tok.model_max_length == 64 and tok.unk_token == "[UNK]" and tok.mask_token == "[MASK]"
    assert (base / "processing" / "output" / "tokenizer" / "vocab.txt").exists()


def test_gpt2_style_adds_no_special_tokens(tmp_path, capsys):
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.txt").write_text("".join(corpus_lines("zipf")))
    args = ["--tokenizer-type", "bpe", "--special-tokens", '["<|endoftext|>"]']
    assert tokenizer_map.main([*args, "--input-dir", str(data), "--output-dir", str(tmp_path / "c")]) == 0
    assert tokenizer_reduce.main([*args, "--vocab-size", "400", "--input-dir", str(tmp_path / "c"),
                                  "--output-dir", str(tmp_path / "t")]) == 0
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tmp_path / "t")
    assert tok("kato", "rimu")["input_ids"] == tok("kato")["input_ids"] + tok("rimu")["input_ids"]
    assert tok.eos_token == tok.bos_token == "<|endoftext|>"


# ---- errors: one line, non-zero, before any work ------------------------------------------------------------
def _error_line(capsys) -> str:
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("ERROR: ")]
    assert len(err) == 1
    return err[0]


@pytest.mark.parametrize("script", [tokenizer_map, tokenizer_reduce])
def test_vocab_smaller_than_alphabet_fails_before_reading(script, tmp_path, capsys):
    data = tmp_path / "in"
    data.mkdir()
    (data / "poison.bin").write_text("an unknown format: reading it would fail with another message")
    rc = script.main(["--tokenizer-type", "bpe", "--vocab-size", "200", "--input-dir", str(data),
                      "--output-dir", str(tmp_path / "out")])
    assert rc == 2
    assert "--vocab-size 200 is smaller than the 256-symbol byte-level alphabet plus 5 special tokens (261)" in _error_line(capsys)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--tokenizer-type", "bpe", "--style", "roberta", "--special-tokens", '["<s>"]'], "lacks </s>, which the roberta style needs"),
        (["--tokenizer-type", "wordpiece", "--special-tokens", '["[CLS]", "[SEP]"]'], "lacks [UNK]"),
        (["--tokenizer-type", "bpe", "--limit-alphabet", "100"], "would drop bytes"),
        (["--tokenizer-type", "wordpiece", "--min-frequency", "-1"], "--min-frequency must be >= 0"),
        (["--tokenizer-type", "wordpiece", "--style", "roberta"], "needs --tokenizer-type bpe"),
    ],
)
def test_bad_settings(args, message, tmp_path, capsys):
    assert tokenizer_reduce.main([*args, "--vocab-size", "1000", "--input-dir", str(tmp_path)]) == 2
    assert message in _error_line(capsys)


def test_unparseable_arguments_exit_2(capsys):
    with pytest.raises(SystemExit) as exc:
        tokenizer_reduce.main(["--vocab-size", "10", "--special-tokens", "[<s>]"])
    assert exc.value.code == 2
    assert "not JSON" in capsys.readouterr().err


def test_no_text_at_all(tmp_path, capsys):
    for host in ("algo-1", "algo-2"):  # two hosts, both with empty shards
        empty = tmp_path / host
        (empty / "e.txt").parent.mkdir(parents=True)
        (empty / "e.txt").write_text("")
        from tokenizer_mr.container import HostInfo
        from tokenizer_mr.jobs import run_map

        run_map(TokenizerSettings(), empty, tmp_path / "counts", host=HostInfo(host, ("algo-1", "algo-2")))
    rc = tokenizer_reduce.main(["--vocab-size", "1000", "--input-dir", str(tmp_path / "counts"),
                                "--output-dir", str(tmp_path / "tok")])
    assert rc == 2
    line = _error_line(capsys)
    assert "no text at all: 2 counts file(s) from 2 host(s) hold no words" in line


def test_no_counts_files(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    assert tokenizer_reduce.main(["--vocab-size", "1000"]) == 2
    assert f"no counts files (counts-*.parquet) under {tmp_path}/processing/input/counts" in _error_line(capsys)
    assert "no counts files" in (tmp_path / "output" / "message").read_text()


def test_wordpiece_vocab_below_initial_alphabet(tmp_path, capsys):
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.txt").write_text("".join(corpus_lines("unicode")))
    args = ["--tokenizer-type", "wordpiece"]
    assert tokenizer_map.main([*args, "--input-dir", str(data), "--output-dir", str(tmp_path / "c")]) == 0
    rc = tokenizer_reduce.main([*args, "--vocab-size", "50", "--input-dir", str(tmp_path / "c"),
                                "--output-dir", str(tmp_path / "t")])
    assert rc == 2
    assert "--vocab-size 50 is smaller than the" in _error_line(capsys)


def test_map_reports_a_missing_text_field(tmp_path, capsys):
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.jsonl").write_text('{"content": "x"}\n')
    rc = tokenizer_map.main(["--text-field", "text", "--input-dir", str(data), "--output-dir", str(tmp_path / "o")])
    assert rc == 2
    assert "a.jsonl line 1 has no field 'text' (set --text-field)" in _error_line(capsys)


# ---- runproc.sh -----------------------------------------------------------------------------------------------
def test_runproc_installs_requirements_then_execs(processing_host, runproc_env, tmp_path):
    base = processing_host()
    calls = tmp_path / "calls.txt"
    fake = tmp_path / "fakepython"
    fake.write_text(f'#!/bin/bash\necho "$PWD|$*" >> {calls}\n')
    fake.chmod(0o755)
    env = {**runproc_env, "RUNPROC_PYTHON": str(fake)}
    env.pop("RUNPROC_SKIP_PIP")
    proc = _runproc(base, env, "tokenizer_map.py", "--text-field", "body")
    assert proc.returncode == 0, proc.stderr
    code = base / "processing" / "input" / "code"
    assert calls.read_text().splitlines() == [
        f"{code}|-m pip install --disable-pip-version-check --no-input --no-index --no-deps --find-links wheels "
        "-r requirements-processing.txt",
        f"{code}|tokenizer_map.py --text-field body",
    ]
    assert (code / "requirements-processing.txt").exists()


def test_runproc_code_dir_override_and_missing_script(tmp_path, runproc_env):
    code = tmp_path / "elsewhere"
    code.mkdir()
    (code / "hello.py").write_text("import os; print('hello from', os.getcwd())")
    script = Path(__file__).resolve().parents[2] / "training_code" / "runproc.sh"
    env = {**runproc_env, "RUNPROC_CODE_DIR": str(code)}
    proc = subprocess.run(["/bin/bash", str(script), "hello.py"], env=env, capture_output=True, text=True)
    assert proc.returncode == 0 and f"hello from {code}" in proc.stdout
    proc = subprocess.run(["/bin/bash", str(script)], env=env, capture_output=True, text=True)
    assert proc.returncode == 2 and "no script given" in proc.stderr


def _two_hosts_of_counts(tmp_path: Path) -> tuple[Path, list[dict]]:
    from tokenizer_mr.container import HostInfo
    from tokenizer_mr.counts import find_counts_files, read_header
    from tokenizer_mr.jobs import run_map

    lines = corpus_lines("zipf") + corpus_lines("unicode")
    for i, host in enumerate(HOSTS[:2]):
        data = tmp_path / host
        data.mkdir()
        (data / "a.txt").write_text("".join(lines[i::2]), encoding="utf-8")
        run_map(TokenizerSettings(), data, tmp_path / "counts", host=HostInfo(host, HOSTS[:2]))
    return tmp_path / "counts", [read_header(f) for f in find_counts_files(tmp_path / "counts")]


def test_reduce_refuses_from_the_counts_headers_before_merging(tmp_path, capsys, monkeypatch):
    """One host's counts already need more memory than there is: refused before any counts file is read."""
    from tokenizer_mr import jobs
    from tokenizer_mr.bpe import memory_estimate

    counts, headers = _two_hosts_of_counts(tmp_path)
    largest = max(headers, key=lambda h: h["unique_words"])
    monkeypatch.setattr(jobs, "available_memory_bytes",
                        lambda: memory_estimate(largest["unique_words"], largest["characters"]) - 1)
    rc = tokenizer_reduce.main(["--vocab-size", "1000", "--input-dir", str(counts), "--output-dir", str(tmp_path / "t")])
    assert rc == 2
    captured = capsys.readouterr()
    line = next(ln for ln in captured.err.splitlines() if ln.startswith("ERROR: "))
    assert f"counts file counts-{largest['host']}.part00000.parquet already hold(s) {largest['unique_words']} unique " \
           f"words ({largest['characters']} characters)" in line
    assert "use a reduce instance type with more memory (run spec: tokenizer.instance_type" in line
    assert "read counts-" not in captured.out + captured.err  # no counts file was loaded
    assert not (tmp_path / "t").exists()


def test_reduce_refuses_after_merging_before_learning(tmp_path, capsys, monkeypatch):
    """Each host's counts fit, all of them merged do not: refused before the learning allocates anything."""
    from tokenizer_mr import jobs
    from tokenizer_mr.bpe import memory_estimate

    counts, headers = _two_hosts_of_counts(tmp_path)
    largest = max(headers, key=lambda h: h["unique_words"])
    monkeypatch.setattr(jobs, "available_memory_bytes",
                        lambda: memory_estimate(largest["unique_words"], largest["characters"]))
    monkeypatch.setattr(jobs, "learn_bpe", lambda *a, **k: pytest.fail("learning started"))
    rc = tokenizer_reduce.main(["--vocab-size", "1000", "--input-dir", str(counts), "--output-dir", str(tmp_path / "t")])
    assert rc == 2
    line = _error_line(capsys)
    assert "unique words" in line and "already hold" not in line and "need about" in line
    merged = int(line.split("ERROR: ")[1].split(" unique words")[0].split()[-1])
    assert merged > largest["unique_words"]


def test_merge_counts_shows_growing_lower_bounds_before_spending_memory(tmp_path):
    from tokenizer_mr.counts import find_counts_files, merge_counts

    counts, headers = _two_hosts_of_counts(tmp_path)
    seen = []
    merged = merge_counts(find_counts_files(counts), TokenizerSettings(), row_budget=1,
                          check=lambda n, c, what: seen.append((n, c, what)))
    largest = max(headers, key=lambda h: h["unique_words"])
    first = min(headers, key=lambda h: h["host"])
    assert seen == [(largest["unique_words"], largest["characters"], f"counts file counts-{largest['host']}.part00000.parquet"),
                    (first["unique_words"], first["characters"], "the first 1 files")]
    assert len(merged.words) > largest["unique_words"] and merged.characters > largest["characters"]
