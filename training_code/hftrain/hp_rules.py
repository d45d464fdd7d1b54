"""Hyperparameter rules beyond names, types and choices, declared once as data, with their interpreter.

- `BOUNDS`: numeric limits of single hyperparameters (checked when the value is set), as JSON Schema keywords;
  `BOUND_REASONS` says why, where the limit is a library's (the optimizer, the data loader, the process group).
- `RULES`: combinations the training script stops on at start-up. `owner` says who enforces a rule in the job:
  `hftrain` rules are checked by `check()` from `hftrain.args.parse_args`; `transformers` rules are the ones
  TrainingArguments raises on by itself, written down here so that the pipeline refuses such a run before any
  instance starts (tests/lambda/test_lambda_hp_equivalence.py proves this mirror against the real parser);
  `pipeline` rules are combinations the job would run but that silently undo what the run spec asks for (only
  Prepare checks them: the job cannot know whether it runs on spot).
- `UNSETTABLE`: names the parser lists but a job cannot take as a hyperparameter.
- `FACTS`: what a rule may depend on besides hyperparameters (the job knows it from its environment, the
  pipeline from the run spec).

A condition is `[left, op, right]`: `left` is a hyperparameter name, `@fact`, or an operand; `right` is a JSON
literal or an operand. Operands: `{"hp": name}`, `{"first": [...]}` (first one that is set) and
`{"first_nonzero": [...]}`. A rule applies when every `if` condition holds; then every `then` condition must
hold (an empty `then` forbids the combination). A comparison with an unset value does not hold.

Standard library only: the Lambda asset carries a byte-for-byte copy of this file, made at synth
(stacks/assets/lambda_asset.py); Prepare imports it as the top-level module `hp_rules`.
"""

from __future__ import annotations

import enum
from typing import Any

QA_DEFAULT_MAX_LENGTH = 384  # hftrain.tasks.qa.QuestionAnsweringTask.default_max_length
EVAL_STEPS = {"first_nonzero": [{"hp": "eval_steps"}, {"hp": "logging_steps"}]}  # transformers' fallback
NOT_BEST = ["save_strategy", "!=", "best"]

FACTS = {
    "validation_data": "there is validation data: a `validation` channel, validation_path, or dataset_name with "
                       "a validation_split",
    "bf16_gpu": "every instance the job may run on has a GPU with bf16 and TF32 (NVIDIA Ampere or newer)",
    "resumes": "the run counts on resuming from checkpoints: an attempt uses managed spot, or the durability "
               "watchdog's action is stop",
    "watchdog_stop": "the durability watchdog stops a job whose checkpoints stall (checkpoint.watchdog.action stop)",
}

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1  # every integer hyperparameter, besides its BOUNDS (issue 36)
BOUNDS: dict[str, dict[str, float]] = {
    "max_seq_length": {"minimum": 8},
    "doc_stride": {"minimum": 1},
    "max_target_length": {"minimum": 1},
    "val_max_target_length": {"minimum": 1},
    "n_best_size": {"minimum": 1},
    "max_answer_length": {"minimum": 1},
    "num_labels": {"minimum": 2},
    "max_train_samples": {"minimum": 1},
    "max_eval_samples": {"minimum": 1},
    "verdict_eval_samples": {"minimum": 0, "maximum": 100_000},  # two extra evaluations of this many examples
    "save_steps": {"exclusiveMinimum": 0},
    "per_device_train_batch_size": {"minimum": 1, "maximum": 2**31 - 1},
    "per_device_eval_batch_size": {"minimum": -1, "maximum": 2**31 - 1},  # -1: auto (twice the training batch, at
    # least 8, at most this maximum); 0: a rule
    "gradient_accumulation_steps": {"minimum": 1},
    "eval_accumulation_steps": {"minimum": 1},
    "dataloader_num_workers": {"minimum": -1},  # -1: auto
    "learning_rate": {"minimum": 0},
    "torch_empty_cache_steps": {"minimum": 1},
    "save_every_minutes": {"minimum": 0},  # 0: by steps only
    "progress_every_seconds": {"minimum": 0},
    "interruption_prior_hours": {"minimum": 0},
    "stall_floor_minutes": {"exclusiveMinimum": 0},
    "stall_section_factor": {"minimum": 1},
    "stall_straggler_minutes": {"exclusiveMinimum": 0},
    "stall_section_floor_minutes": {"exclusiveMinimum": 0},
    "in_job_restarts": {"minimum": 0, "maximum": 100},
    "seed": {"minimum": 0, "maximum": 2**32 - 1},  # numpy's seed range (set_seed at start-up)
    "data_seed": {"minimum": 0, "maximum": 2**32 - 1},
    "adam_beta1": {"minimum": 0, "exclusiveMaximum": 1},
    "adam_beta2": {"minimum": 0, "exclusiveMaximum": 1},
    "adam_epsilon": {"minimum": 0},
    "neftune_noise_alpha": {"minimum": 0},
    "num_train_epochs": {"maximum": 1_000_000},
    "preprocessing_num_workers": {"minimum": 0},
    "dataloader_prefetch_factor": {"minimum": 1},
    "ddp_timeout": {"minimum": 1, "maximum": 2**31 - 1},
    "ddp_bucket_cap_mb": {"maximum": 2**31 - 1},
    "save_total_limit": {"minimum": 1},
    "label_smoothing_factor": {"minimum": 0, "maximum": 1},
}
BOUND_REASONS: dict[str, str] = {
    "adam_beta1": "torch's Adam/AdamW refuse a beta outside [0, 1) when the optimizer is created",
    "adam_beta2": "torch's Adam/AdamW refuse a beta outside [0, 1) when the optimizer is created",
    "adam_epsilon": "torch's Adam/AdamW refuse a negative epsilon when the optimizer is created",
    "neftune_noise_alpha": "NEFTune draws its noise from [-alpha, alpha]: a negative alpha fails at the first step",
    "num_train_epochs": "epochs times steps per epoch must stay a finite number of steps",
    "preprocessing_num_workers": "datasets' map refuses a negative num_proc",
    "dataloader_prefetch_factor": "torch's DataLoader refuses a prefetch factor below 1 with workers",
    "ddp_timeout": "the process group's timeout: 0 or less times out at once, more overflows torch's millisecond "
                   "clock",
    "ddp_bucket_cap_mb": "torch's DDP reducer takes the bucket size in bytes as a 64-bit integer",
    "save_total_limit": "transformers reads 0 or less as no limit; a number larger than the run's saves keeps every "
                        "checkpoint",
    "per_device_train_batch_size": "torch indexes a batch with 32-bit sizes on the GPU; the automatic evaluation "
                                   "batch is twice this one",
    "per_device_eval_batch_size": "torch indexes a batch with 32-bit sizes on the GPU",
    "label_smoothing_factor": "the target mixes (1 - factor) x the label with factor x the uniform distribution: "
                              "outside [0, 1] a class gets a negative weight and the loss has no lower bound",
}

UNSETTABLE = {
    "deepspeed": "DeepSpeed is not installed with the training code; use distribution.strategy fsdp or ddp",
    "liger_kernel_config": "the argument parser cannot read a dict for it",
    "parallelism_config": "the argument parser cannot build a ParallelismConfig from text",
}

RULES: list[dict[str, Any]] = [
    {"id": "fp16-and-bf16", "owner": "transformers", "fields": ["bf16", "fp16"],
     "if": [["fp16", "==", True], ["bf16", "==", True]], "then": [],
     "message": "fp16 and bf16 cannot both be true; keep one (or neither: precision picks one)"},
    {"id": "fp16-and-bf16-full-eval", "owner": "transformers", "fields": ["bf16_full_eval", "fp16_full_eval"],
     "if": [["fp16_full_eval", "==", True], ["bf16_full_eval", "==", True]], "then": [],
     "message": "fp16_full_eval and bf16_full_eval cannot both be true"},
    {"id": "load-best-strategies", "owner": "transformers",
     "fields": ["load_best_model_at_end", "eval_strategy", "save_strategy"],
     "if": [["load_best_model_at_end", "==", True], NOT_BEST],
     "then": [["save_strategy", "==", {"hp": "eval_strategy"}]],
     "message": "load_best_model_at_end needs eval_strategy equal to save_strategy (eval_strategy={eval_strategy}, "
                "save_strategy={save_strategy}); set eval_strategy to steps and send validation data"},
    {"id": "load-best-steps", "owner": "transformers", "fields": ["eval_steps", "load_best_model_at_end", "save_steps"],
     "if": [["load_best_model_at_end", "==", True], NOT_BEST, ["eval_strategy", "==", "steps"],
            ["save_strategy", "==", "steps"]],
     "then": [["save_steps", "multiple of", EVAL_STEPS]],  # (transformers' ratio case needs save_steps < 1: never)
     "message": "load_best_model_at_end: save_steps={save_steps} (the checkpoint interval) must be a whole multiple "
                "of eval_steps={eval_steps} (logging_steps={logging_steps} when eval_steps is unset)"},
    # issue 36, finding 5: under FSDP transformers loads the best checkpoint with torch DCP (its .metadata is a pickle)
    # outside the checkpoint contract's verification (checkpoint/resume.py verifies what a resume loads, not this)
    {"id": "no-best-model-under-fsdp", "owner": "hftrain", "fields": ["load_best_model_at_end", "fsdp"],
     "if": [["load_best_model_at_end", "==", True]], "then": [["fsdp", "in", [None, "", []]]],
     "message": "load_best_model_at_end is not supported under FSDP (fsdp={fsdp}): transformers would load the best "
                "checkpoint with torch DCP, whose .metadata is a pickle, outside the checkpoint verification; set "
                "load_best_model_at_end false (the final model is the last step's) or use distribution.strategy ddp"},
    {"id": "plateau-needs-eval", "owner": "transformers", "fields": ["lr_scheduler_type", "eval_strategy"],
     "if": [["lr_scheduler_type", "==", "reduce_lr_on_plateau"]], "then": [["eval_strategy", "!=", "no"]],
     "message": "lr_scheduler_type reduce_lr_on_plateau needs an eval_strategy other than no"},
    {"id": "logging-steps-nonzero", "owner": "transformers", "fields": ["logging_steps", "logging_strategy"],
     "if": [["logging_strategy", "==", "steps"]], "then": [["logging_steps", "!=", 0]],
     "message": "logging_strategy steps needs a non-zero logging_steps"},
    {"id": "logging-steps-whole", "owner": "transformers", "fields": ["logging_steps"],
     "if": [["logging_strategy", "==", "steps"], ["logging_steps", ">", 1]], "then": [["logging_steps", "whole"]],
     "message": "logging_steps={logging_steps}: above 1 it counts steps and must be a whole number"},
    {"id": "eval-steps-needed", "owner": "transformers", "fields": ["eval_steps", "logging_steps", "eval_strategy"],
     "if": [["eval_strategy", "==", "steps"], ["eval_steps", "in", [None, 0]]], "then": [["logging_steps", ">", 0]],
     "message": "eval_strategy steps needs eval_steps, or a positive logging_steps to take it from"},
    {"id": "eval-steps-whole", "owner": "transformers", "fields": ["eval_steps", "logging_steps"],
     "if": [["eval_strategy", "==", "steps"], [EVAL_STEPS, ">", 1]], "then": [[EVAL_STEPS, "whole"]],
     "message": "eval_steps={eval_steps} (logging_steps={logging_steps} when unset): above 1 it counts steps and "
                "must be a whole number"},
    {"id": "save-steps-whole", "owner": "transformers", "fields": ["save_steps"],
     "if": [["save_strategy", "==", "steps"], ["save_steps", ">", 1]], "then": [["save_steps", "whole"]],
     "message": "save_steps={save_steps}: above 1 it counts steps and must be a whole number"},
    {"id": "warmup-not-negative", "owner": "transformers", "fields": ["warmup_steps", "warmup_ratio"],
     "if": [], "then": [[{"first": [{"hp": "warmup_ratio"}, {"hp": "warmup_steps"}]}, ">=", 0]],
     "message": "warmup_steps must not be negative (warmup_ratio, when set, replaces it)"},
    {"id": "prefetch-needs-workers", "owner": "transformers",
     "fields": ["dataloader_prefetch_factor", "dataloader_num_workers"],
     "if": [["dataloader_prefetch_factor", "!=", None]], "then": [["dataloader_num_workers", "!=", 0]],
     "message": "dataloader_prefetch_factor needs dataloader workers (dataloader_num_workers is 0)"},
    {"id": "tf32-needs-ampere", "owner": "transformers", "fields": ["tf32"],
     "if": [["tf32", "==", True]], "then": [["@bf16_gpu", "==", True]],
     "message": "tf32 needs an NVIDIA Ampere or newer GPU on every instance the run may use"},
    {"id": "bf16-needs-ampere", "owner": "transformers", "fields": ["bf16"],
     "if": [["bf16", "==", True]], "then": [["@bf16_gpu", "==", True]],
     "message": "bf16 needs an NVIDIA Ampere or newer GPU on every instance the run may use; use fp16 or "
                "precision auto"},
    {"id": "bf16-eval-needs-ampere", "owner": "transformers", "fields": ["bf16_full_eval"],
     "if": [["bf16_full_eval", "==", True]], "then": [["@bf16_gpu", "==", True]],
     "message": "bf16_full_eval needs an NVIDIA Ampere or newer GPU on every instance the run may use"},
    {"id": "precision-bf16-needs-ampere", "owner": "transformers", "fields": ["precision"],
     "if": [["precision", "==", "bf16"], ["fp16", "!=", True]], "then": [["@bf16_gpu", "==", True]],
     "message": "precision bf16 needs an NVIDIA Ampere or newer GPU on every instance the run may use; use "
                "precision auto"},
    {"id": "checkpoints-for-resume", "owner": "pipeline", "fields": ["save_strategy"],
     "if": [["save_strategy", "==", "no"], ["@resumes", "==", True]], "then": [],
     "message": "save_strategy no turns off the checkpoints every checkpoint.every_steps steps that a spot restart "
                "or a watchdog stop resumes from; leave save_strategy at steps (set checkpoint.every_steps high to "
                "save by checkpoint.every_minutes only)"},
    {"id": "stop-needs-sigterm-checkpoint", "owner": "pipeline", "fields": ["sigterm_checkpoint"],
     "if": [["sigterm_checkpoint", "==", False], ["@watchdog_stop", "==", True]], "then": [],
     "message": "checkpoint.watchdog.action stop stops the job so that the next attempt resumes from a checkpoint "
                "the job saves when stopped; sigterm_checkpoint false saves none (the work since the last one is "
                "lost at every stop); leave sigterm_checkpoint on or use watchdog action warn"},
    {"id": "no-save-on-each-node", "owner": "hftrain", "fields": ["save_on_each_node"],
     "if": [["save_on_each_node", "==", True]], "then": [],
     "message": "save_on_each_node would make every node write files of the same name into the shared "
                "checkpoint prefix; leave it off"},
    {"id": "eval-needs-validation-data", "owner": "hftrain",
     "fields": ["eval_strategy", "validation_path", "dataset_name"],
     "if": [["eval_strategy", "!=", "no"]], "then": [["@validation_data", "==", True]],
     "message": "eval_strategy {eval_strategy} needs validation data: send a validation channel (or set "
                "validation_path), or leave eval_strategy at no"},
    {"id": "eval-batch-size-nonzero", "owner": "hftrain", "fields": ["per_device_eval_batch_size"],
     "if": [["per_device_eval_batch_size", "==", 0]], "then": [],
     "message": "per_device_eval_batch_size must be >= 1, or -1 for auto (twice per_device_train_batch_size, at "
                "least 8)"},
    {"id": "doc-stride-below-length", "owner": "hftrain", "fields": ["doc_stride", "max_seq_length"],
     "if": [["task", "==", "question-answering"]],
     "then": [["doc_stride", "<", {"first": [{"hp": "max_seq_length"}, QA_DEFAULT_MAX_LENGTH]}]],
     "message": f"doc_stride ({{doc_stride}}) must be smaller than max_seq_length ({{max_seq_length}}; "
                f"{QA_DEFAULT_MAX_LENGTH} when unset)"},
]


def _plain(value: Any) -> Any:
    return value.value if isinstance(value, enum.Enum) else value


def _operand(operand: Any, values: dict[str, Any], facts: dict[str, Any]) -> Any:
    if isinstance(operand, str):
        return facts.get(operand[1:]) if operand.startswith("@") else _plain(values.get(operand))
    if isinstance(operand, dict) and "hp" in operand:
        return _plain(values.get(operand["hp"]))
    if isinstance(operand, dict):
        nonzero = "first_nonzero" in operand
        for item in operand.get("first_nonzero", operand.get("first", [])):
            value = _operand(item, values, facts)
            if value is not None and not (nonzero and value == 0):
                return value
        return None
    return operand


def _literal(operand: Any, values: dict[str, Any], facts: dict[str, Any]) -> Any:
    return operand if isinstance(operand, str | list) else _operand(operand, values, facts)


def holds(condition: list[Any], values: dict[str, Any], facts: dict[str, Any]) -> bool:
    left = _operand(condition[0], values, facts)
    op = condition[1]
    right = _literal(condition[2], values, facts) if len(condition) > 2 else None
    try:
        if op == "==":
            return left == right
        if op == "!=":
            return left != right
        if op == "in":
            return left in right
        if left is None or (op != "whole" and right is None) or isinstance(left, bool | str):
            return False
        if op == "whole":
            return float(left).is_integer()
        if op == "multiple of":
            return right != 0 and left % right == 0
        return {"<": left < right, "<=": left <= right, ">": left > right, ">=": left >= right}[op]
    except (TypeError, ValueError, KeyError):
        return False


def bound_problem(name: str, value: Any) -> str | None:
    """The message when `value` (set) is outside BOUNDS[name], else None."""
    limits = BOUNDS.get(name, {})
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return None
    # A whole number beyond int64 (an integer, or a float transformers turns into one, e.g. logging_steps 1e300).
    if (value == value and abs(value) != float("inf") and value == int(value)
            and not INT64_MIN <= int(value) <= INT64_MAX):
        return (f"must fit a 64-bit integer ({INT64_MIN} to {INT64_MAX}), got {value}: torch, numpy and the "
                "step arithmetic store it in one")
    # Written as "not inside" so that NaN (which argparse's float() reads) is outside every bound.
    if "minimum" in limits and not value >= limits["minimum"]:
        return _because(name, f"must be >= {limits['minimum']}, got {value}")
    if "exclusiveMinimum" in limits and not value > limits["exclusiveMinimum"]:
        return _because(name, f"must be > {limits['exclusiveMinimum']}, got {value}")
    if "maximum" in limits and not value <= limits["maximum"]:
        return _because(name, f"must be <= {limits['maximum']}, got {value}")
    if "exclusiveMaximum" in limits and not value < limits["exclusiveMaximum"]:
        return _because(name, f"must be < {limits['exclusiveMaximum']}, got {value}")
    return None


def _because(name: str, message: str) -> str:
    return f"{message} ({BOUND_REASONS[name]})" if name in BOUND_REASONS else message


class _Shown(dict):
    def __missing__(self, key: str) -> str:
        return "unset"


def broken_rules(values: dict[str, Any], facts: dict[str, Any],
                 owners: tuple[str, ...] = ("hftrain", "transformers", "pipeline")) -> list[tuple[dict[str, Any], str]]:
    """(rule, message) for every rule of `owners` that `values` (after defaults) break."""
    shown = _Shown({k: _plain(v) for k, v in values.items() if v is not None})
    broken = []
    for rule in RULES:
        applies = rule["owner"] in owners and all(holds(c, values, facts) for c in rule["if"])
        if applies and not (rule["then"] and all(holds(c, values, facts) for c in rule["then"])):
            broken.append((rule, rule["message"].format_map(shown)))
    return broken
