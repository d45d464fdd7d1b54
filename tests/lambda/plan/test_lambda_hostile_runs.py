"""Hostile run specs, third round (issue 24): specs Prepare accepted although the job cannot run them or would
silently undo them, and S3 locations that read more than they name. One generator per class of defect; each test
walks its class's cases, collects every wrong answer, and records how many cases it tried (printed at the end of
the session: tests/lambda/conftest.py, "hostile run specs: cases per class").

Classes (the issue's):
- start-refusals: numeric hyperparameter values the libraries refuse when the job starts (torch's Adam, NEFTune,
  the step arithmetic, datasets' map, torch's DataLoader and process group, DDP's reducer), judged by those
  libraries themselves (slow: imports torch, transformers, datasets);
- argv-values: string values no command-line argument can carry (NUL), line breaks, and object values given as
  JSON text (accepted, re-encoded without line breaks);
- gpus-per-host: compute.processes_per_host against the GPUs of the first attempt and of every fallback option,
  bf16 hyperparameters against every attempt's GPUs, each reported also when another field fails;
- undone-checkpoints: save_total_limit <= 0, save_strategy no or sigterm_checkpoint false with spot or the
  watchdog's stop action;
- s3-locations: a prefix without '/' reading its siblings, '.', '..', '//' and '%2F' segments.
"""

from __future__ import annotations

import copy
import itertools
import json
import math
import random
from typing import Any

import pytest
from testkit.lambdas import SETTINGS, settings_dict

from hfsm_lambda import aws
from hfsm_lambda.errors import PreflightError, SpecError
from hfsm_lambda.plan import instance_types, job_requests
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.settings import Settings
from hfsm_lambda.spec import hyperparameters

BASE: dict[str, Any] = {"version": 1, "name": "hostile", "task": "text-classification", "model": "bert-base-uncased",
                        "data": {"train": {"s3": "datasets/h/train/"}, "validation": {"s3": "datasets/h/val/"}},
                        "spot": {"enabled": False}}
TYPES = ("ml.g5.2xlarge", "ml.g5.12xlarge", "ml.g6.2xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.g4dn.12xlarge",
         "ml.p3.16xlarge", "ml.g6e.48xlarge")
PLAIN = Settings.from_dict(settings_dict(allowed_instance_types=list(TYPES), max_instance_count=8))


def spec_with(**changes: Any) -> dict[str, Any]:
    spec = copy.deepcopy(BASE)
    spec.update(copy.deepcopy(changes))
    return spec


def verdict(spec: dict[str, Any], settings: Settings = PLAIN) -> list[str]:
    """Prepare's problems (SpecError or PreflightError) for a spec, [] when it would start."""
    try:
        prepare_run(copy.deepcopy(spec), settings)
    except (SpecError, PreflightError) as err:
        return list(err.problems)
    return []


def about(problems: list[str], path: str) -> list[str]:
    return [p for p in problems if p.startswith(f"{path}: ") or p.startswith(f"{path}.")]


def report(wrong: list[str], cases: int) -> None:
    assert not wrong, f"{len(wrong)} of {cases} cases wrong, e.g.:\n" + "\n".join(wrong[:8])


# --- start-refusals: what the libraries refuse when the job starts ----------------------------------------------
def _optimizer(name: str, value: float) -> None:
    import torch
    from transformers import Trainer, TrainingArguments

    args = TrainingArguments(output_dir="/tmp/unused", use_cpu=True, optim="adamw_torch", **{name: value})
    cls, kwargs = Trainer.get_optimizer_cls_and_kwargs(args)
    cls([torch.nn.Parameter(torch.zeros(2))], **kwargs)


def _neftune(alpha: float) -> None:
    import torch
    from transformers.integrations.neftune import activate_neftune

    class Tiny(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = torch.nn.Embedding(8, 4)

        def get_input_embeddings(self) -> torch.nn.Module:
            return self.embed

    model = Tiny().train()
    activate_neftune(model, alpha)
    model.embed(torch.tensor([[1, 2, 3]]))


def _epochs(epochs: float) -> None:
    # The step arithmetic of hftrain.run.runner.TrainingRun.train and of the Trainer (max_steps unset), for a data set
    # of up to 10**9 optimizer steps per epoch.
    for steps_per_epoch in (1, 1000, 10**9):
        math.ceil(epochs * steps_per_epoch)


# These start worker processes or threads: they run in a fresh interpreter of their own (a fork of the test process,
# with whatever threads other tests left in it, could hang), all values in one go. The child ends with os._exit, its
# process groups kept alive: tearing down a gloo group joins its worker threads, which hung CI's test process once.
IN_CHILD = """
import json, os, sys
from datetime import timedelta
KEEP = []
def num_proc(workers):
    import datasets
    datasets.disable_progress_bars()
    datasets.Dataset.from_dict({"a": [1]}).map(lambda row: row, num_proc=workers)
def prefetch(factor):
    from torch.utils.data import DataLoader
    iterator = iter(DataLoader(list(range(4)), batch_size=2, num_workers=1, prefetch_factor=factor))
    next(iterator)
    del iterator
def process_group(timeout=None, bucket_cap_mb=None):
    # A one-process gloo group over a TCP store as torchrun's env:// sets up, and a DDP model in it.
    import torch
    import torch.distributed as dist
    seconds = timedelta(seconds=1800 if timeout is None else timeout)
    store = dist.TCPStore("127.0.0.1", 0, 1, True, timeout=seconds)
    KEEP.append(store)
    dist.init_process_group("gloo", store=store, rank=0, world_size=1, timeout=seconds)
    try:
        model = torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(2, 2),
                                                          bucket_cap_mb=25 if bucket_cap_mb is None else bucket_cap_mb)
        KEEP.append(model)
        model(torch.ones(1, 2)).sum().backward()
    finally:
        KEEP.append(dist.group.WORLD)
        dist.destroy_process_group()
CALLS = {"preprocessing_num_workers": num_proc, "dataloader_prefetch_factor": prefetch,
         "ddp_timeout": lambda v: process_group(timeout=int(v)),
         "ddp_bucket_cap_mb": lambda v: process_group(bucket_cap_mb=int(v))}
out = []
for name, value in json.loads(sys.argv[1]):
    try:
        CALLS[name](value)
        out.append("")
    except Exception as err:
        out.append(f"{type(err).__name__}: {str(err).splitlines()[0][:120] if str(err) else ''}")
print(json.dumps(out), flush=True)
os._exit(0)
"""


def _in_child(cases: list[tuple[str, Any]]) -> Any:
    """Starts the child; call the result for {case: refusal} (it runs while the test does the rest)."""
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", IN_CHILD, json.dumps(cases)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)

    def answers() -> dict[tuple[str, Any], str]:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err[-2000:]
        return dict(zip(cases, json.loads(out.strip().splitlines()[-1]), strict=True))

    return answers


# hyperparameter -> (the library call of a job's start that takes it, values around its edges)
START: dict[str, tuple[Any, list[Any]]] = {
    "adam_beta1": (lambda v: _optimizer("adam_beta1", v), [-1.0, -0.1, -1e-05, 0, 0.5, 0.9, 0.999999, 1, 1.5, 3]),
    "adam_beta2": (lambda v: _optimizer("adam_beta2", v), [-0.5, 0, 0.95, 0.999, 1, 1.000001, 7]),
    "adam_epsilon": (lambda v: _optimizer("adam_epsilon", v), [-1.0, -1e-08, 0, 1e-08, 0.1, 5]),
    "neftune_noise_alpha": (_neftune, [-5, -0.5, -1e-05, 0, 0.1, 5, 15]),
    "num_train_epochs": (_epochs, [1, 3, 2.5, 1000, 1e6, 1e300, 1.7e308]),
    "preprocessing_num_workers": (None, [-5, -1, 0, 1]),  # IN_CHILD
    "dataloader_prefetch_factor": (None, [-3, -1, 0, 1, 2]),
    "ddp_timeout": (None, [-5, 0, 1, 1800, 10**12, 10**13, 10**20]),  # IN_CHILD
    "ddp_bucket_cap_mb": (None, [25, 2**40, 10**20, 10**29]),  # IN_CHILD
}
# Prepare may refuse more than the library (a bound with a margin: documented in BOUND_REASONS), never less.
MARGIN = {"num_train_epochs", "ddp_timeout", "ddp_bucket_cap_mb"}


def _library_refuses(call: Any, name: str, value: Any) -> str:
    """What the library says to `value` as the job's argument parser hands it over (typed by the schema)."""
    kind = hyperparameters.schema()[name]["type"]
    try:
        call(float(value) if kind == "number" else int(value) if kind == "integer" else value)
    except Exception as err:  # noqa: BLE001 - any refusal counts; its text is shown
        return f"{type(err).__name__}: {str(err).splitlines()[0][:120] if str(err) else ''}"
    return ""


@pytest.mark.slow
def test_start_refusals_are_refused_in_prepare(hostile_cases):
    pytest.importorskip("transformers")
    cases = [(name, value) for name, (_, values) in START.items() for value in values]
    rng = random.Random(24)  # a few random values per bounded number besides the edges
    cases += [(name, rng.uniform(-2, 2)) for name in ("adam_beta1", "adam_beta2", "adam_epsilon",
                                                      "neftune_noise_alpha") for _ in range(6)]
    wrong = []
    child = _in_child([(name, value) for name, value in cases if START[name][0] is None])
    judged = {(name, value): _library_refuses(START[name][0], name, value) for name, value in cases
              if START[name][0] is not None}
    judged.update(child())
    for name, value in cases:
        hps = {name: value, **({"dataloader_num_workers": 2} if name == "dataloader_prefetch_factor" else {})}
        refused = about(verdict(spec_with(hyperparameters=hps)), f"hyperparameters.{name}")
        library = judged[(name, value)]
        if library and not refused:
            wrong.append(f"{name}={value!r}: the job refuses it at start ({library}); Prepare accepts it")
        elif refused and not library and name not in MARGIN:
            wrong.append(f"{name}={value!r}: the library takes it; Prepare refuses: {refused[0]}")
    hostile_cases["start-refusals"] += len(cases)
    report(wrong, len(cases))


# --- argv-values --------------------------------------------------------------------------------------------------
STRING_HPS = ("text_column", "label_column", "run_name", "train_split", "optim_args", "label_names")
OBJECT_HPS = ("lr_scheduler_kwargs", "gradient_checkpointing_kwargs")


def _text_cases() -> list[tuple[str, str, bool]]:
    """(hyperparameter, value, refused?): NUL and line breaks anywhere in a string value."""
    out = []
    for name, (where, char) in itertools.product(STRING_HPS, itertools.product(
            ("start", "middle", "end"), ("\x00", "\n", "\r", "\x85", "\u2028", "\u2029"))):
        word = "col"
        value = {"start": char + word, "middle": word[:1] + char + word[1:], "end": word + char}[where]
        out.append((name, value, True))
    out += [(name, "a b\tc", False) for name in STRING_HPS]  # tabs and spaces are fine
    return out


def _object_texts() -> list[str]:
    pretty = [json.dumps(obj, indent=indent) for obj in ({"power": 2.0}, {"power": 1.0, "lr_end": 1e-07})
              for indent in (1, 2, "\t")]
    return pretty + ['{\r\n"power": 2\r\n}', '{"power":\n 3}']


def test_argv_values(hostile_cases):
    wrong, count = [], 0
    for name, value, refused in _text_cases():
        count += 1
        problems = about(verdict(spec_with(hyperparameters={name: value})), f"hyperparameters.{name}")
        if bool(problems) != refused:
            wrong.append(f"{name}={value!r}: {'accepted' if not problems else problems[0]}")
    for name, text in itertools.product(OBJECT_HPS[:1], _object_texts()):
        count += 1
        spec = spec_with(hyperparameters={name: text})
        problems = verdict(spec)
        if problems:
            wrong.append(f"{name}={text!r}: refused: {problems[0]}")
            continue
        sent = job_requests.training_request(prepare_run(spec, PLAIN), PLAIN, 0)["HyperParameters"][name]
        decoded = json.loads(sent)
        if "\\n" in sent or "\\r" in sent or json.loads(decoded) != json.loads(text) or decoded != json.dumps(
                json.loads(text), sort_keys=True, separators=(",", ":")):
            wrong.append(f"{name}={text!r}: sent as {sent!r}, not as compact JSON without line breaks")
    hostile_cases["argv-values"] += count
    report(wrong, count)


# --- gpus-per-host ---------------------------------------------------------------------------------------------
def test_processes_per_host_and_bf16_against_every_attempt(hostile_cases):
    wrong, count = [], 0
    rng = random.Random(2024)
    combos = [(first, options, procs) for first in TYPES for procs in (1, 2, 4, 8, 9)
              for options in ([], [rng.choice(TYPES)], rng.sample(TYPES, 2))]
    for (first, options, procs), broken_other in itertools.product(combos, (False, True)):
        count += 1
        wrong += _processes_per_host_wrongs(first, options, procs, broken_other)
    for first, fallback, hp in itertools.product(TYPES, TYPES, ("bf16", "tf32", "bf16_full_eval")):
        for broken_other in (False, True):
            count += 1
            wrong += _bf16_wrongs(first, fallback, hp, broken_other)
    hostile_cases["gpus-per-host"] += count
    report(wrong, count)


def _processes_per_host_wrongs(first: str, options: list[str], procs: int, broken_other: bool) -> list[str]:
    """What Prepare got wrong about processes_per_host=procs on `first` with fallback `options`: each attempt's
    instance type with fewer GPUs is reported (and no other), also when the description fails too."""
    wrong = []
    spec = spec_with(compute={"instance_type": first, "instance_count": 2, "processes_per_host": procs},
                     fallback={"options": [{"instance_type": t} for t in options]})
    if broken_other:  # another field fails too: the processes problem is still reported
        spec["description"] = "bad\x00description"
    problems = verdict(spec)
    attempts = [("compute.processes_per_host", first)] + [
        (f"fallback.options[{i}].instance_type", t) for i, t in enumerate(options)]
    for path, instance_type in attempts:
        too_many = procs > instance_types.gpus(instance_type)
        said = [p for p in about(problems, path) if "GPU" in p]
        if too_many != bool(said):
            wrong.append(f"{first} + fallback {options}, processes_per_host={procs}"
                         f"{' (and a bad description)' if broken_other else ''}: {path} "
                         f"{'not reported' if too_many else 'wrongly reported: ' + said[0]}")
    if broken_other and not about(problems, "description"):
        wrong.append(f"{first}: the description problem was not reported")
    return wrong


def _bf16_wrongs(first: str, fallback: str, hp: str, broken_other: bool) -> list[str]:
    """What Prepare got wrong about hyperparameter `hp` (bf16, tf32, ...) on `first` with fallback `fallback`: refused
    exactly when an attempt's type lacks bf16, naming every such type, also when a tag fails too."""
    spec = spec_with(compute={"instance_type": first}, fallback={"options": [{"instance_type": fallback}]},
                     hyperparameters={hp: True})
    if broken_other:
        spec["tags"] = {"aws:reserved": "x"}
    problems = about(verdict(spec), f"hyperparameters.{hp}")
    old = [t for t in (first, fallback) if not instance_types.has_bf16(t)]
    if bool(old) != bool(problems) or (problems and not all(t in problems[0] for t in old)):
        return [f"{hp} on {first} with fallback {fallback}{' (and a bad tag)' if broken_other else ''}: "
                f"{problems[0] if problems else 'accepted'}"]
    return []


# --- undone-checkpoints ----------------------------------------------------------------------------------------
def test_what_silently_undoes_the_checkpoints_is_refused(hostile_cases):
    wrong, count = [], 0
    for limit in (-100, -2, -1, 0, 1, 2, 5):
        count += 1
        problems = about(verdict(spec_with(hyperparameters={"save_total_limit": limit})),
                         "hyperparameters.save_total_limit")
        if (limit < 1) != bool(problems):
            wrong.append(f"save_total_limit={limit}: {problems[0] if problems else 'accepted'}")
    for spot, fallback_spot, action, strategy, sigterm in itertools.product(
            (False, True), (None, True, False), ("warn", "stop", "off"), ("steps", "no", "epoch"),
            (True, False, None)):
        count += 1
        hps: dict[str, Any] = {"save_strategy": strategy}
        if sigterm is not None:
            hps["sigterm_checkpoint"] = sigterm
        option = {"instance_type": "ml.g5.2xlarge", **({} if fallback_spot is None else {"spot": fallback_spot})}
        spec = spec_with(spot={"enabled": spot}, fallback={"options": [option], "max_attempts": 3},
                         checkpoint={"watchdog": {"action": action}}, hyperparameters=hps)
        problems = verdict(spec)
        resumes = spot or fallback_spot is True or action == "stop"
        expect_strategy = strategy == "no" and resumes
        expect_sigterm = sigterm is False and action == "stop"
        got_strategy = bool(about(problems, "hyperparameters.save_strategy"))
        got_sigterm = bool(about(problems, "hyperparameters.sigterm_checkpoint"))
        if (expect_strategy, expect_sigterm) != (got_strategy, got_sigterm):
            wrong.append(f"spot={spot} fallback spot={fallback_spot} watchdog={action} save_strategy={strategy} "
                         f"sigterm_checkpoint={sigterm}: {problems or 'accepted'}")
    hostile_cases["undone-checkpoints"] += count
    report(wrong, count)


# --- s3-locations -----------------------------------------------------------------------------------------------
def _segment_cases() -> list[tuple[str, str]]:
    """(location, what is wrong) with '.', '..', '//' or a percent escape in some segment of the key."""
    out = []
    for base, bad in itertools.product(("datasets/h/train", "s3://hfsm-dev-data/datasets/h/train"),
                                       ("./", "../", "/", "%2F", "%2f", "%2E%2E/", "%20")):
        head, _, tail = base.rpartition("/")
        out.append((f"{head}/{bad}{tail}/", bad))
        out.append((f"{base}/{bad}", bad))
    return out


def test_s3_segments_are_refused_with_the_reason(hostile_cases):
    wrong, count = [], 0
    for location, bad in _segment_cases():
        for field in ("train", "validation"):
            count += 1
            data = copy.deepcopy(BASE["data"])
            data[field] = {"s3": location}
            problems = about(verdict(spec_with(data=data)), f"data.{field}.s3")
            if not problems:
                wrong.append(f"data.{field}.s3={location!r} ({bad!r}): accepted")
    for model in ("s3://hfsm-dev-artifacts/models/./base/", "s3://hfsm-dev-artifacts/models//base/",
                  "s3://hfsm-dev-artifacts/models/x/../base/", "s3://hfsm-dev-artifacts/models/base/.."):
        count += 1
        if not about(verdict(spec_with(model=model)), "model"):
            wrong.append(f"model={model!r}: accepted")
    hostile_cases["s3-locations"] += count
    report(wrong, count)


def test_a_prefix_reads_only_its_own_folder(aws_account, hostile_cases):
    """What the job's channel reads (S3Prefix: every key starting with S3Uri, as SageMaker lists them) is the
    folder the spec names, never a sibling that starts with the same characters."""
    s3 = aws.client("s3")
    rng = random.Random(7)
    wrong, count = [], 0
    for i in range(12):
        name = f"set{i}" + rng.choice(["", "_a", "-b"])
        keys = [f"datasets/{name}/part-{j}.jsonl" for j in range(2)]
        siblings = [f"datasets/{name}{suffix}/part-0.jsonl" for suffix in ("-other", "2", ".bak", "_v2")]
        for key in keys + siblings + [f"datasets/{name}-val/part-0.jsonl"]:
            s3.put_object(Bucket=SETTINGS["data_bucket"], Key=key, Body=b'{"text": "x", "label": 0}\n')
        for given in (f"datasets/{name}", f"s3://{SETTINGS['data_bucket']}/datasets/{name}"):
            count += 1
            spec = spec_with(data={"train": {"s3": given}, "validation": {"s3": f"datasets/{name}-val/"}})
            try:
                run = prepare_run(spec, PLAIN, s3=s3)
            except (SpecError, PreflightError) as err:
                wrong.append(f"{given}: refused: {err.problems[0]}")
                continue
            channel = next(c for c in job_requests.training_request(run, PLAIN, 0)["InputDataConfig"]
                           if c["ChannelName"] == "train")
            uri = channel["DataSource"]["S3DataSource"]["S3Uri"]
            prefix = uri.removeprefix(f"s3://{SETTINGS['data_bucket']}/")
            read = sorted(o["Key"] for o in s3.list_objects_v2(Bucket=SETTINGS["data_bucket"],
                                                                Prefix=prefix).get("Contents", []))
            if read != sorted(keys):
                wrong.append(f"{given} -> {uri} reads {read}")
    hostile_cases["s3-locations"] += count
    report(wrong, count)
