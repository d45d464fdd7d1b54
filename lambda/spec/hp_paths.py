"""Where a hyperparameter that names a file or directory may point inside the job. Pure, the same in every
environment.

A job runs with the SageMaker role, and some files it opens run code when they are loaded: a checkpoint's FSDP
`.metadata`, optimizer, scheduler and RNG state are pickles; a Hugging Face cache holds model repositories, their
Python included. Whoever may write `datasets/` or `base-models/` of the data bucket chooses what the input channels
hold, so each such hyperparameter may name only the files it is meant for (`RULES`): an absolute path in the
container's layout, at or below one of its roots, written in normal form (no `.`, `..` or empty part: what is
checked is what the job opens), or, where the rule says so, a Hugging Face Hub id (which the code-execution policy
in hyperparameters.py judges). Prepare applies it to the spec (SpecError, `Hyperparameters`), the start handlers'
request guard to the request's hyperparameters, and the training code checks the checkpoint and cache paths again
against its real base dir with links resolved (training_code/hftrain/args.py, `checkpoint_path_problems`).
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass
from typing import Any

ML = "/opt/ml"
CHECKPOINTS = f"{ML}/checkpoints"  # CheckpointConfig.LocalPath (job_requests.CHECKPOINT_LOCAL_PATH)
CHANNELS = f"{ML}/input/data"
DATA_CHANNELS = tuple(f"{CHANNELS}/{name}" for name in ("train", "validation", "test"))  # run_spec.CHANNELS
MODEL_CHANNEL = f"{CHANNELS}/model"
TOKENIZER_CHANNEL = f"{CHANNELS}/tokenizer"
SCRATCH = "/tmp"
_HUB_PART = re.compile(r"[A-Za-z0-9_.-]+")  # fullmatch


@dataclass(frozen=True)
class PathRule:
    roots: tuple[str, ...]  # the value is one of them or below it
    meant_for: str
    hub: bool = False  # a Hub id is accepted too


RULES: dict[str, PathRule] = {
    "resume_from_checkpoint": PathRule(
        (CHECKPOINTS,), "a checkpoint of this run (checkpoint-<step> in the checkpoint dir, which SageMaker restores "
                        "from the run's own checkpoints/ prefix; the newest verified one is resumed without it)"),
    "train_path": PathRule(DATA_CHANNELS, "training data in a data channel (FSx channels are mounted there too)"),
    "validation_path": PathRule(DATA_CHANNELS, "validation data in a data channel"),
    "model_name_or_path": PathRule((MODEL_CHANNEL,), "the model: a Hub id, or the `model` channel", hub=True),
    "tokenizer_name_or_path": PathRule((TOKENIZER_CHANNEL, MODEL_CHANNEL),
                                       "a tokenizer: a Hub id, or the `tokenizer` or `model` channel", hub=True),
    "dataset_name": PathRule((), "a Hub dataset name (files go in a data channel)", hub=True),
    "generation_config": PathRule((MODEL_CHANNEL,), "a generation config file in the `model` channel (a Hub id or "
                                                    "URL would be fetched at run time)"),
    "cache_dir": PathRule((SCRATCH,), "a scratch directory (a cache in a channel or the checkpoint dir could hold "
                                      "another model's code)"),
    "logging_dir": PathRule((f"{ML}/output", SCRATCH), "TensorBoard logs"),
}
# Names the pipeline owns outright: never in a spec (hyperparameters.PIPELINE) and never in a request.
MANAGED = ("checkpoint_dir", "output_dir")


def _hub_id(value: str) -> bool:
    """A Hub id as a path check sees it: one or two parts of the Hub's characters, none of them `.` or `..`
    (run_spec.HUB_ID is the full grammar of the spec's `model`)."""
    parts = value.split("/")
    return len(parts) <= 2 and all(_HUB_PART.fullmatch(p) and p not in (".", "..") for p in parts)


def _normal(value: str) -> bool:
    trimmed = value.rstrip("/") or "/"
    return posixpath.normpath(trimmed) == trimmed and not trimmed.startswith("//")


def _under(value: str, root: str) -> bool:
    trimmed = value.rstrip("/")
    return trimmed == root or trimmed.startswith(root + "/")


def problem(name: str, value: Any) -> str | None:
    """Why `value` is not what hyperparameter `name` may name, or None (also for names without a path rule)."""
    rule = RULES.get(name)
    if rule is None or value is None:
        return None
    if not isinstance(value, str):
        return f"expected a path (a string), got {type(value).__name__}"
    where = ", ".join(rule.roots)
    if not value.startswith("/"):
        if rule.hub and _hub_id(value):
            return None
        if rule.hub:
            return (f"{value[:120]!r} is neither a Hub id nor an absolute path; {name} names {rule.meant_for}"
                    + (f" (under {where})" if rule.roots else ""))
        return f"{value[:120]!r} is not an absolute path; {name} names {rule.meant_for}: under {where}"
    if not rule.roots:
        return f"{value[:120]!r} is a path; {name} names {rule.meant_for}"
    if not _normal(value):
        return (f"{value[:120]!r} is not in normal form (a '.', '..' or empty part); write the path it means, "
                f"under {where}")
    if not any(_under(value, root) for root in rule.roots):
        return f"{value[:120]!r} is outside what {name} may name ({rule.meant_for}): under {where}"
    return None


def request_problems(values: dict[str, Any]) -> list[str]:
    """The path rules and the managed names, over a request's decoded hyperparameters."""
    problems = [f"HyperParameters.{name}: set by the pipeline only (the checkpoint dir is {CHECKPOINTS})"
                for name in MANAGED if name in values]
    for name, value in values.items():
        if (why := problem(name, value)) is not None:
            problems.append(f"HyperParameters.{name}: {why}")
    return problems
