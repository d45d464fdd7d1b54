"""The training code's task registry (training_code/hftrain/tasks/), as local mode reads it.

Everything local mode does per task comes from there, so local mode keeps no list of tasks of its own: the Auto*
class a finished run's model loads with (`auto_model`), the columns the task reads (`columns`, with the names it
finds by itself) and its `local` declaration (hftrain/tasks/base.py LocalMode: the shipped example spec, the tiny
model family, the function of local_mode/synthetic.py that generates its rows).

Imported where it is used: the task modules import transformers (they name their model classes).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

RowGenerator = Callable[[int, int, dict[str, Any]], list[dict]]


def registry() -> dict[str, type]:
    """task name -> its Task class, in the registry's order (choices, error messages)."""
    from hftrain.tasks import REGISTRY  # the package make setup installs from training_code/

    return REGISTRY


def task_class(task: str) -> type | None:
    """The task's Task class; None for a name the registry does not hold."""
    return registry().get(task)


def row_generator(task_cls: type) -> RowGenerator:
    """The task's generator of learnable rows, (n, seed, the spec's hyperparameters) -> rows."""
    from local_mode import synthetic

    return getattr(synthetic, task_cls.local.rows)


def family_problem(task_cls: type, family: str) -> str | None:
    """Why a tiny model of `family` (local_mode/synthetic.py MODEL_KINDS, a transformers model type) cannot do the
    task, by the training code's own check (`Task.check_model`, what the job refuses at start); None when it can."""
    from transformers import AutoConfig

    from hftrain.args import DataArguments
    from hftrain.tasks.base import ModelTaskMismatch

    try:
        task_cls(DataArguments(task=task_cls.name)).check_model(AutoConfig.for_model(family))
    except ModelTaskMismatch as err:
        return str(err)
    return None


def families(task_cls: type, kinds: tuple[str, ...]) -> list[str]:
    """The families of `kinds` whose models can do the task."""
    return [kind for kind in kinds if family_problem(task_cls, kind) is None]
