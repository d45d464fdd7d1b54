"""Training throughput on one CUDA device: this code at its defaults against the examples at their best flags.

    python benchmarks/bench_gpu.py                       # needs a CUDA GPU; < 8 min on an H200 with --compile
    python benchmarks/bench_gpu.py --compile             # adds ours + torch.compile
    python benchmarks/bench_gpu.py --smoke --out DIR     # CPU, tiny configs, a few steps (the test suite runs it)

Models are built from configs with random weights (no downloads): a BERT-large-sized extractive QA model
(24 layers, 1024 wide, 16 heads, FFN 4096, vocabulary 30522, 335M parameters) on SQuAD-like data
(max_seq_length 384, doc_stride 128), and a BART-large-sized summarization model (12 + 12 layers, 1024 wide,
16 heads, FFN 4096, vocabulary 50265, 406M parameters) on news-like documents (max_source_length 1024).

Arms, same model, data, batch, learning rate, steps and seed:
* hf-best: the example script (run_qa.py / run_summarization.py, rebuilt from library pieces in hf_baselines.py)
  at its best flags: dynamic padding, `train_sampling_strategy group_by_length`, bf16; SDPA attention and fused
  AdamW are the transformers 5 defaults; the data loader as the example leaves it (no worker processes);
* hf-best+workers (with --hf-best-workers N): hf-best with `--dataloader_num_workers N` and pinned memory, the
  loader set-up ours has by default, so that the ratio is not the loader's alone;
* ours: training_code's entry point at its defaults (bf16, SDPA, fused AdamW, length-grouped batches,
  padding-free rows with variable-length attention for QA, dataloader workers);
* ours-padded: ours with `padding_free false` (dynamic padding): what padding-free adds;
* ours+compile (with --compile): ours with `torch_compile true`.

Timing: `--warmup` optimizer steps are run first and not counted (CUDA context, kernels, compilation); the clock
runs over the next `--steps` steps, between two torch.cuda.synchronize() calls at the end of the warm-up's last
step and of the last measured step (before that step's logging and saving: ours writes a final checkpoint after
it, the examples do not). Reported per arm: samples/s, real tokens/s (padding excluded), padded share, MFU, peak
memory (torch.cuda.max_memory_allocated), the median time between step ends, eval loss on the same validation
rows, and the ratio of samples/s to hf-best. Eval loss is the stock heads' loss on padded batches, whose softmax
also covers padding positions: a model trained padding-free never learns to score padding low, so its eval loss
is not comparable with the padded arms' (the task metric is; see hftrain/data/packing.py).

MFU (model FLOPs utilization) = model FLOPs per second / peak dense bf16 FLOP/s of the device, where model FLOPs
count only real tokens (padding is not useful work):
    encoder-only (QA):  6 * N * T  +  12 * n_layers * d_model * sum_i(L_i^2)
    encoder-decoder:    6 * (N_enc * T_src + (N_dec + V * d_model) * T_tgt)
                        + 12 * d_model * (n_enc * sum_i(S_i^2) + n_dec * (sum_i(D_i^2) + sum_i(S_i * D_i)))
with N the parameters of the transformer layers (no embedding lookups), T the real tokens of the measured steps,
L_i / S_i / D_i the length of example i (encoder / source / target), V * d_model the LM-head matmul; 6 = 2 FLOPs
per multiply-add x (forward + 2 x backward); the attention term is QK^T and AV (2 matmuls of 2 * L^2 * d each,
forward, x3 with the backward). Peak: --peak-tflops or the table below (NVIDIA datasheets, dense BF16 tensor).

Results: a table on stdout, JSON and markdown in --out (default $OUT when set, else benchmarks/results/).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import tempfile
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

from benchmarks import benchlib, hf_baselines, workloads
from local_mode import synthetic as synth

PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L40S": 362.0, "L4": 121.0}


@dataclass(frozen=True)
class GpuWorkload:
    task: str
    kind: str
    max_seq_length: int
    batch_size: int
    learning_rate: float
    train_examples: int
    eval_examples: int
    config: dict = field(default_factory=dict)
    extra: dict = field(default_factory=dict)


GPU_WORKLOADS = {
    "question-answering": GpuWorkload(
        "question-answering", "bert", 384, 32, 5e-5, 4096, 256, extra={"doc_stride": 128},
        config=dict(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16, intermediate_size=4096,
                    vocab_size=30522, max_position_embeddings=512, hidden_dropout_prob=0.1,
                    attention_probs_dropout_prob=0.0)),
    "summarization": GpuWorkload(
        "summarization", "bart", 1024, 16, 5e-5, 2048, 64, extra={"max_target_length": 64},
        config=dict(d_model=1024, encoder_layers=12, decoder_layers=12, encoder_attention_heads=16,
                    decoder_attention_heads=16, encoder_ffn_dim=4096, decoder_ffn_dim=4096, vocab_size=50265,
                    max_position_embeddings=1024, dropout=0.1, attention_dropout=0.0)),
}
SMOKE_CONFIG = {
    "question-answering": dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
                               vocab_size=512, max_position_embeddings=512),
    "summarization": dict(d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
                          decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, vocab_size=512,
                          max_position_embeddings=1024),
}


def build_model(w: GpuWorkload, directory: Path) -> Path:
    """A pretrained-style directory: the synthetic tokenizer and a model of `w.config`'s size, random weights."""
    import torch
    from transformers import AutoModel, GenerationConfig

    if (directory / "config.json").exists():
        return directory
    tokenizer = synth.build_tokenizer(w.kind)
    config = synth.build_config(w.kind, tokenizer)
    for key, value in w.config.items():
        setattr(config, key, value)
    if w.kind == "bart":
        config.num_hidden_layers = config.encoder_layers
    tokenizer.model_max_length = config.max_position_embeddings
    torch.manual_seed(0)
    model = AutoModel.from_config(config)
    if w.kind == "bart":
        model.generation_config = GenerationConfig(decoder_start_token_id=config.decoder_start_token_id,
                                                   eos_token_id=config.eos_token_id, pad_token_id=config.pad_token_id,
                                                   max_length=w.extra["max_target_length"], num_beams=1)
    directory.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(directory)
    tokenizer.save_pretrained(directory)
    return directory


# ---------------------------------------------------------------- steady-state clock


class StepClock:
    """Patches Trainer.train: skips `warmup` optimizer steps, then times the next `steps` steps between CUDA syncs
    and counts rows, real/processed tokens and the sums of squared lengths (for the attention FLOPs).

    The clock stops at the end of step warmup + steps (after every callback's on_step_end, before that step's
    logging, saving and evaluation), not when `train` returns: what a run does after its last step (ours saves a
    final checkpoint, 4 GB for BERT-large with its optimizer state; the example scripts save nothing) is not
    training throughput. Counting adds no host-device synchronisation: row and token counts known on the host
    stay Python numbers, the length sums are device tensors read once at the end."""

    def __init__(self, warmup: int, cuda: bool) -> None:
        self.warmup, self.cuda = warmup, cuda
        self.result: dict = {}

    def _sync(self) -> None:
        if self.cuda:
            import torch

            torch.cuda.synchronize()

    def __enter__(self) -> StepClock:
        import torch
        from transformers import Trainer, TrainerCallback

        self._original = original = Trainer.train
        clock = self

        class Callback(TrainerCallback):
            def on_step_end(self, args, state, control, **kwargs):
                if state.global_step == clock.warmup:
                    clock._sync()
                    clock.counting = True
                    clock.start = time.perf_counter()
                    clock.step_ends = [clock.start]
                elif clock.counting and clock.stop is None:
                    if state.global_step == clock.warmup + clock.steps:
                        clock._sync()
                        clock.stop = time.perf_counter()
                        clock.counting = False
                        clock.step_ends.append(clock.stop)
                    else:  # no sync: the per-step times are the host's view (the Trainer syncs every step anyway)
                        clock.step_ends.append(time.perf_counter())

        def train(trainer, *a, **kw):
            clock.counting, clock.stop = clock.warmup == 0, None
            clock.start = time.perf_counter()
            clock.step_ends = [clock.start]
            clock.steps = trainer.args.max_steps - clock.warmup
            host = {"rows": 0, "processed": 0}
            device: dict = {}
            clock.packed = False

            def add(key, value):
                device[key] = device[key] + value.to(torch.float64) if key in device else value.to(torch.float64)

            def hook(module, args_, kwargs_):
                if not (module.training and clock.counting):
                    return None
                ids = kwargs_["input_ids"]
                cu = kwargs_.get("cu_seq_lens_q")
                if cu is not None:
                    clock.packed = True
                    src = (cu[1:] - cu[:-1]).to(torch.float64)
                else:
                    mask = kwargs_.get("attention_mask")
                    src = (mask.sum(-1) if mask is not None else
                           torch.full((ids.shape[0],), ids.shape[1], device=ids.device)).to(torch.float64)
                host["rows"] += src.numel()
                host["processed"] += ids.numel()
                add("real", src.sum())
                add("sq_src", (src * src).sum())
                labels = kwargs_.get("labels")
                if labels is not None and labels.dim() == 2:
                    tgt = (labels != -100).sum(-1).to(torch.float64)
                    host["processed"] += labels.numel()
                    add("tgt", tgt.sum())
                    add("real", tgt.sum())
                    add("sq_tgt", (tgt * tgt).sum())
                    add("cross", (src * tgt).sum())
                return None

            if self.cuda:
                torch.cuda.reset_peak_memory_stats()
            trainer.add_callback(Callback())
            handle = trainer.model.register_forward_pre_hook(hook, with_kwargs=True)
            try:
                out = original(trainer, *a, **kw)
            finally:
                handle.remove()
            if clock.stop is None:  # fewer steps than asked (a short epoch): up to the end of train
                clock._sync()
                clock.stop = time.perf_counter()
            sums = {k: 0.0 for k in ("real", "sq_src", "tgt", "sq_tgt", "cross")}
            sums.update({k: float(v) for k, v in device.items()})
            steps = min(clock.steps, trainer.state.global_step - clock.warmup)
            gaps = sorted(b - a for a, b in zip(clock.step_ends, clock.step_ends[1:], strict=False))
            clock.result = {"seconds": clock.stop - clock.start, "steps": steps, "packed": clock.packed,
                            **{k: float(v) for k, v in host.items()}, **sums,
                            "step_ms_median": 1000 * gaps[len(gaps) // 2] if gaps else None,
                            "step_ms_max": 1000 * gaps[-1] if gaps else None}
            if self.cuda:
                clock.result["peak_memory_gb"] = torch.cuda.max_memory_allocated() / 2**30
            return out

        Trainer.train = train
        return self

    def __exit__(self, *exc) -> None:
        from transformers import Trainer

        Trainer.train = self._original


def layer_parameters(model) -> dict:
    """Parameters of the transformer layers (no embedding lookups) and the sizes the FLOP formula needs."""
    config = model.config
    if getattr(config, "is_encoder_decoder", False):
        core = model.get_encoder(), model.get_decoder()
        count = [sum(p.numel() for layer in part.layers for p in layer.parameters()) for part in core]
        return {"n_enc": count[0], "n_dec": count[1], "d": config.d_model, "vocab": config.vocab_size,
                "layers_enc": config.encoder_layers, "layers_dec": config.decoder_layers}
    layers = model.base_model.encoder.layer
    return {"n": sum(p.numel() for layer in layers for p in layer.parameters()), "d": config.hidden_size,
            "layers": config.num_hidden_layers}


def model_flops(sizes: dict, r: dict) -> float:
    """The FLOP formula of the module docstring, over the measured steps."""
    if "n_enc" in sizes:
        src_tokens = r["real"] - r["tgt"]
        return (6 * (sizes["n_enc"] * src_tokens + (sizes["n_dec"] + sizes["vocab"] * sizes["d"]) * r["tgt"])
                + 12 * sizes["d"] * (sizes["layers_enc"] * r["sq_src"]
                                     + sizes["layers_dec"] * (r["sq_tgt"] + r["cross"])))
    return 6 * sizes["n"] * r["real"] + 12 * sizes["layers"] * sizes["d"] * r["sq_src"]


# ---------------------------------------------------------------- arms


def run_arm(arm: str, w: GpuWorkload, files: dict, model_dir: Path, base: Path, *, steps: int, warmup: int,
            cuda: bool, seed: int, smoke: bool, hf_workers: int = 0):
    """(clock result, trained model, tokenizer)."""
    from transformers import AutoModelForQuestionAnswering, AutoModelForSeq2SeqLM, AutoTokenizer

    total = warmup + steps
    with StepClock(warmup, cuda) as clock:
        if arm.startswith("hf-best"):
            flags = hf_baselines.example_best(w.task, bf16=cuda)
            extra = ({"dataloader_num_workers": hf_workers, "dataloader_pin_memory": cuda}
                     if arm == "hf-best+workers" else {})
            trainer, tokenizer = hf_baselines.build_trainer(
                w.task, model_dir, files, flags, output_dir=base / "out", max_steps=total, batch_size=w.batch_size,
                learning_rate=w.learning_rate, seed=seed, max_seq_length=w.max_seq_length, task_extra=w.extra,
                extra_args=extra, model_overrides={"attn_implementation": "sdpa"})
            with contextlib.redirect_stdout(io.StringIO()):
                trainer.train()
            model = trainer.model
        else:
            hps = {"task": w.task, "model_name_or_path": model_dir, "train_path": files["train"].parent,
                   "max_steps": total, "per_device_train_batch_size": w.batch_size,
                   "learning_rate": w.learning_rate, "seed": seed, "save_steps": total + 1,
                   "logging_steps": total, "max_seq_length": w.max_seq_length, "resume": False, **w.extra}
            if arm == "ours-padded":
                hps["padding_free"] = "false"
            elif smoke and w.task == "question-answering":
                hps["padding_free"] = "true"  # on CPU auto is off: the smoke run still goes through the packed path
            if arm == "ours+compile":
                hps["torch_compile"] = "true"
            code, output = benchlib.run_ours(base, hps)
            if code != 0:
                raise SystemExit(f"{arm} ({w.task}) failed with exit code {code}:\n{output[-3000:]}")
            auto = AutoModelForQuestionAnswering if w.task == "question-answering" else AutoModelForSeq2SeqLM
            model = auto.from_pretrained(base / "model").to("cuda" if cuda else "cpu")
            tokenizer = AutoTokenizer.from_pretrained(base / "model")
    return clock.result, model, tokenizer


def eval_loss(w: GpuWorkload, model, tokenizer, rows: list[dict], work: Path, cuda: bool) -> float:
    """Eval loss on the validation rows, the same evaluation for every arm (bf16 autocast on CUDA)."""
    import torch

    spec_extra = dict(w.extra)
    with torch.autocast("cuda", dtype=torch.bfloat16, enabled=cuda):
        if w.task == "summarization":  # loss only: generation of a 400M model is not what this measures
            import datasets
            from transformers import DataCollatorForSeq2Seq, Seq2SeqTrainer, Seq2SeqTrainingArguments

            from hftrain.args import DataArguments
            from hftrain.tasks import get_task

            raw = datasets.Dataset.from_list(rows)
            spec = get_task(w.task, DataArguments(task=w.task, max_seq_length=w.max_seq_length, **spec_extra))
            spec.resolve_columns(raw, "validation")
            features = spec.tokenize_eval(raw, tokenizer, model.config, {})
            args = Seq2SeqTrainingArguments(output_dir=str(work), per_device_eval_batch_size=16, report_to="none",
                                            disable_tqdm=True)
            trainer = Seq2SeqTrainer(model=model, args=args, processing_class=tokenizer,
                                     data_collator=DataCollatorForSeq2Seq(tokenizer, model=model))
            with contextlib.redirect_stdout(io.StringIO()):
                return float(trainer.evaluate(features)["eval_loss"])
        return float(benchlib.evaluate(w.task, model, tokenizer, rows, max_seq_length=w.max_seq_length,
                                       task_extra=spec_extra, work=work)["eval_loss"])


def render(results: dict, header: str) -> str:
    lines = [header, "", "| task | arm | samples/s | real tokens/s | padded | MFU | peak GB | median step ms | eval loss "
             "| vs hf-best |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for task, arms in results.items():
        base = arms["hf-best"]["samples_per_s"]
        for arm, r in arms.items():
            mfu = f"{r['mfu']:.1%}" if r.get("mfu") is not None else "n/a"
            peak = f"{r['peak_memory_gb']:.1f}" if "peak_memory_gb" in r else "n/a"
            step = f"{r['step_ms_median']:.0f}" if r.get("step_ms_median") is not None else "n/a"
            lines.append(f"| {task} | {arm}{' (padding-free)' if r['packed'] else ''} | {r['samples_per_s']:.1f} | "
                         f"{r['real_tokens_per_s']:.0f} | {r['padded_share']:.1%} | {mfu} | {peak} | {step} | "
                         f"{r['eval_loss']:.3f} | {r['samples_per_s'] / base:.2f}x |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", choices=list(GPU_WORKLOADS), default=list(GPU_WORKLOADS))
    parser.add_argument("--steps", type=int, default=100, help="measured optimizer steps per arm (default 100)")
    parser.add_argument("--warmup", type=int, default=15, help="steps run before the clock starts (default 15)")
    parser.add_argument("--compile", action="store_true", help="add the ours+compile arm (torch.compile)")
    parser.add_argument("--hf-best-workers", type=int, default=0, metavar="N",
                        help="add the hf-best+workers arm: hf-best with --dataloader_num_workers N (and pinned "
                             "memory on CUDA), the loader set-up ours has by default")
    parser.add_argument("--peak-tflops", type=float, default=None, help="peak dense bf16 TFLOP/s (MFU)")
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny configs, 2+1 steps: checks the code path")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=None,
                        help="result directory (default $OUT when set, else benchmarks/results/)")
    args = parser.parse_args(argv)

    import torch
    import transformers

    cuda = torch.cuda.is_available() and not args.smoke
    if not cuda and not args.smoke:
        print("bench_gpu: no CUDA device here: skipped (run it on a GPU machine; `--smoke` checks it on CPU)")
        return 0
    out = args.out or Path(os.environ.get("OUT") or Path(__file__).resolve().parent / "results")
    benchlib.quiet()
    if args.smoke:
        torch.set_num_threads(1)
        args.steps, args.warmup = 2, 1
    device = torch.cuda.get_device_name() if cuda else "CPU (smoke)"
    peak = args.peak_tflops or next((v for k, v in PEAK_BF16_TFLOPS.items() if k in device), None)
    arms = (["hf-best"] + (["hf-best+workers"] if args.hf_best_workers > 0 else []) + ["ours", "ours-padded"]
            + (["ours+compile"] if args.compile else []))
    work = Path(tempfile.mkdtemp(prefix="bench-gpu-"))
    started = time.time()
    results: dict = {}
    for task in args.tasks:
        w = GPU_WORKLOADS[task]
        if args.smoke:
            w = replace(w, config=SMOKE_CONFIG[task], train_examples=32, eval_examples=8, batch_size=4,
                        max_seq_length=min(w.max_seq_length, 256))
        model_dir = build_model(w, work / f"model-{task}")
        files = workloads.write_data(task, work / f"data-{task}", train=w.train_examples, evaluation=w.eval_examples)
        rows = workloads.examples(task, w.eval_examples, 2)
        results[task] = {}
        for i, arm in enumerate(arms):
            if task == "summarization" and arm == "ours-padded":
                continue  # padding-free does not apply to BART (packing.py): ours is already dynamic padding
            r, model, tokenizer = run_arm(arm, w, files, model_dir, work / f"run-{task}-{i}", steps=args.steps,
                                          warmup=args.warmup, cuda=cuda, seed=args.seed, smoke=args.smoke,
                                          hf_workers=args.hf_best_workers)
            seconds = r["seconds"]
            row = {**r, "samples_per_s": r["rows"] / seconds, "real_tokens_per_s": r["real"] / seconds,
                   "padded_share": 1 - r["real"] / r["processed"] if r["processed"] else float("nan")}
            sizes = layer_parameters(model)
            row["model_flops"] = model_flops(sizes, r)
            row["mfu"] = row["model_flops"] / seconds / (peak * 1e12) if peak and cuda else None
            row["eval_loss"] = eval_loss(w, model, tokenizer, rows, work / f"eval-{task}-{i}", cuda)
            row["layer_parameters"] = sizes
            results[task][arm] = row
            print(f"  {task} {arm}: {row['samples_per_s']:.1f} samples/s, padded {row['padded_share']:.1%}, "
                  f"eval loss {row['eval_loss']:.3f}", flush=True)
            del model
            if cuda:
                torch.cuda.empty_cache()
    header = (f"bench_gpu: {device}, {args.warmup} warm-up + {args.steps} measured steps per arm, torch "
              f"{torch.__version__}, transformers {transformers.__version__}, peak {peak} TFLOP/s, "
              f"{time.time() - started:.0f} s")
    table = render(results, header)
    print(table)
    name = "bench_gpu_smoke" if args.smoke else "bench_gpu"
    benchlib.write_json(out / f"{name}.json", {"header": header, "results": results})
    (out / f"{name}.md").write_text(table + "\n")
    print(f"\nwrote {out / (name + '.json')} and {name}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
