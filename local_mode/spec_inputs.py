"""What a run spec needs on this machine: generated data of the shape it reads, a tiny model of its architecture
family, and the few documented overrides that let a spec written for AWS run here (`local_overrides`).

Data: every S3 channel of the spec gets JSON lines at its prefix, with the columns the task reads (its `columns`
in the task registry, training_code/hftrain/tasks/) under the names the spec's hyperparameters give (e.g.
`text_column`, `label_column`, `question_column`) and the tokenizer stage's `text_field`; the training
channel is split into enough objects for ShardedByS3Key on every host. The rows follow learnable rules
(local_mode/synthetic.py, the function the task's `local.rows` names), so a few steps already move the metrics.

Model: a Hub id cannot be downloaded here (no network; dev has no NAT gateway either), so it is replaced by a
tiny model built from a config of the same architecture family (the Hub id's name says which: distilbert,
roberta, bart, t5, bert), uploaded to the data bucket, and the spec's `model` points at it.
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from local_mode import synthetic, task_registry

# Hub id name part -> the tiny model family built in its place (checked in this order: distilbert before bert).
FAMILY_WORDS = (("distilbert", "distilbert"), ("roberta", "roberta"), ("bart", "bart"), ("t5", "t5"),
                ("bert", "bert"))
TRAIN_ROWS, EVAL_ROWS = 320, 64

# The local run's length: a few logging windows and a final evaluation, not the spec's epochs.
LOCAL_MAX_STEPS = 20
LOCAL_LOGGING_STEPS = 5

# FSDP in local runs: the training code runs FSDP2 on CPU ranks (gloo; hftrain/parallel/fsdp.py), so an fsdp spec runs as
# written, the shipped summarization example (tiny BART, tied embeddings, 2 hosts) included. False would switch
# an fsdp spec to ddp and print FSDP_REASON (kept for a regression found in a library upgrade).
FSDP_RUNS_ON_CPU = True
FSDP_REASON = ("FSDP2 is switched off for local runs in local_mode/spec_inputs.py (FSDP_RUNS_ON_CPU); the local "
               "run uses ddp instead (same model, data and hyperparameters; no sharding)")


class InputsError(ValueError):
    """The spec asks for inputs this module cannot generate; the message says what to do instead."""


def model_family(hub_id: str) -> str | None:
    words = re.split(r"[/_.\-]", hub_id.lower())
    for word, family in FAMILY_WORDS:
        if word in words:
            return family
    return None


def _rename(rows: list[dict], names: dict[str, str]) -> list[dict]:
    return [{names.get(k, k): v for k, v in row.items()} for row in rows]


def _task(task: str) -> type:
    task_cls = task_registry.task_class(task)
    if task_cls is None or task_cls.local is None:
        raise InputsError(f"no generator for task {task!r}")
    return task_cls


def _generated_names(task_cls: type, row: dict[str, Any]) -> dict[str, str]:
    """hyperparameter -> the column of a generated row it names when unset: the name the task finds by itself (its
    default, else the first of its candidates present; Task.resolve_columns)."""
    fields = dataclasses.fields(task_cls.arguments) if task_cls.arguments else ()
    defaults = {f.name: f.default for f in fields if isinstance(f.default, str)}
    names = {}
    for col in task_cls.columns:
        found = next((name for name in (defaults.get(col.hyperparameter), *col.candidates) if name in row), None)
        if found:
            names[col.hyperparameter] = found
    return names


def _spec_names(task_cls: type, hp: dict[str, Any]) -> dict[str, str]:
    """hyperparameter -> the column name the spec gives it (the column hyperparameters it sets, not to `off`)."""
    return {col.hyperparameter: hp[col.hyperparameter] for col in task_cls.columns if hp.get(col.hyperparameter)
            and not (col.off and str(hp[col.hyperparameter]).lower() == col.off)}


def task_rows(task: str, n: int, seed: int, hyperparameters: dict[str, Any]) -> list[dict]:
    """n generated examples for the task, columns named as the spec's hyperparameters say."""
    task_cls = _task(task)
    rows = task_registry.row_generator(task_cls)(n, seed, hyperparameters)
    generated = _generated_names(task_cls, rows[0] if rows else {})
    named = _spec_names(task_cls, hyperparameters)
    return _rename(rows, {generated[hyper]: name for hyper, name in named.items() if hyper in generated})


def _main_text(task: str, row: dict[str, Any], hp: dict[str, Any]) -> str:
    """The column of a (renamed) row that a tokenizer stage's text_field is filled from (the task's
    `local.tokenizer_text`)."""
    task_cls = _task(task)
    hyperparameter = task_cls.local.tokenizer_text
    return _spec_names(task_cls, hp).get(hyperparameter) or _generated_names(task_cls, row)[hyperparameter]


def channel_key(uri_or_key: str) -> str:
    """The key prefix of a channel (`datasets/x/` or `s3://bucket/datasets/x/` -> `datasets/x/`)."""
    key = uri_or_key.split("/", 3)[3] if uri_or_key.startswith("s3://") else uri_or_key
    return key if key.endswith("/") or "." in key.rsplit("/", 1)[-1] else key + "/"


def write_spec_data(spec: dict[str, Any], root: Path, *, parts: int, train_rows: int = TRAIN_ROWS,
                    eval_rows: int = EVAL_ROWS) -> list[str]:
    """Generated data under root/<channel key prefix>; returns one line per channel written."""
    task, hp = spec["task"], spec.get("hyperparameters") or {}
    tok = spec.get("tokenizer")
    written = []
    for seed, (name, channel) in enumerate(sorted((spec.get("data") or {}).items())):
        if "s3" not in channel:
            raise InputsError(f"data.{name} reads from FSx ({channel.get('fsx')}): local mode generates S3 data "
                              "only; use an s3 prefix")
        rows = task_rows(task, train_rows if name == "train" else eval_rows, seed + 1, hp)
        if tok and tok.get("channel", "train") == name and tok.get("text_field", "text") not in rows[0]:
            text_field, source = tok.get("text_field", "text"), _main_text(task, rows[0], hp)
            rows = [{**r, text_field: r[source]} for r in rows]
        key = channel_key(channel["s3"])
        count = parts if name == "train" else 1
        folder = root / key
        for i in range(count):
            synthetic.write_jsonl(folder / f"part-{i}.jsonl", rows[i::count])
        written.append(f"data.{name}: {len(rows)} generated rows ({', '.join(rows[0])}) in {count} file(s) "
                       f"under {key}")
    return written


@dataclass
class LocalPlan:
    """A spec adjusted for this machine, what was changed (said aloud) and the inputs to upload."""

    spec: dict[str, Any]
    notes: list[str] = field(default_factory=list)
    model_dir: Path | None = None
    model_key: str | None = None


def local_overrides(spec: dict[str, Any], settings: dict[str, Any], inputs: Path) -> LocalPlan:
    """The documented local overrides of `python -m local_mode example` (docs/local_sagemaker.md), each said
    aloud in the plan's notes, in this order."""
    import copy

    plan = LocalPlan(copy.deepcopy(spec))
    bucket = settings["data_bucket"]
    env = settings.get("environment", "local")
    _substitute_hub_model(plan, bucket, env, inputs)
    _cap_instance_counts(plan, int(settings.get("max_instance_count", 1)), env)
    _allowed_instance_type(plan, settings.get("allowed_instance_types") or [], env)
    _channels_in_data_bucket(plan, bucket)
    _fsdp_on_cpu(plan)
    _short_run(plan)
    return plan


def _default_family(task: str) -> str:
    """The tiny model family the task declares (`local.model_family`); bert for a task the registry lacks."""
    task_cls = task_registry.task_class(task)
    return task_cls.local.model_family if task_cls is not None and task_cls.local is not None else "bert"


def _substitute_hub_model(plan: LocalPlan, bucket: str, env: str, inputs: Path) -> None:
    """A Hub id cannot be downloaded here: a tiny model of its family, built from a config, takes its place."""
    spec = plan.spec
    model = spec.get("model", "")
    if not isinstance(model, str) or model.startswith("s3://"):
        return
    family = model_family(model) or _default_family(spec.get("task", ""))
    plan.model_key = f"base-models/local-{family}/"
    plan.model_dir = synthetic.build_model_dir(family, inputs / plan.model_key)
    spec["model"] = f"s3://{bucket}/{plan.model_key}"
    guessed = "" if model_family(model) else f" (the name does not say its family: {family} for the task)"
    plan.notes.append(f"model: {model} is a Hugging Face Hub model, which jobs here cannot download (no network; "
                      f"{env} has no NAT gateway): substituted a tiny {family} of the same architecture family "
                      f"built from a config{guessed}, uploaded to {spec['model']}")


def _cap_instance_counts(plan: LocalPlan, limit: int, env: str) -> None:
    for path, holder in (("compute.instance_count", plan.spec.get("compute")),
                         ("tokenizer.instance_count", plan.spec.get("tokenizer"))):
        if holder and holder.get("instance_count", 1) > limit:
            plan.notes.append(f"{path}: {holder['instance_count']} is over environment {env}'s limit of {limit}: "
                              f"capped to {limit} (each instance is a process tree on this machine)")
            holder["instance_count"] = limit


def _allowed_instance_type(plan: LocalPlan, allowed: list[str], env: str) -> None:
    compute = plan.spec.get("compute") or {}
    if compute.get("instance_type") and allowed and compute["instance_type"] not in allowed:
        plan.notes.append(f"compute.instance_type: {compute['instance_type']} is not allowed in {env}: using "
                          f"{allowed[0]}")
        compute["instance_type"] = allowed[0]


def _channels_in_data_bucket(plan: LocalPlan, bucket: str) -> None:
    """Channels in another bucket read the generated data, which lives in the emulated data bucket."""
    for name, channel in (plan.spec.get("data") or {}).items():
        uri = channel.get("s3")
        if isinstance(uri, str) and uri.startswith("s3://") and uri.split("/")[2] != bucket:
            channel["s3"] = channel_key(uri)
            plan.notes.append(f"data.{name}.s3: generated data lives in the emulated data bucket: using "
                              f"{channel['s3']}")


def _fsdp_on_cpu(plan: LocalPlan) -> None:
    distribution = plan.spec.get("distribution") or {}
    if distribution.get("strategy") == "fsdp" and not FSDP_RUNS_ON_CPU:
        plan.spec["distribution"] = {"strategy": "ddp"}
        plan.notes.append(f"distribution.strategy: fsdp -> ddp: {FSDP_REASON}")


def _short_run(plan: LocalPlan) -> None:
    """A few logging windows and a final evaluation, not the spec's epochs."""
    hp = plan.spec.setdefault("hyperparameters", {})
    before = {k: hp[k] for k in ("num_train_epochs", "max_steps", "logging_steps") if k in hp}
    hp.update({"max_steps": LOCAL_MAX_STEPS, "logging_steps": LOCAL_LOGGING_STEPS})
    plan.notes.append(f"hyperparameters: max_steps={LOCAL_MAX_STEPS}, logging_steps={LOCAL_LOGGING_STEPS} for a "
                      f"short local run (the spec has {before or 'the defaults'}); everything else as written")
