"""What the training benchmarks share: the measurement around Trainer.train, this code's arm, one evaluator for
every arm's trained model, and the statistics and tables.

Measurement is the same for every arm: `TrainMeter` wraps `transformers.Trainer.train` (the examples' trainers
and this code's subclass all go through it). It records the process CPU time and the wall time of the steady
state: from the end of optimizer step `skip_steps` to the end of the call, so that one-time set-up (building the
dataloader, the Trainer's LengthGroupedSampler reading every row's length, the first steps) is left out of the
throughput; the whole call's CPU time is kept as `call_cpu_s`. A forward pre-hook on the model counts the rows and
tokens of every training batch of the steady state: processed tokens (what the model computed on, padding
included) and real tokens (attention mask, or every token of a padding-free row; for sequence-to-sequence models
the decoder's labels are counted too).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
for _var in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def quiet() -> None:
    """No progress bars or per-run warnings from datasets/transformers (the benchmark prints its own lines)."""
    import warnings

    import datasets
    from transformers.utils import logging as hf_logging

    datasets.disable_progress_bars()
    datasets.utils.logging.set_verbosity_error()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore", message=".*pin_memory.*")


@dataclass
class Measure:
    """One training run."""

    cpu_s: float = 0.0
    wall_s: float = 0.0
    steps: int = 0
    samples: int = 0
    real_tokens: int = 0
    processed_tokens: int = 0
    extra: dict = field(default_factory=dict)

    @property
    def padded_share(self) -> float:
        return 1.0 - self.real_tokens / self.processed_tokens if self.processed_tokens else float("nan")

    def as_dict(self) -> dict:
        return {"cpu_s": self.cpu_s, "wall_s": self.wall_s, "steps": self.steps, "samples": self.samples,
                "real_tokens": self.real_tokens, "processed_tokens": self.processed_tokens,
                "padded_share": self.padded_share,
                "samples_per_cpu_s": self.samples / self.cpu_s if self.cpu_s else float("nan"),
                "samples_per_wall_s": self.samples / self.wall_s if self.wall_s else float("nan"), **self.extra}


def _count_batch(kwargs: dict) -> tuple[int, int, int]:
    """(rows, real tokens, processed tokens) of one forward call's inputs."""
    import torch

    ids = kwargs.get("input_ids")
    if ids is None:
        return 0, 0, 0
    processed = ids.numel()
    if kwargs.get("cu_seq_lens_q") is not None:  # a padding-free row: every token is real
        rows, real = int(kwargs["cu_seq_lens_q"].numel() - 1), processed
    else:
        rows = int(ids.shape[0])
        mask = kwargs.get("attention_mask")
        real = int(mask.sum()) if isinstance(mask, torch.Tensor) else processed
    labels = kwargs.get("labels")
    if isinstance(labels, torch.Tensor) and labels.dim() == 2:  # decoder tokens of a seq2seq model
        processed += labels.numel()
        real += int((labels != -100).sum())
    return rows, real, processed


class TrainMeter:
    """Patches Trainer.train while active; every call appends a Measure to `runs` (see the module docstring)."""

    def __init__(self, skip_steps: int = 2) -> None:
        self.runs: list[Measure] = []
        self.skip_steps = skip_steps

    def __enter__(self) -> TrainMeter:
        from transformers import Trainer, TrainerCallback

        self._original = original = Trainer.train
        meter = self

        def train(trainer, *args, **kwargs):
            measure = Measure()
            clock = {"counting": meter.skip_steps == 0}

            class Start(TrainerCallback):
                def on_step_end(self, args, state, control, **kw):
                    if state.global_step == meter.skip_steps:
                        clock.update(counting=True, cpu=time.process_time(), wall=time.perf_counter())

            def hook(module, args_, kwargs_):
                if module.training and clock["counting"]:
                    rows, real, processed = _count_batch(kwargs_)
                    measure.samples += rows
                    measure.real_tokens += real
                    measure.processed_tokens += processed
                return None

            handle = trainer.model.register_forward_pre_hook(hook, with_kwargs=True)
            start = Start()
            trainer.add_callback(start)
            cpu, wall = time.process_time(), time.perf_counter()
            clock.update(cpu=cpu, wall=wall)
            try:
                result = original(trainer, *args, **kwargs)
            finally:
                end_cpu, end_wall = time.process_time(), time.perf_counter()
                handle.remove()
                trainer.remove_callback(start)
            measure.cpu_s, measure.wall_s = end_cpu - clock["cpu"], end_wall - clock["wall"]
            measure.extra["call_cpu_s"] = end_cpu - cpu
            measure.steps = trainer.state.global_step - meter.skip_steps
            meter.runs.append(measure)
            return result

        Trainer.train = train
        return self

    def __exit__(self, *exc) -> None:
        from transformers import Trainer

        Trainer.train = self._original


# ---------------------------------------------------------------- this code's arm


def run_ours(base: Path, hyperparameters: dict) -> tuple[int, str]:
    """training_code's entry point (hftrain.run.runner.main) in this process, as a job with base dir `base`."""
    from hftrain.run import runner

    for var in list(os.environ):
        if var.startswith("SM_") or var in ("LOCAL_RANK", "RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE"):
            os.environ.pop(var)
    os.environ["SAGEMAKER_BASE_DIR"] = str(base)
    argv: list[str] = []
    for key, value in hyperparameters.items():
        argv += [f"--{key}", str(value)]
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer), contextlib.redirect_stderr(io.StringIO()):
        code = runner.main(argv)
    return code, buffer.getvalue()


# ---------------------------------------------------------------- one evaluator for every arm


def evaluate(task: str, model, tokenizer, eval_rows: list[dict], *, max_seq_length: int, task_extra: dict,
             work: Path, batch_size: int = 64) -> dict:
    """Eval loss and the task metric of a trained model, computed the same way for every arm.

    QA: features as run_qa.py's prepare_validation_features builds them, n-best post-processing and SQuAD
    scoring (hftrain.scoring.squad, equal to the examples' utils_qa.py on the same logits); classification: accuracy
    through the model's own id2label; summarization: greedy generation and ROUGE (rouge-score, stemmed).
    """
    import datasets
    import numpy as np
    from transformers import (
        DataCollatorForSeq2Seq,
        DataCollatorWithPadding,
        Seq2SeqTrainer,
        Seq2SeqTrainingArguments,
    )

    from hftrain.args import DataArguments
    from hftrain.scoring import squad as metrics_qa
    from hftrain.scoring.rouge import rouge
    from hftrain.tasks import get_task

    args = Seq2SeqTrainingArguments(output_dir=str(work), per_device_eval_batch_size=batch_size, report_to="none",
                                    disable_tqdm=True, predict_with_generate=task == "summarization",
                                    generation_max_length=task_extra.get("max_target_length"),
                                    generation_num_beams=1, bf16=False, fp16=False)
    model.eval()
    raw = datasets.Dataset.from_list(eval_rows)
    data_args = DataArguments(task=task, max_seq_length=max_seq_length,
                              **{k: v for k, v in task_extra.items() if k in ("doc_stride", "max_target_length")})
    spec = get_task(task, data_args)
    spec.resolve_columns(raw, "validation")
    if task == "text-classification":
        spec.set_labels(sorted(raw.unique("label")))
    features = spec.tokenize_eval(raw, tokenizer, model.config, {})
    if task == "summarization":
        collator = DataCollatorForSeq2Seq(tokenizer, model=model, label_pad_token_id=-100)
    else:
        collator = DataCollatorWithPadding(tokenizer)
    keep = [c for c in features.column_names if c not in ("example_id", "offset_mapping")]
    trainer = Seq2SeqTrainer(model=model, args=args, data_collator=collator, processing_class=tokenizer)
    out = trainer.predict(features.select_columns(keep), metric_key_prefix="eval")
    result = {"eval_loss": float(out.metrics.get("eval_loss", float("nan")))}
    if task == "question-answering":
        start, end = out.predictions[:2]
        examples = [{"id": row["id"], "context": row["context"]} for row in eval_rows]
        feats = [{"example_id": e, "offset_mapping": o}
                 for e, o in zip(features["example_id"], features["offset_mapping"], strict=True)]
        predictions = metrics_qa.postprocess_predictions(examples=examples, features=feats,
                                                         start_logits=np.asarray(start), end_logits=np.asarray(end))
        scores = metrics_qa.squad_scores(predictions, metrics_qa.references_from(eval_rows))
        result.update({"f1": scores["f1"], "exact_match": scores["exact_match"]})
    elif task == "text-classification":
        logits = out.predictions[0] if isinstance(out.predictions, tuple) else out.predictions
        id2label = {int(k): v for k, v in model.config.id2label.items()}
        predicted = [id2label[int(i)] for i in np.argmax(logits, axis=-1)]
        result["accuracy"] = float(np.mean([p == row["label"] for p, row in zip(predicted, eval_rows, strict=True)]))
    else:
        preds = np.where(out.predictions < 0, tokenizer.pad_token_id, out.predictions)
        decoded = [t.strip() for t in tokenizer.batch_decode(preds, skip_special_tokens=True)]
        scores = rouge(decoded, [row["summary"] for row in eval_rows])
        result.update({"rouge1": scores["rouge1"], "rougeL": scores["rougeL"]})
    return result


# ---------------------------------------------------------------- statistics and tables


def summary(values: list[float]) -> dict:
    return {"median": statistics.median(values), "min": min(values), "max": max(values), "n": len(values)}


def fmt_range(stats: dict, digits: int = 1) -> str:
    return f"{stats['median']:.{digits}f} ({stats['min']:.{digits}f}-{stats['max']:.{digits}f})"


def write_json(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=True, default=float) + "\n")
