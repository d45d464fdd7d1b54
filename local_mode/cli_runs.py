"""The local runs behind the CLI: a spec with the user's data, the shipped examples, and generated inputs.

Every run ends the same way (`conclude`): the readable summary or failure (console.py), the model downloaded
and loaded when there is one, and a report (report.md + run.json) written in both cases.
"""

from __future__ import annotations

import json
import re
import threading
from pathlib import Path
from typing import Any

from hfsm_lambda.spec.spec_file import read_spec_file
from local_mode import spec_inputs, synthetic, task_registry
from local_mode.console import failure_lines, success_lines
from local_mode.report import state as run_state
from local_mode.report import write_report
from local_mode.sagemaker.settings import SAVE_ERROR_ENV, Interruption
from local_mode.sagemaker.stall_faults import describe_stall
from local_mode.session import LocalSession, RunOutcome

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"


class UsageError(ValueError):
    """A problem with the command line or its files: printed as one line, exit code 2."""


def read_spec(path: Path) -> dict[str, Any]:
    return read_spec_file(path, UsageError)


def check_data_folder(data: Path) -> int:
    if not data.exists():
        raise UsageError(f"--data {data}: no such folder (generate one with `python -m local_mode data TASK DIR`)")
    if not data.is_dir():
        raise UsageError(f"--data {data}: not a folder; give the folder whose content goes to the data bucket")
    files = [p for p in data.rglob("*") if p.is_file()]
    if not files:
        raise UsageError(f"--data {data}: the folder is empty; put the data under it (e.g. {data}/datasets/x/"
                         "train.jsonl) or generate some with `python -m local_mode data TASK DIR`")
    return len(files)


_warming: list[threading.Thread] = []


def warm_model_check() -> None:
    """Imports what `_load_model` needs (transformers, the task registry: several seconds) in a thread while the run
    runs, so that the end of a run does not wait for them. Only where nothing else imports transformers in this
    process meanwhile (the demo, runs of spec files: their jobs are other processes): transformers' lazy module is
    not safe to import from two threads at once, so `_load_model` waits for this thread before its own imports. A
    failure here is the later import's to report."""
    def imports() -> None:
        try:
            import transformers  # noqa: F401

            task_registry.registry()
        except Exception:  # noqa: BLE001, S110 - _load_model imports again and says what fails
            pass

    thread = threading.Thread(target=imports, name="warm-model-check", daemon=True)
    thread.start()
    _warming.append(thread)


def _load_model(task: str, model_dir: Path) -> str:
    while _warming:  # never import transformers beside the warming thread
        _warming.pop().join()
    import transformers

    auto_model = task_registry.task_class(task).auto_model  # the Auto* class the task trains with
    auto_model.from_pretrained(model_dir)
    transformers.AutoTokenizer.from_pretrained(model_dir)
    return f"{model_dir} (loads with {auto_model.__name__}.from_pretrained)"


def conclude(session: LocalSession, outcome: RunOutcome, work_dir: Path, *, verbose: bool = False,
             local: list[tuple[str, str]] | None = None,
             sections: list[tuple[str, list[str]]] | None = None) -> Path:
    """Print the outcome as a person reads it and write the report; returns the report's path."""
    local = list(local or [])
    model_dir = None
    if outcome.status == "SUCCEEDED":
        result = outcome.summary or {}
        model_dir = session.download_model(result["model_uri"], work_dir / "artifacts")
        local.insert(0, ("local model", _load_model(result["task"], model_dir)))
    url = session.mlflow_run_url(outcome)
    if url:
        local.append(("MLflow run", url + (" (make mlflow serves it)" if session.tracking_server else "")))
    report = write_report(work_dir / "report", outcome, model_dir, local=local, sections=sections)
    session.keep_for_runctl(outcome, report)
    local.append(("report", f"{report} (and run.json beside it)"))
    print("")
    print("\n".join(success_lines(outcome, local) if outcome.status == "SUCCEEDED" else
                    [*failure_lines(outcome, verbose=verbose), "", f"  report: {report} (and run.json)"]))
    return report


def local_model_folder(spec: dict[str, Any], spec_path: Path) -> Path | None:
    """The spec's `model` when it names a folder on this machine (relative to the spec file, else to the current
    folder): a `save_pretrained` folder, which the local run uploads for the run."""
    model = spec.get("model")
    if not isinstance(model, str) or not model or model.startswith("s3://"):
        return None
    for base in (spec_path.parent, Path.cwd()):
        folder = (base / model).expanduser()
        if folder.is_dir():
            if not (folder / "config.json").is_file():
                raise UsageError(f"{spec_path}: model {model} is the folder {folder}, which has no config.json; "
                                 "give a folder written by save_pretrained (config, weights, tokenizer)")
            return folder.resolve()
    return None


def upload_local_model(session: LocalSession, spec: dict[str, Any], folder: Path) -> str:
    """Uploads a model folder under base-models/ of the data bucket and points the spec at it (said aloud)."""
    slug = re.sub(r"[^a-z0-9-]+", "-", folder.name.lower()).strip("-") or "model"
    key = f"base-models/local-{slug}/"
    count = session.upload_folder(folder, key)
    uri = f"s3://{session.dep.data_bucket}/{key}"
    print(f"model: {spec['model']} is a folder on this machine ({folder}): uploaded its {count} files to {uri}, "
          "which the run uses as its model (on AWS: `python -m runctl stage-model` uploads one for an environment)")
    spec["model"] = uri
    return uri


def run_files(cdk_out: Path, work_dir: Path, spec_paths: list[Path], data: Path, interruptions: list[Interruption], *,
              verbose: bool = False, stalls: list[str] | None = None,
              processes_per_host: int = 1, save_error: str | None = None,
              tracking: bool | str = False) -> list[RunOutcome]:
    """Each spec with the data under `data` (uploaded once), one after the other in one emulator session; with
    several specs each run's report goes to work_dir/<spec file name>/. Interruptions and stall faults
    (`--inject-stall`: the n-th fault in a run's n-th training job) apply to every spec's run."""
    specs = [read_spec(path) for path in spec_paths]
    folders = [local_model_folder(spec, path) for spec, path in zip(specs, spec_paths, strict=True)]
    check_data_folder(data)
    for fault in stalls or []:
        try:
            describe_stall(fault)
        except ValueError as exc:
            raise UsageError(f"--inject-stall {exc}") from None
    if processes_per_host < 1:
        raise UsageError(f"--processes-per-host {processes_per_host}: at least 1")
    if save_error is not None and not re.fullmatch(r"\d+(@\d+)?", save_error):
        raise UsageError(f"--inject-save-error {save_error!r}: STEP or STEP@RANK, e.g. 40 or 40@1")
    job_env = {SAVE_ERROR_ENV: save_error} if save_error else {}
    outcomes = []
    with LocalSession(cdk_out, work_dir, verbose=verbose, processes_per_host=processes_per_host,
                      job_env=job_env, tracking=tracking) as session:
        print(f"uploaded {session.upload_folder(data)} files from {data} to s3://{session.dep.data_bucket}/")
        warm_model_check()
        for index, (spec, path, folder) in enumerate(zip(specs, spec_paths, folders, strict=True)):
            run_dir = work_dir if len(specs) == 1 else work_dir / f"{index + 1:02d}-{path.stem}"
            if len(specs) > 1:
                print(f"\nspec {path}:")
            if folder is not None:
                upload_local_model(session, spec, folder)
            # interruptions on the command line replace the spec's local.interrupt_at_step
            outcome = session.run_spec(spec, interrupt_at_step=0 if interruptions else None,
                                       interruptions=interruptions, stalls=stalls)
            conclude(session, outcome, run_dir, verbose=verbose)
            outcomes.append(outcome)
    if len(specs) > 1:
        print("\nruns: " + "; ".join(f"{p.name} {run_state(o)} in {o.seconds:.0f} s" for p, o in
                                     zip(spec_paths, outcomes, strict=True)))
    return outcomes


def example_names() -> list[str]:
    return sorted(p.stem for p in EXAMPLES.glob("*.json"))


def run_examples(cdk_out: Path, work_dir: Path, names: list[str], *, verbose: bool = False,
                 tracking: bool | str = False) -> list[RunOutcome]:
    """Each examples/NAME.json as shipped, one after the other in one emulator session."""
    known = example_names()
    unknown = [n for n in names if n not in known]
    if unknown:
        raise UsageError(f"no example {', '.join(unknown)}; the examples are: {', '.join(known)}")
    outcomes = []
    with LocalSession(cdk_out, work_dir, verbose=verbose, tracking=tracking) as session:
        for name in names:  # no warm_model_check: each example generates a model (transformers) in this thread
            outcomes.append(_run_example(session, name, work_dir / name, verbose=verbose))
    if len(names) > 1:
        print("\nexamples: " + "; ".join(f"{n} {run_state(o)} in {o.seconds:.0f} s" for n, o in
                                         zip(names, outcomes, strict=True)))
    return outcomes


def _run_example(session: LocalSession, name: str, work_dir: Path, *, verbose: bool) -> RunOutcome:
    path = EXAMPLES / f"{name}.json"
    spec = read_spec(path)
    inputs = work_dir / "inputs"
    plan = spec_inputs.local_overrides(spec, session.dep.settings, inputs)
    print(f"\nexample {name}: {path.relative_to(REPO)} as shipped, with {len(plan.notes)} local override(s) "
          "(the file is not changed):")
    for note in plan.notes:
        print(f"  - {note}")
    counts = [plan.spec.get("compute", {}).get("instance_count", 1),
              (plan.spec.get("tokenizer") or {}).get("instance_count", 1)]
    print("generated inputs:")
    for line in spec_inputs.write_spec_data(plan.spec, inputs, parts=max(2, *counts)):
        print(f"  - {line}")
    print(f"uploaded {session.upload_folder(inputs)} generated files to s3://{session.dep.data_bucket}/")
    outcome = session.run_spec(plan.spec)
    conclude(session, outcome, work_dir, verbose=verbose,
             local=[("example", f"{path.relative_to(REPO)} ({len(plan.notes)} local overrides, listed above)")],
             sections=[("Local overrides (the example file is unchanged)", plan.notes)])
    return outcome


def generate_data(task: str, folder: Path, cdk_out: Path, *, family: str | None = None,
                  train_rows: int = spec_inputs.TRAIN_ROWS) -> Path:
    """Data + a tiny model for a task under folder, and a spec that uses them; returns the spec's path."""
    from cloud_assembly.reader import AssemblyError, CloudAssembly

    task_cls, family = generator_choice(task, family)  # refused before anything is read or written
    try:
        bucket = CloudAssembly(cdk_out).data_bucket_name()
    except AssemblyError as exc:
        raise UsageError(str(exc)) from None
    spec_path, lines = write_generated(task_cls, family, folder, bucket, train_rows=train_rows)
    for line in lines:
        print(line)
    spec = json.loads(spec_path.read_text())
    print(f"model: a tiny {family} built from a config under {folder / 'base-models' / f'tiny-{family}'} "
          f"(goes to {spec['model']})")
    print(f"spec: {spec_path}\nrun it: python -m local_mode run {spec_path} --data {folder}")
    return spec_path


def generator_choice(task: str, family: str | None) -> tuple[type, str]:
    """The task's class and the model family to generate for it; UsageError naming the valid choices for a task or
    family the generator cannot make a valid spec of (a family whose models cannot do the task: the job's own
    check, Task.check_model)."""
    task_cls = task_registry.task_class(task)
    if task_cls is None:
        raise UsageError(f"unknown task {task!r}; tasks: {', '.join(task_registry.registry())}")
    family = family or task_cls.local.model_family
    valid = task_registry.families(task_cls, synthetic.MODEL_KINDS)
    if family not in synthetic.MODEL_KINDS:
        raise UsageError(f"unknown model family {family!r}; families for {task}: {', '.join(valid)}")
    if family not in valid:
        why = task_registry.family_problem(task_cls, family)
        raise UsageError(f"--family {family} cannot do {task}, the job would refuse it ({why}); families for "
                         f"{task}: {', '.join(valid)}")
    return task_cls, family


def write_generated(task_cls: type, family: str, folder: Path, bucket: str, *,
                    train_rows: int = spec_inputs.TRAIN_ROWS) -> tuple[Path, list[str]]:
    """Write the data, the tiny model and the spec (for the data bucket `bucket`); (spec path, lines to print)."""
    task = task_cls.name
    spec = {
        "version": 1, "name": f"local-{task.split('-')[0]}", "task": task,
        "description": f"Generated {task} data and a tiny {family} (python -m local_mode data)",
        "model": f"s3://{bucket}/base-models/tiny-{family}/",
        "data": {"train": {"s3": f"datasets/local-{task}/train/", "distribution": "ShardedByS3Key"},
                 "validation": {"s3": f"datasets/local-{task}/validation/"}},
        "compute": {"instance_count": 2}, "distribution": {"strategy": "ddp"},
        "checkpoint": {"every_steps": 10},
        "hyperparameters": {"max_steps": 30, "logging_steps": 5, "per_device_train_batch_size": 16,
                            "learning_rate": 0.003},
    }
    lines = spec_inputs.write_spec_data(spec, folder, parts=4, train_rows=train_rows)
    synthetic.build_model_dir(family, folder / "base-models" / f"tiny-{family}")
    spec_path = folder / f"{task}.json"
    spec_path.write_text(json.dumps(spec, indent=2) + "\n")
    return spec_path, lines
