"""Hyperparameters: three dataclass groups parsed from `--key value` arguments (the toolkit's form).

`ModelArguments` and `DataArguments` are ours; `SageMakerTrainingArguments` is the Trainer's
`Seq2SeqTrainingArguments` with SageMaker-friendly defaults (checkpoints in the checkpoint dir, precision
and optimizer picked from the hardware, dataloader workers sized to the machine) and a few extra fields.
`hyperparameter_schema()` turns the parser into `hyperparameters.json` (name -> type, help, choices; the `task`
entry also lists each task's metric names). The task-specific fields come from the task modules (tasks/).
"""

from __future__ import annotations

import dataclasses
import enum
import importlib.util
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import Seq2SeqTrainingArguments

from contract import intervals, run_history, startup_limit
from hftrain import hp_rules, smenv
from hftrain.checkpoint.manager import DEFAULT_KEEP
from hftrain.data import files as data
from hftrain.stall.limits import parse_minutes

from .tasks import REGISTRY, TASKS, column_declarations, metric_names, verdicts

DATA_FORMATS = ("auto", "jsonl", "json", "csv", "parquet")
PRECISIONS = ("auto", "bf16", "fp16", "fp32")
ATTENTION = ("sdpa", "eager", "flash_attention_2", "flash_attention_3")
PADDING_FREE = ("auto", "true", "false")

SCHEMA_FILE = Path(__file__).resolve().parents[1] / "hyperparameters.json"


class ArgumentError(ValueError):
    """A hyperparameter is missing, unknown or has a bad value; the message names it."""


@dataclass
class ModelArguments:
    """Which model and tokenizer to fine-tune."""

    model_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "Hugging Face Hub id or local directory of the pretrained model. Leave unset when a `model` "
            "channel is sent (a saved model directory or model.tar.gz, for VPCs without internet)."
        },
    )
    tokenizer_name_or_path: str | None = field(
        default=None,
        metadata={
            "help": "Tokenizer to use (Hub id or directory). Default: the `tokenizer` channel when present "
            "(the tokenizer stage's output), else the model's own tokenizer."
        },
    )
    attn_implementation: str = field(
        default="sdpa",
        metadata={
            "help": "Attention kernel: sdpa (PyTorch scaled-dot-product attention, default), eager, or "
            "flash_attention_2/3 (needs the package). Falls back to eager when the model has no SDPA path.",
            "choices": list(ATTENTION),
        },
    )
    trust_remote_code: bool = field(
        default=False, metadata={"help": "Allow model code from the Hub repository (off by default)."}
    )
    allow_pickle: bool = field(
        default=False,
        metadata={
            "help": "Load pickle weights (pytorch_model.bin) when the model has no safetensors weights. Off by "
            "default: only safetensors are loaded (a pickle can run code; torch's weights_only unpickler is the "
            "only guard), and a pickle-only model is refused before it is opened."
        },
    )
    model_revision: str | None = field(
        default=None, metadata={"help": "Hub revision (branch, tag or commit) of the model."}
    )
    cache_dir: str | None = field(
        default=None,
        metadata={"help": "Cache for downloaded models and tokenized datasets. Default: the datasets cache."},
    )

    def __post_init__(self) -> None:
        if self.attn_implementation not in ATTENTION:
            raise ArgumentError(f"attn_implementation must be one of {ATTENTION}, got {self.attn_implementation!r}")


@dataclass
class CommonDataArguments:
    """What to train on and how to turn it into model inputs (every task; each task module adds its own)."""

    task: str | None = field(
        default=None,
        metadata={"help": "The task to fine-tune for (required).", "choices": list(TASKS)},
    )
    # --- where the data comes from ---
    train_path: str | None = field(
        default=None,
        metadata={
            "help": "File or directory with the training data (e.g. an FSx for Lustre mount path). "
            "Default: the `train` channel."
        },
    )
    validation_path: str | None = field(
        default=None,
        metadata={"help": "File or directory with the validation data. Default: the `validation` channel."},
    )
    dataset_name: str | None = field(
        default=None,
        metadata={"help": "Hub dataset name, used only when no train channel/path is given (needs internet)."},
    )
    dataset_config_name: str | None = field(default=None, metadata={"help": "Hub dataset configuration name."})
    train_split: str = field(default="train", metadata={"help": "Split of the Hub dataset used for training."})
    validation_split: str = field(
        default="validation", metadata={"help": "Split of the Hub dataset used for evaluation ('' for none)."}
    )
    data_format: str = field(
        default="auto",
        metadata={
            "help": "Format of channel files; auto detects it from the file extensions "
            "(.jsonl/.json/.csv/.parquet, optionally .gz).",
            "choices": list(DATA_FORMATS),
        },
    )
    # --- column names ---
    text_column: str | None = field(
        default=None,
        metadata={
            "help": "Input text column. Default: the first present of " + "; ".join(
                f"{name} {'/'.join(col.candidates)}" for name, task in REGISTRY.items() for col in task.columns
                if col.hyperparameter == "text_column") + "."
        },
    )
    # --- sequence lengths ---
    max_seq_length: int | None = field(
        default=None,
        metadata={
            "help": "Maximum input length in tokens. Default: question answering 384, classification 128, "
            "summarization 1024 (never above the tokenizer's model_max_length)."
        },
    )
    pad_to_max_length: bool = field(
        default=False,
        metadata={
            "help": "Pad every example to max_seq_length (slow; for comparisons). Default: dynamic padding per "
            "batch."
        },
    )
    # --- sizes and preprocessing ---
    max_train_samples: int | None = field(
        default=None, metadata={"help": "Use only this many training examples (per host on sharded input)."}
    )
    max_eval_samples: int | None = field(default=None, metadata={"help": "Use only this many validation examples."})
    preprocessing_num_workers: int | None = field(
        default=None, metadata={"help": "Processes for tokenization (datasets.map num_proc)."}
    )
    overwrite_cache: bool = field(default=False, metadata={"help": "Re-tokenize instead of using the cache."})

    def __post_init__(self) -> None:
        if self.task is None:
            raise ArgumentError(f"task is required: one of {', '.join(TASKS)}")
        if self.task not in TASKS:
            raise ArgumentError(f"task must be one of {', '.join(TASKS)}, got {self.task!r}")
        if self.data_format not in DATA_FORMATS:
            raise ArgumentError(f"data_format must be one of {DATA_FORMATS}, got {self.data_format!r}")
        # Bounds and combinations (doc_stride vs max_seq_length, ...) are in hp_rules, checked by parse_args.
        for task in REGISTRY.values():
            task.default_arguments(self)


# Every task's hyperparameters are accepted whatever the task (as before the split): one namespace for SageMaker.
DataArguments = dataclass(type("DataArguments", (CommonDataArguments, *(
    task.arguments for task in REGISTRY.values() if task.arguments is not None)), {
        "__doc__": "What to train on and how to turn it into model inputs: the common fields and every task's.",
        "__module__": __name__}))


def _kv_to_dict(value: str) -> dict[str, Any]:
    """`a=1,b=x` (how the toolkit renders a dict hyperparameter) -> {'a': 1, 'b': 'x'}."""
    out: dict[str, Any] = {}
    for part in value.split(","):
        key, _, raw = part.partition("=")
        try:
            out[key.strip()] = json.loads(raw)
        except ValueError:
            out[key.strip()] = raw
    return out


def _cuda_info() -> tuple[bool, bool]:
    try:
        import torch

        if torch.cuda.is_available():
            return True, bool(torch.cuda.is_bf16_supported())
    except Exception:  # pragma: no cover - no torch / broken driver
        pass
    return False, False


@dataclass
class SageMakerTrainingArguments(Seq2SeqTrainingArguments):
    """The Trainer's arguments with defaults for SageMaker jobs, plus checkpoint and precision settings."""

    output_dir: str | None = field(
        default=None,
        metadata={"help": "Managed: the Trainer works in checkpoint_dir. Leave unset."},
    )
    checkpoint_dir: str = field(
        default_factory=smenv.default_checkpoint_dir,
        metadata={
            "help": "Checkpoint directory (CheckpointConfig.LocalPath). Default /opt/ml/checkpoints, under "
            "SAGEMAKER_BASE_DIR when set."
        },
    )
    resume: bool = field(
        default=True,
        metadata={"help": "Resume from the newest complete checkpoint in checkpoint_dir when one exists."},
    )
    precision: str = field(
        default="auto",
        metadata={
            "help": "Mixed precision: auto picks bf16 on GPUs that support it, else fp16 on GPUs, else fp32. "
            "Explicit bf16/fp16 flags win.",
            "choices": list(PRECISIONS),
        },
    )
    ddp_backend: str | None = field(
        default=None,
        metadata={
            "help": "Distributed backend: nccl (GPU default), gloo (CPU default), or smddp (SageMaker "
            "distributed data parallel, on the instance types that support it).",
            "choices": ["nccl", "gloo", "mpi", "xccl", "hccl", "cncl", "mccl", "smddp"],
        },
    )
    save_steps: float = field(
        default=500, metadata={"help": "Save a checkpoint every N optimizer steps (the spec's interval)."}
    )
    logging_steps: float = field(default=50, metadata={"help": "Log loss and learning rate every N steps."})
    save_total_limit: int | None = field(
        default=DEFAULT_KEEP,
        metadata={
            "help": f"Verified checkpoints of this run to keep (default {DEFAULT_KEEP}, not the Trainer's "
            "unlimited): SageMaker copies the whole checkpoint prefix to every instance at every start, so every "
            "checkpoint kept is downloaded again by every restart. The newest one and the one a run resumed from "
            "are always kept; two keep a complete older one should the newest have been cut short in S3. A "
            "number larger than the run's saves keeps every checkpoint."
        },
    )
    dataloader_num_workers: int = field(
        default=-1,
        metadata={
            "help": "Dataloader worker processes per rank; -1 = auto (min(4, CPUs per local process - 1) on GPU "
            "machines, 0 on CPU-only machines)."
        },
    )
    dataloader_pin_memory: bool = field(
        default=True, metadata={"help": "Pin host memory for faster copies to the GPU (GPU only)."}
    )
    ddp_find_unused_parameters: bool | None = field(
        default=False,
        metadata={"help": "DDP find_unused_parameters; false is faster (set true for models with unused weights)."},
    )
    disable_tqdm: bool | None = field(
        default=True, metadata={"help": "Progress bars off: PROGRESS lines report progress instead."}
    )
    predict_with_generate: bool = field(
        default=True, metadata={"help": "Summarization: generate summaries at evaluation to compute ROUGE."}
    )
    eval_at_end: bool = field(
        default=True, metadata={"help": "Evaluate on the validation data after training (when present)."}
    )
    verdict_eval_samples: int = field(
        default=200,
        metadata={
            "help": "How many validation examples (the first ones) judge whether the model learned: they are "
            "evaluated once before the first step and once more after training, and the model must beat both "
            "the strongest trivial baseline and itself before training on them by more than their noise (a "
            "bootstrap interval). 0: no verdict (the run says 'not judged')."
        },
    )
    sigterm_checkpoint: bool = field(
        default=True,
        metadata={"help": "On SIGTERM (spot interruption, stop), save a checkpoint at the next step and exit 0."},
    )
    background_saves: bool = field(
        default=True,
        metadata={
            "help": "Write checkpoints behind the training loop (hftrain/checkpoint/background.py): the loop waits "
            "only while the state is copied off the accelerator (on CPU, into memory), the files, hashes and "
            "markers follow on a thread, at most one save in flight; a checkpoint counts once every node marked "
            "it. Needs host memory for one copy of the model and optimizer state. FSDP and DeepSpeed saves "
            "(sharded state is saved through collectives) and saves with load_best_model_at_end always block."
        },
    )
    save_every_minutes: float = field(
        default=0.0,
        metadata={
            "help": "Also save a checkpoint when this many minutes have passed since the last one (whichever of "
            "save_steps and this comes first); 0 = by steps only. The pipeline sets it from checkpoint.every_minutes."
        },
    )
    progress_every_seconds: float = field(
        default=30.0,
        metadata={
            "help": f"How often global rank 0 records the step reached in checkpoint_dir/{run_history.PROGRESS_FILE}, "
            "from which "
            "the next start reports the work an interruption lost; 0 = at every step."
        },
    )
    save_interval: str = field(
        default="fixed",
        metadata={
            "help": "fixed: save_steps and save_every_minutes as given; auto: the time between checkpoints is "
            "sqrt(2 x C x M), C the blocking save time measured in this run (first save, then the running median), "
            "M the mean time between interruptions seen in this run's history, else interruption_prior_hours; "
            f"clamped to {intervals.describe_checkpoint_bounds()} minutes, every change logged (the pipeline sets it from checkpoint.every_minutes "
            "\"auto\").",
            "choices": ["fixed", "auto"],
        },
    )
    interruption_prior_hours: float = field(
        default=0.0,
        metadata={
            "help": "save_interval auto: the mean time between interruptions to assume before this run has seen "
            "one (the pipeline sets it per instance type and capacity); 0 = 24 hours."
        },
    )
    tokenized_cache: bool = field(
        default=True,
        metadata={
            "help": "Keep the tokenized data set with the checkpoints (checkpoint_dir/_tokenized/, verified by "
            "content hashes, keyed by a fingerprint of the data files, tokenizer, model config and data "
            "arguments) so that a restart loads it instead of tokenizing again."
        },
    )
    stall_minutes: str = field(
        default="auto",
        metadata={
            "help": "The stall watchdog (hftrain/stall/watchdog.py, a thread in every rank): the job ends with a failure "
            "naming the silent rank when no optimizer step ends for this many minutes; auto: max("
            "stall_floor_minutes, 20 x the median step time); off: no watchdog. The pipeline sets it from "
            "stall.minutes."
        },
    )
    stall_startup_minutes: str = field(
        default="auto",
        metadata={
            "help": "The stall watchdog's limit for start-up before the first step, evaluation and checkpoint "
            "saves (minutes without a phase change); auto: 3 x the longest start-up this run measured, at least "
            "10 min, 30 min before the first measurement (contract/startup_limit.py). The pipeline sets it from "
            "stall.startup_minutes."
        },
    )
    stall_floor_minutes: float = field(
        default=10.0,
        metadata={"help": "stall_minutes auto: the least limit for training steps, in minutes."},
    )
    stall_straggler_minutes: float = field(
        default=5.0,
        metadata={"help": "The window over which each rank's own time per step (its data and forward pass, not the "
                  "wait for its peers) is compared with the fleet's median; a rank at least 20% slower is named "
                  "in the log (hftrain/stall/stragglers.py)."},
    )
    stall_stragglers: str = field(
        default="warn",
        metadata={"help": "What a straggler (a rank at least 20% slower than the fleet's median over a window) "
                  "does: warn (named in the log, the progress line, the heartbeat and the summary) or end (the job "
                  "ends naming it, so that a new attempt runs on other instances). The pipeline sets it from "
                  "stall.stragglers.", "choices": ["warn", "end"]},
    )
    stall_section_factor: float = field(
        default=3.0,
        metadata={"help": "The stall watchdog's limit for evaluations and checkpoint saves once one was measured: "
                  "this many times the longest one so far, at least stall_section_floor_minutes (before the first "
                  "measurement: stall_startup_minutes)."},
    )
    stall_section_floor_minutes: float = field(
        default=10.0,
        metadata={"help": "The least stall limit for evaluations and checkpoint saves once one was measured, in "
                  "minutes."},
    )
    in_job_restarts: int = field(
        default=2,
        metadata={"help": "Recovery in place (hftrain/recovery/supervisor.py): how many times a job restarts its "
                  "training processes on the same instances, from the newest complete local checkpoint, after a "
                  "rank stalled, was killed by a signal or saw a peer's collective fail (the script's own "
                  "exception: once per error); 0: every failure ends the job. Under torchrun only. The pipeline "
                  "sets it from recovery.in_job_restarts."},
    )
    # --- speed defaults (see hftrain/data/batching.py and hftrain/data/packing.py) ---
    train_sampling_strategy: str = field(
        default="auto",
        metadata={
            "help": "Training batches: auto (default: length-grouped where random batches would pad at least 30% "
            "of their tokens, else random), group_by_length (batches of similar lengths, shuffled), random (the "
            "Trainer's default order), or sequential (file order). Every row is used once per epoch on every "
            "data layout either way.",
            "choices": ["auto", "group_by_length", "random", "sequential"],
        },
    )
    per_device_eval_batch_size: int = field(
        default=-1,
        metadata={
            "help": "Evaluation batch size per device; -1 = auto: twice per_device_train_batch_size, at least 8 "
            "(evaluation keeps no activations for a backward pass). Evaluation batches run longest first."
        },
    )
    padding_free: str = field(
        default="auto",
        metadata={
            "help": "Padding-free training batches (a batch's examples packed into one row with per-example "
            "positions and variable-length attention): auto (on for question answering with BERT/RoBERTa-style "
            "encoders on GPUs, off elsewhere), true (wherever the model supports it, also on CPU), or false "
            "(dynamic padding only).",
            "choices": list(PADDING_FREE),
        },
    )

    def __post_init__(self) -> None:
        _manage_output_dir(self)
        if self.precision not in PRECISIONS:
            raise ArgumentError(f"precision must be one of {PRECISIONS}, got {self.precision!r}")
        has_cuda, has_bf16 = _cuda_info()
        _pick_precision(self, has_cuda, has_bf16)
        if not has_cuda:
            _cpu_only_settings(self)
        if self.dataloader_num_workers < 0:
            self.dataloader_num_workers = _auto_workers(has_cuda)
        _check_padding_free_and_stall(self)
        if self.per_device_eval_batch_size == -1:  # auto; other values are bounded in hp_rules
            # twice the training batch, within the bound a set value has (a training batch above 2**30 would pass it)
            self.per_device_eval_batch_size = min(hp_rules.BOUNDS["per_device_eval_batch_size"]["maximum"],
                                                  max(8, 2 * self.per_device_train_batch_size))
        _dict_fields_from_kv(self)
        if self.ddp_backend == "smddp":
            _require_smddp()
        super().__post_init__()


# --- SageMakerTrainingArguments.__post_init__'s parts, in the order it calls them


def _manage_output_dir(args: SageMakerTrainingArguments) -> None:
    """output_dir is the checkpoint dir: set it, refusing any other value."""
    if args.output_dir not in (None, "", args.checkpoint_dir):
        raise ArgumentError(
            "output_dir is managed by the training code (it is the checkpoint dir); set checkpoint_dir "
            f"instead of output_dir={args.output_dir!r}"
        )
    args.output_dir = args.checkpoint_dir


def _pick_precision(args: SageMakerTrainingArguments, has_cuda: bool, has_bf16: bool) -> None:
    """precision -> the Trainer's bf16/fp16 flags, unless one of them is set explicitly."""
    if args.bf16 or args.fp16:
        return
    if args.precision == "bf16" or (args.precision == "auto" and has_bf16):
        args.bf16 = True
    elif args.precision == "fp16" or (args.precision == "auto" and has_cuda):
        args.fp16 = True


def _cpu_only_settings(args: SageMakerTrainingArguments) -> None:
    """No GPU: no pinned memory, CPU processes (unless XLA), and a fused AdamW only where torch has a CPU kernel."""
    args.dataloader_pin_memory = False
    if importlib.util.find_spec("torch_xla") is None:
        args.use_cpu = True  # accelerate sets up gloo DDP across CPU processes only with use_cpu
    if args.optim == "adamw_torch_fused" and not _cpu_fused_adamw():
        args.optim = "adamw_torch"


def _check_padding_free_and_stall(args: SageMakerTrainingArguments) -> None:
    if args.padding_free not in PADDING_FREE:  # the parser checks choices; this guards direct construction
        raise ArgumentError(f"padding_free must be one of {PADDING_FREE}, got {args.padding_free!r}")
    try:
        parse_minutes(args.stall_minutes)
        startup_limit.parse(args.stall_startup_minutes)
    except ValueError as err:
        raise ArgumentError(str(err)) from None


def _dict_fields_from_kv(args: SageMakerTrainingArguments) -> None:
    """The dict fields given as `k=v,k=v` (not JSON) -> dicts."""
    for name in ("fsdp_config", "lr_scheduler_kwargs", "gradient_checkpointing_kwargs", "accelerator_config"):
        value = getattr(args, name, None)
        if isinstance(value, str) and "=" in value and not value.lstrip().startswith("{"):
            setattr(args, name, _kv_to_dict(value))


def _require_smddp() -> None:
    try:
        import smdistributed.dataparallel.torch.torch_smddp  # noqa: F401
    except ImportError as err:
        raise ArgumentError(
            "ddp_backend smddp needs the SageMaker distributed data parallel library "
            "(smdistributed.dataparallel), which only the PyTorch <= 2.5 training images ship (ml.p4d/p4de/p5); "
            "use nccl elsewhere"
        ) from err


def _cpu_fused_adamw() -> bool:
    """torch's fused AdamW has a CPU kernel in recent releases; check instead of assuming."""
    try:
        import torch

        param = torch.nn.Parameter(torch.zeros(2))
        param.grad = torch.ones(2)
        torch.optim.AdamW([param], lr=0.1, fused=True).step()
        return True
    except Exception:
        return False


def _auto_workers(has_cuda: bool) -> int:
    if not has_cuda:
        return 0  # on CPU the workers compete with the compute for the same cores
    local = int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1)
    cpus = os.cpu_count() or 1
    return max(0, min(4, cpus // max(local, 1) - 1))


def training_args_class():
    return SageMakerTrainingArguments


def make_parser():
    from transformers import HfArgumentParser

    return HfArgumentParser((ModelArguments, DataArguments, training_args_class()))


def parse_args(argv: list[str] | None = None, environ: dict[str, str] | None = None):
    """Parse `--key value` arguments into (ModelArguments, DataArguments, SageMakerTrainingArguments).

    Unknown names, bad values, out-of-bounds values and the combinations of hp_rules (owner hftrain) raise
    ArgumentError naming the hyperparameters; transformers raises on its own combinations (ValueError).
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = make_parser()

    def _error(message: str):
        raise ArgumentError(f"bad hyperparameter: {message}")

    parser.error = _error  # argparse would print the whole usage and exit
    known = {action.dest for action in parser._actions}
    names = [item[2:].split("=", 1)[0].replace("-", "_") for item in argv if item.startswith("--")]
    unknown = sorted({name for name in names if name not in known})
    if unknown:
        raise ArgumentError(
            f"unknown hyperparameter(s): {', '.join(unknown)} (accepted names are listed in "
            "training_code/hyperparameters.json)"
        )
    for name in names:
        if name in hp_rules.UNSETTABLE:
            raise ArgumentError(f"{name} cannot be set as a hyperparameter: {hp_rules.UNSETTABLE[name]}")
    model_args, data_args, training_args = parser.parse_args_into_dataclasses(args=argv)
    values = {**vars(model_args), **vars(data_args), **vars(training_args)}
    problems = [f"{name} {message}" for name in sorted(set(hp_rules.BOUNDS) | set(names))
                if (message := hp_rules.bound_problem(name, values.get(name)))]
    facts = {"validation_data": _has_validation_data(data_args, environ)}
    problems += [message for _, message in hp_rules.broken_rules(values, facts, owners=("hftrain",))]
    problems += checkpoint_path_problems(model_args, training_args, smenv.base_dir())
    if problems:
        raise ArgumentError("; ".join(problems))
    return model_args, data_args, training_args


def _inside(path: str, root: str | Path) -> bool:
    """Whether `path` is `root` or below it, symbolic links resolved (a link cannot lead out)."""
    real, top = os.path.realpath(path), os.path.realpath(root)
    return real == top or real.startswith(top.rstrip(os.sep) + os.sep)


def checkpoint_path_problems(model_args, training_args, base: Path) -> list[str]:
    """Where checkpoints and caches may be read from: only the run's own checkpoint dir, never an input channel.

    A checkpoint holds pickles (FSDP's `.metadata`, optimizer, scheduler and RNG state) that run code when they
    are loaded, and a model cache can hold a repository's Python; whoever can write the data bucket chooses what
    the input channels hold. Prepare and the request guard refuse such paths first (lambda/spec/hp_paths.py); this is
    the job's own check, against its real base dir."""
    problems = []
    inputs = base / "input"
    checkpoint_dir = training_args.checkpoint_dir
    if _inside(checkpoint_dir, inputs):
        problems.append(f"checkpoint_dir {checkpoint_dir} is inside the job's input channels ({inputs}): checkpoints "
                        "are read only from the run's own checkpoint dir (CheckpointConfig.LocalPath)")
    resume = training_args.resume_from_checkpoint
    if resume and not (_inside(resume, checkpoint_dir) and not _inside(checkpoint_dir, resume)):
        problems.append(f"resume_from_checkpoint {resume} is outside this run's checkpoint dir {checkpoint_dir}: a "
                        "checkpoint holds pickled state that runs code when it is loaded, so only the run's own "
                        "checkpoints (restored from its checkpoints/ S3 prefix) are resumed. Leave "
                        "resume_from_checkpoint unset (the newest verified checkpoint is resumed by itself), or "
                        "name a checkpoint-<step> directory there")
    cache_dir = model_args.cache_dir
    if cache_dir and (_inside(cache_dir, inputs) or _inside(cache_dir, checkpoint_dir)):
        problems.append(f"cache_dir {cache_dir} is inside the job's input channels or checkpoint dir: a cache there "
                        "could hold another model's code; use a scratch directory such as /tmp/hf-cache")
    return problems


def _has_validation_data(data_args: DataArguments, environ: dict[str, str] | None) -> bool:
    """A validation channel, validation_path, or a Hub dataset with a validation split (as runner.load_raw)."""
    if data_args.validation_path or (data_args.dataset_name and data_args.validation_split):
        return True
    return "validation" in smenv.SageMakerEnv.from_environ(environ).channels


def _schema_type(action) -> tuple[str, list[str] | None]:
    from transformers.hf_argparser import string_to_bool

    choices = [str(c) for c in action.choices] if action.choices else None
    if isinstance(action.type, type) and issubclass(action.type, enum.Enum):
        choices = [str(member.value) for member in action.type]
    if action.nargs == "+":
        return "array", choices
    if action.type is string_to_bool:
        return "boolean", None
    if action.type is int:
        return "integer", choices
    if action.type is float:
        return "number", choices
    return "string", choices


_OBJECT_FIELDS = {
    "fsdp_config",
    "lr_scheduler_kwargs",
    "gradient_checkpointing_kwargs",
    "accelerator_config",
    "deepspeed",
    "liger_kernel_config",
}


def _defaults() -> dict[str, Any]:
    """Plain (not factory-made, JSON-representable) defaults of every argument dataclass field."""
    out: dict[str, Any] = {}
    for cls in (ModelArguments, DataArguments, training_args_class()):
        for item in dataclasses.fields(cls):
            value = item.default
            value = value.value if isinstance(value, enum.Enum) else value
            if value is not dataclasses.MISSING and (value is None or isinstance(value, bool | int | float | str)):
                out[item.name] = value
    return out


def hyperparameter_schema() -> dict[str, dict[str, Any]]:
    """name -> {"type", "help", "choices"?, "default"?, "keys"?} for every accepted hyperparameter, sorted by name.

    Bounds, combination rules and unsettable names are in hp_rules (the Lambda asset gets a copy at synth).
    """
    parser = make_parser()
    defaults = _defaults()
    schema: dict[str, dict[str, Any]] = {}
    for action in parser._actions:
        if action.dest == "help" or not action.option_strings:
            continue
        if any(opt.startswith(("--no_", "--no-")) for opt in action.option_strings):
            continue  # the `--no_x` twin of a boolean
        kind, choices = _schema_type(action)
        if action.dest in _OBJECT_FIELDS:
            kind = "object"
        help_text = " ".join(str(action.help or "").split())
        entry: dict[str, Any] = {"type": kind, "help": help_text}
        if choices:
            entry["choices"] = choices
        if action.dest in defaults:
            entry["default"] = defaults[action.dest]
        if action.dest == "task":  # what each task's evaluation logs: the Lambdas' metric definitions
            entry["metrics"] = metric_names()
            entry["columns"] = column_declarations()  # which hyperparameters name columns (data pre-flight)
            entry["verdict"] = verdicts()  # the headline metric and margin over the trivial baseline
        if action.dest == "data_format":  # file extension -> format, as the channels' files are read
            entry["extensions"] = dict(data.EXTENSIONS)
        if action.dest == "accelerator_config":  # the Trainer builds AcceleratorConfig(**value): no other keys
            from transformers.trainer_pt_utils import AcceleratorConfig

            entry["keys"] = sorted(f.name for f in dataclasses.fields(AcceleratorConfig))
        schema[action.dest] = entry
    return dict(sorted(schema.items()))


def render_schema() -> str:
    return json.dumps(hyperparameter_schema(), indent=2, sort_keys=True) + "\n"


def main(argv: list[str] | None = None) -> int:
    """`python -m hftrain.args --write` regenerates training_code/hyperparameters.json."""
    argv = sys.argv[1:] if argv is None else argv
    text = render_schema()
    if "--write" in argv:
        SCHEMA_FILE.write_text(text)
        print(f"wrote {SCHEMA_FILE} ({len(json.loads(text))} hyperparameters)")
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
