"""One module per task: its hyperparameters, column checks, tokenization, collator, model class and metrics.

The registry is built from the modules in this package: every `Task` subclass with a `name` is a task. Adding a
task is one new module here (and its tests); the argument parser, hyperparameters.json (which the Lambdas read for
the task names and metric definitions) and the runner derive from the registry, and so does local mode: the
module's `local` declaration (base.LocalMode) names the task's example spec, tiny model family and row generator.
What else a task brings (those files, its docs section) is listed in docs/training.md "Adding a task" and checked
by tests/local_mode/test_task_registry.py.
"""

from __future__ import annotations

import importlib
import pkgutil

from .base import Task


def _discover() -> dict[str, type[Task]]:
    found: list[type[Task]] = []
    for info in pkgutil.iter_modules(__path__):
        module = importlib.import_module(f"{__name__}.{info.name}")
        found += [value for value in vars(module).values()
                  if isinstance(value, type) and issubclass(value, Task) and value.__module__ == module.__name__
                  and value.name]
    return {cls.name: cls for cls in sorted(found, key=lambda cls: (cls.order, cls.name))}


REGISTRY: dict[str, type[Task]] = _discover()
TASKS: tuple[str, ...] = tuple(REGISTRY)


def get_task(name: str, data_args) -> Task:
    if name not in REGISTRY:
        raise ValueError(f"unknown task {name!r}")
    return REGISTRY[name](data_args)


def metric_names() -> dict[str, list[str]]:
    """task -> the metric names its evaluation logs (METRIC lines), for the Lambdas' metric definitions."""
    return {name: list(cls.metric_names()) for name, cls in REGISTRY.items()}


def column_declarations() -> dict[str, list[dict]]:
    """task -> the columns it reads, each named by a hyperparameter (Task.columns), for Prepare's data check."""
    return {name: [col.export() for col in cls.columns] for name, cls in REGISTRY.items()}


def verdicts() -> dict[str, dict]:
    """task -> {metric, margin, why}: how a finished run is judged against the trivial baseline."""
    return {name: cls.verdict.export() for name, cls in REGISTRY.items() if cls.verdict is not None}


__all__ = ["REGISTRY", "TASKS", "Task", "column_declarations", "get_task", "metric_names", "verdicts"]
