"""Training throughput of training_code/ at its defaults against the Hugging Face example scripts, per task.

    python benchmarks/bench_training.py                 # 3 tasks x 3 arms x 3 interleaved rounds + learning runs
    python benchmarks/bench_training.py --tasks question-answering --rounds 5
    python benchmarks/bench_training.py --smoke         # seconds: tiny data and steps (the test suite runs it)

Three arms per task, on the same model (built from a config, random weights), data (generated, realistic length
distributions: see workloads.py), batch size, learning rate, number of optimizer steps and seed:

* hf-default: the example script (run_qa.py / run_glue.py / run_summarization.py) with its defaults, rebuilt from
  library pieces in hf_baselines.py: run_qa and run_glue pad every example to max_seq_length; fp32;
* hf-best: the same script at its best flags: `--pad_to_max_length False` (dynamic padding),
  `--train_sampling_strategy group_by_length`, the same precision as this code (fp32 on CPU);
* ours: training_code's entry point (hftrain.run.runner.main) with no efficiency hyperparameter set: its defaults.

Rounds are interleaved (the arm order rotates every round) so that load from other processes on the machine hits
every arm alike. The figure to trust is CPU time (process time in `Trainer.train` from the end of step 2 to the
end: the steady state, without one-time set-up; one thread: torch.set_num_threads(1)); wall time is printed too,
and the CPU time of the whole call is in the JSON (`call_cpu_s`). Throughput is training examples (QA: features) per CPU
second. Padded share: padding tokens / processed tokens over all training batches. After the timing rounds each
arm trains once for a learning-length run and one evaluator scores every arm's model on the same validation set
(eval loss and the task metric), so equal metrics show the speed was not bought with worse training.

Results: a table on stdout and JSON in --out (default benchmarks/results/, git-ignored).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import shutil
import statistics
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from benchmarks import benchlib, hf_baselines, workloads
from local_mode import synthetic as synth  # noqa: E402

ARMS = ("hf-default", "hf-best", "ours")
METRIC = {"question-answering": "f1", "text-classification": "accuracy", "summarization": "rougeL"}
CLAIM_BAR = 1.2  # ours / hf-best on samples per CPU second: below this, no speed-up is claimed


def ours_hyperparameters(w: workloads.Workload, files: dict, model_dir: Path, steps: int, seed: int) -> dict:
    hps = {"task": w.task, "model_name_or_path": model_dir, "train_path": files["train"].parent,
           "max_steps": steps, "per_device_train_batch_size": w.batch_size, "learning_rate": w.learning_rate,
           "warmup_steps": 0, "weight_decay": 0.01, "seed": seed, "save_steps": steps + 1,
           "logging_steps": max(steps, 1), "max_seq_length": w.max_seq_length, "resume": False}
    hps.update(w.extra)
    return hps


def run_arm(arm: str, w: workloads.Workload, files: dict, model_dir: Path, base: Path, steps: int, seed: int):
    """(Measure, trained model, tokenizer) of one arm (`ours+padding-free`: ours with padding_free true)."""
    from transformers import (
        AutoModelForQuestionAnswering,
        AutoModelForSeq2SeqLM,
        AutoModelForSequenceClassification,
        AutoTokenizer,
    )

    with benchlib.TrainMeter() as meter:
        if arm.startswith("ours"):
            hps = ours_hyperparameters(w, files, model_dir, steps, seed)
            if arm == "ours+padding-free":
                hps["padding_free"] = "true"
            code, output = benchlib.run_ours(base, hps)
            if code != 0:
                raise SystemExit(f"ours ({w.task}) failed with exit code {code}:\n{output[-3000:]}")
            auto = {"question-answering": AutoModelForQuestionAnswering, "text-classification":
                    AutoModelForSequenceClassification, "summarization": AutoModelForSeq2SeqLM}[w.task]
            model, tokenizer = auto.from_pretrained(base / "model"), AutoTokenizer.from_pretrained(base / "model")
        else:
            flags = (hf_baselines.example_defaults(w.task) if arm == "hf-default"
                     else hf_baselines.example_best(w.task))
            trainer, tokenizer = hf_baselines.build_trainer(
                w.task, model_dir, files, flags, output_dir=base / "out", max_steps=steps, batch_size=w.batch_size,
                learning_rate=w.learning_rate, seed=seed, max_seq_length=w.max_seq_length, task_extra=w.extra)
            with contextlib.redirect_stdout(io.StringIO()):  # the examples' PrinterCallback lines
                trainer.train()
            model = trainer.model
    if len(meter.runs) != 1:
        raise SystemExit(f"{arm}: expected one Trainer.train call, saw {len(meter.runs)}")
    return meter.runs[0], model, tokenizer


def bench_task(w: workloads.Workload, work: Path, *, rounds: int, size: str, learn: bool, seed: int,
               warm_up: bool = True, arms: tuple[str, ...] = ARMS, learn_in_timing: bool = False) -> dict:
    """Timing rounds, then per arm a learning run scored by one evaluator (`learn_in_timing`, for --smoke:
    the last timing run's model is scored instead, which checks the same path with half the runs)."""
    model_dir = synth.build_model_dir(w.model_kind, work / f"{w.model_kind}-{size}", size=size)
    files = workloads.write_data(w.task, work / f"data-{w.task}", train=w.train_examples, evaluation=w.eval_examples)
    eval_rows = workloads.examples(w.task, w.eval_examples, 2)
    counter = iter(range(10**6))

    def fresh() -> Path:
        return work / f"run-{w.task}-{next(counter)}"

    for arm in arms if warm_up else ():  # warm-up (not recorded): first-call costs of each code path
        run_arm(arm, w, files, model_dir, fresh(), 2, seed)
    timing: dict[str, list[dict]] = {arm: [] for arm in arms}
    last: dict[str, tuple] = {}
    for r in range(rounds):
        order = arms[r % len(arms):] + arms[: r % len(arms)]
        for arm in order:
            measure, model, tokenizer = run_arm(arm, w, files, model_dir, fresh(), w.timing_steps, seed)
            if learn_in_timing:
                last[arm] = (measure, model, tokenizer)
            timing[arm].append(measure.as_dict())
            print(f"  {w.task} round {r + 1}/{rounds} {arm:10} cpu {measure.cpu_s:6.2f} s  wall {measure.wall_s:6.2f} s"
                  f"  {measure.samples / measure.cpu_s:8.1f} samples/cpu-s  padded {measure.padded_share:.1%}",
                  flush=True)
    learned: dict[str, dict] = {}
    if learn:
        for arm in arms:
            measure, model, tokenizer = (last[arm] if learn_in_timing else
                                         run_arm(arm, w, files, model_dir, fresh(), w.learn_steps, seed))
            scores = benchlib.evaluate(w.task, model, tokenizer, eval_rows, max_seq_length=w.max_seq_length,
                                       task_extra=w.extra, work=fresh())
            learned[arm] = {**scores, "train": measure.as_dict()}
            print(f"  {w.task} learning run {arm:10} ({w.timing_steps if learn_in_timing else w.learn_steps} steps, cpu {measure.cpu_s:.1f} s): "
                  + ", ".join(f"{k} {v:.3f}" for k, v in scores.items()), flush=True)

    return summarize({"workload": {**w.__dict__}, "model_size": size, "rounds": timing, "learning": learned})


def summarize(result: dict) -> dict:
    """Adds per-arm statistics and ours/baseline ratios to a result holding the raw `rounds` and `learning`."""
    timing, learned = result["rounds"], result["learning"]
    for rounds in timing.values():
        for m in rounds:
            m.setdefault("real_tokens_per_cpu_s", m["real_tokens"] / m["cpu_s"])

    def stat(arm: str, key: str) -> dict:
        return benchlib.summary([m[key] for m in timing[arm]])

    result["arms"] = {}
    for arm in timing:
        result["arms"][arm] = {key: stat(arm, key) for key in ("cpu_s", "wall_s", "call_cpu_s", "samples_per_cpu_s",
                                                               "samples_per_wall_s", "real_tokens_per_cpu_s")}
        result["arms"][arm]["padded_share"] = statistics.median(m["padded_share"] for m in timing[arm])
    for baseline in ("hf-default", "hf-best"):  # paired per round: the arms of one round ran side by side
        for key, name in (("samples_per_cpu_s", "ratio"), ("real_tokens_per_cpu_s", "token_ratio")):
            ratios = [o[key] / b[key] for o, b in zip(timing["ours"], timing[baseline], strict=True)]
            result[f"{name}_vs_{baseline}"] = benchlib.summary(ratios)
        if "ours" in learned and baseline in learned:  # whole epochs: no bias from which rows a short window saw
            o, b = learned["ours"]["train"], learned[baseline]["train"]
            result[f"learning_ratio_vs_{baseline}"] = o["samples_per_cpu_s"] / b["samples_per_cpu_s"]
    return result


def render(results: dict, header: str) -> str:
    nan = float("nan")
    lines = [header, "", "| task | arm | steady CPU s / run | samples / CPU s | real tokens / CPU s | padded | "
             "learning run: samples / CPU s | eval loss | metric |", "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for task, res in results.items():
        for arm, a in res["arms"].items():
            learned = res["learning"].get(arm, {})
            run = learned.get("train", {})
            lines.append(
                f"| {task} | {arm} | {benchlib.fmt_range(a['cpu_s'], 2)} | {benchlib.fmt_range(a['samples_per_cpu_s'])}"
                f" | {benchlib.fmt_range(a['real_tokens_per_cpu_s'], 0)} | {a['padded_share']:.1%}"
                f" | {run.get('samples_per_cpu_s', nan):.1f} ({run.get('steps', 0)} steps)"
                f" | {learned.get('eval_loss', nan):.3f} | {METRIC[task]} {learned.get(METRIC[task], nan):.3f} |")
    lines += ["", "| task | ours / hf-default: samples, tokens, learning run | ours / hf-best: samples, tokens, "
              f"learning run | speed-up over best flags claimed (all >= {CLAIM_BAR}x) |", "| --- | --- | --- | --- |"]
    for task, res in results.items():
        cells, claim = [], True
        for baseline in ("hf-default", "hf-best"):
            learning = res.get(f"learning_ratio_vs_{baseline}")
            cells.append(f"{benchlib.fmt_range(res[f'ratio_vs_{baseline}'], 2)}x, "
                         f"{benchlib.fmt_range(res[f'token_ratio_vs_{baseline}'], 2)}x, "
                         + (f"{learning:.2f}x" if learning is not None else "n/a"))
            if baseline == "hf-best":
                claim = (res["ratio_vs_hf-best"]["median"] >= CLAIM_BAR
                         and res["token_ratio_vs_hf-best"]["median"] >= CLAIM_BAR
                         and (learning is None or learning >= CLAIM_BAR))
        lines.append(f"| {task} | {cells[0]} | {cells[1]} | {'yes' if claim else 'no'} |")
    lines += ["", "samples = training examples (QA: features) per CPU second; tokens = real (non-padding) tokens per CPU "
              "second; both in the steady state of the timing rounds, as the median (min-max) of per-round ratios (the "
              "arms of one round ran side by side). A short window sees only some batches, whose lengths differ by "
              "sampler (the Trainer's LengthGroupedSampler runs each mega-batch longest first), so the learning run's "
              "samples / CPU s over whole epochs is given too. Metric after the learning run: F1 (0-100) for QA, "
              "accuracy (0-1), ROUGE-L (0-100)."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", nargs="+", choices=list(workloads.WORKLOADS), default=list(workloads.WORKLOADS))
    parser.add_argument("--rounds", type=int, default=3, help="interleaved timing rounds (default 3)")
    parser.add_argument("--steps", type=int, default=None, help="optimizer steps per timing run (default per task)")
    parser.add_argument("--learn-steps", type=int, default=None, help="steps of the learning run (default per task)")
    parser.add_argument("--no-learn", action="store_true", help="skip the learning runs and the evaluation")
    parser.add_argument("--model-size", choices=["tiny", "small"], default=None,
                        help="config size for every task: tiny (64 wide) or small (128 wide); 2 layers either way "
                        "(default: per task, workloads.py: the size that learns the task in the learning run)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1: CPU time is per core)")
    parser.add_argument("--padding-free-arm", action="store_true",
                        help="QA: add the arm ours+padding-free (padding_free true, off by default on CPU)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--smoke", action="store_true", help="tiny data, steps and models, 1 round (seconds)")
    parser.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results")
    parser.add_argument("--render", type=Path, default=None, help="print the tables of a results JSON and exit")
    args = parser.parse_args(argv)
    if args.render:
        import json

        data = json.loads(args.render.read_text())
        print(render({task: summarize(res) for task, res in data["results"].items()}, data["header"]))
        return 0

    import torch
    import transformers

    torch.set_num_threads(args.threads)
    benchlib.quiet()
    if args.smoke:
        args.rounds, args.model_size = 1, "tiny"
    chosen = {}
    for name in args.tasks:
        w = workloads.WORKLOADS[name]
        if args.smoke:
            w = replace(w, train_examples=48, eval_examples=12, timing_steps=4, learn_steps=4,
                        batch_size=min(w.batch_size, 8))
        if args.steps:
            w = replace(w, timing_steps=args.steps)
        if args.learn_steps:
            w = replace(w, learn_steps=args.learn_steps)
        chosen[name] = w

    work = Path(tempfile.mkdtemp(prefix="bench-training-"))
    started = time.time()
    results = {}
    try:
        for name, w in chosen.items():
            results[name] = bench_task(w, work, rounds=args.rounds, size=args.model_size or w.model_size,
                                       learn=not args.no_learn,
                                       seed=args.seed, warm_up=not args.smoke, learn_in_timing=args.smoke,
                                       arms=ARMS + (("ours+padding-free",) if args.padding_free_arm
                                                    and name == "question-answering" else ()))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if torch.get_num_threads() != args.threads:
        print(f"warning: torch threads changed to {torch.get_num_threads()} during the runs", file=sys.stderr)
    sizes = ", ".join(f"{n} {args.model_size or w.model_size}" for n, w in chosen.items())
    header = (f"bench_training: {args.rounds} interleaved round(s), models ({sizes}), CPU, "
              f"{args.threads} torch thread(s), torch {torch.__version__}, transformers {transformers.__version__}, "
              f"{time.time() - started:.0f} s")
    table = render(results, header)
    print(table)
    name = "bench_training_smoke" if args.smoke else "bench_training"
    benchlib.write_json(args.out / f"{name}.json", {"header": header, "results": results})
    (args.out / f"{name}.md").write_text(table + "\n")
    print(f"\nwrote {args.out / (name + '.json')} and {name}.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
