"""Training throughput of training_code/ against a baseline configured like the Hugging Face example scripts.

Both runs use the same model, data (question answering with a SQuAD-like context-length distribution),
batch size, optimizer, seed and number of examples (one epoch), through the same entry point
(hftrain.runner.main); only the efficiency settings differ:

* baseline (like run_qa.py's defaults): pad every feature to max_seq_length, fp32, random batches;
* ours (the defaults of this code): dynamic padding per batch, length-grouped batches, and on a GPU bf16
  (fp16 where bf16 is missing); fused AdamW and SDPA attention are on in both.

Printed: samples/s, useful tokens/s (non-padding), share of padded tokens, eval loss and F1/EM (the same
examples and steps: the metric should be equal within noise), and the ratios ours/baseline from this one
run. With the CPU defaults (a 0.1M-parameter model, 150 steps) the QA metric has not taken off yet; eval
loss is the comparable figure there, F1 on the GPU run. `--device cuda` runs a BERT-large-sized model in bf16 and reports MFU
(model FLOPs utilization: 6 x parameters x processed tokens per second / peak bf16 FLOP/s).

    python benchmarks/bench_training.py                 # CPU, a few minutes on 2 cores
    python benchmarks/bench_training.py --device cuda   # GPU: BERT-large config, bf16, MFU
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "training_code"))
sys.path.insert(0, str(REPO / "tests" / "training"))
for var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from local_mode import synthetic as synth  # noqa: E402  (generated data, tiny models from configs)

PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "A10G": 125.0, "L40S": 362.0, "L4": 121.0,
                    "V100": 125.0, "T4": 65.0}


def real_tokens(model_dir: Path, data_dir: Path, max_seq_length: int, doc_stride: int) -> tuple[int, int]:
    """(features, non-padding tokens) of the training set, tokenized as the training code does."""
    from hftrain.args import DataArguments
    from hftrain.data import load_local
    from hftrain.tasks import get_task
    from transformers import AutoConfig, AutoTokenizer

    task = get_task("question-answering", DataArguments(task="question-answering", max_seq_length=max_seq_length,
                                                        doc_stride=doc_stride))
    dataset = load_local(str(data_dir), cache_dir=str(data_dir.parent / "bench-cache"))
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    features = task.tokenize_train(dataset, tokenizer, AutoConfig.from_pretrained(model_dir), {})
    return len(features), sum(len(ids) for ids in features["input_ids"])


def run_config(name: str, base: Path, model_dir: Path, hps: dict) -> dict:
    from hftrain import runner

    os.environ["SAGEMAKER_BASE_DIR"] = str(base)
    os.environ["HF_DATASETS_CACHE"] = str(base / "hf-cache")
    argv = []
    for key, value in {"model_name_or_path": model_dir, **hps}.items():
        argv += [f"--{key}", str(value)]
    buffer = io.StringIO()
    started = time.time()
    with contextlib.redirect_stdout(buffer):
        code = runner.main(argv)
    if code != 0:
        raise SystemExit(f"{name} run failed with exit code {code}")
    metrics = json.loads((base / "output" / "data" / "metrics.json").read_text())
    processed = None
    for line in buffer.getvalue().splitlines():
        if line.startswith("METRIC num_input_tokens_seen="):
            processed = float(line.split("=", 1)[1])
    metrics["processed_tokens"] = processed
    metrics["wall_seconds"] = time.time() - started
    return metrics


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    parser.add_argument("--examples", type=int, default=None, help="training examples (default: cpu 480, cuda 4096)")
    parser.add_argument("--batch-size", type=int, default=None, help="per-device batch size (cpu 16, cuda 32)")
    parser.add_argument("--epochs", type=float, default=None, help="training epochs (default: cpu 3, cuda 1)")
    parser.add_argument("--learning-rate", type=float, default=None, help="default: cpu 3e-3, cuda 1e-4")
    parser.add_argument("--model-size", choices=["tiny", "small", "large"], default=None,
                        help="BERT-like config: tiny (64 wide), small (128), large (BERT-large); cpu tiny, cuda large")
    parser.add_argument("--max-seq-length", type=int, default=384)
    parser.add_argument("--doc-stride", type=int, default=128)
    parser.add_argument("--peak-tflops", type=float, default=None, help="peak bf16 TFLOP/s of the GPU (MFU)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures to this file")
    args = parser.parse_args(argv)

    import torch

    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device here")
    examples = args.examples or (4096 if cuda else 800)
    batch = args.batch_size or (32 if cuda else 16)
    size = args.model_size or ("large" if cuda else "tiny")
    epochs = args.epochs or (1 if cuda else 3)
    learning_rate = args.learning_rate or (1e-4 if cuda else 3e-3)
    work = Path(tempfile.mkdtemp(prefix="bench-training-"))
    model_dir = synth.build_model_dir("bert", work / f"bert-{size}", size=size)
    data = work / "data"
    synth.write_jsonl(data / "train" / "train.jsonl", synth.qa_examples(examples, 1, squad_lengths=True))
    synth.write_jsonl(data / "validation" / "validation.jsonl",
                      synth.qa_examples(max(64, examples // 8), 2, squad_lengths=True))
    features, useful = real_tokens(model_dir, data / "train", args.max_seq_length, args.doc_stride)

    common = {
        "task": "question-answering", "train_path": data / "train", "validation_path": data / "validation",
        "max_seq_length": args.max_seq_length, "doc_stride": args.doc_stride, "num_train_epochs": epochs,
        "per_device_train_batch_size": batch, "per_device_eval_batch_size": 64, "learning_rate": learning_rate,
        "warmup_steps": 0.1, "weight_decay": 0.01, "save_steps": 100000, "logging_steps": 100000, "seed": 7,
        "include_num_input_tokens_seen": True, "dataloader_num_workers": 2 if cuda else 0,
    }
    baseline = {**common, "pad_to_max_length": True, "precision": "fp32", "train_sampling_strategy": "random"}
    ours = {**common, "train_sampling_strategy": "group_by_length"}  # precision auto, dynamic padding
    results = {}
    for name, hps in (("baseline", baseline), ("ours", ours)):
        results[name] = run_config(name, work / name, model_dir, hps)

    params = sum(p.numel() for p in __import__("transformers").AutoModel.from_pretrained(model_dir).parameters())
    rows = {}
    for name, m in results.items():
        runtime = m["train_runtime"]
        processed = m["processed_tokens"] or float("nan")
        row = {
            "train_runtime_s": runtime,
            "samples_per_s": features * epochs / runtime,
            "useful_tokens_per_s": useful * epochs / runtime,
            "processed_tokens_per_s": processed / runtime,
            "padded_share": 1.0 - useful * epochs / processed,
            "eval_loss": m.get("eval_loss"),
            "eval_f1": m.get("eval_f1"),
            "eval_exact_match": m.get("eval_exact_match"),
        }
        if cuda:
            peak = args.peak_tflops
            if peak is None:
                device_name = torch.cuda.get_device_name()
                peak = next((v for k, v in PEAK_BF16_TFLOPS.items() if k in device_name), None)
            if peak:
                row["mfu"] = 6 * params * processed / runtime / (peak * 1e12)
                row["useful_mfu"] = 6 * params * useful * epochs / runtime / (peak * 1e12)
        rows[name] = row

    device = torch.cuda.get_device_name() if cuda else f"CPU ({os.cpu_count()} cores, torch {torch.__version__})"
    print(f"bench_training: question answering, SQuAD-like lengths, {examples} examples -> {features} features "
          f"(max_seq_length {args.max_seq_length}), BERT-{size} config ({params / 1e6:.1f}M parameters), "
          f"batch {batch}, {epochs:g} epoch(s), {device}")
    header = (f"{'':10}{'runtime s':>11}{'samples/s':>11}{'tokens/s':>11}{'padded':>8}{'eval loss':>10}{'F1':>8}"
              f"{'EM':>8}")
    if cuda:
        header += f"{'MFU':>8}"
    print(header)
    for name, row in rows.items():
        line = (f"{name:10}{row['train_runtime_s']:>11.1f}{row['samples_per_s']:>11.2f}"
                f"{row['useful_tokens_per_s']:>11.0f}{row['padded_share']:>8.1%}{row['eval_loss']:>10.3f}{row['eval_f1']:>8.1f}"
                f"{row['eval_exact_match']:>8.1f}")
        if cuda and "mfu" in row:
            line += f"{row['mfu']:>8.1%}"
        print(line)
    ratio = rows["ours"]["samples_per_s"] / rows["baseline"]["samples_per_s"]
    token_ratio = rows["ours"]["useful_tokens_per_s"] / rows["baseline"]["useful_tokens_per_s"]
    print(f"ratio ours/baseline: samples/s x{ratio:.2f}, useful tokens/s x{token_ratio:.2f}, "
          f"padded share {rows['ours']['padded_share']:.1%} vs {rows['baseline']['padded_share']:.1%}, "
          f"eval loss {rows['ours']['eval_loss']:.3f} vs {rows['baseline']['eval_loss']:.3f}, "
          f"F1 {rows['ours']['eval_f1']:.1f} vs {rows['baseline']['eval_f1']:.1f}")
    if args.json:
        args.json.write_text(json.dumps({"rows": rows, "ratio_samples_per_s": ratio, "device": device}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
