"""docs/training.md's hyperparameter tables, generated from the argument dataclasses (args.py).

    python -m tools.hp_docs --write   # rewrite the tables between the markers (`make docs` runs it)
    python -m tools.hp_docs --check   # exit 1 when they are stale (tests/training/test_hyperparameter_docs.py does this)

One row per field hftrain declares (ModelArguments, the common DataArguments, each task's own, and the fields
SageMakerTrainingArguments adds or overrides), in declaration order: its name, the type and choices that
hyperparameters.json lists for it (args.hyperparameter_schema, the same generator), the dataclass default and
its help text. The Trainer's other fields are only in hyperparameters.json. A build-time tool: the training code
bundle does not carry it.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import json
import sys
from pathlib import Path
from typing import Any

from hftrain import args as hp
from hftrain.tasks import REGISTRY

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "training.md"
BEGIN, END = "<!-- hyperparameters:start -->", "<!-- hyperparameters:end -->"
HEAD = ["| name | type | default | meaning |", "| --- | --- | --- | --- |"]


def field_groups() -> list[tuple[str, type, list[dataclasses.Field]]]:
    """(title, dataclass, its fields) for every group of hyperparameters hftrain declares, each field once, in the
    order the class body declares them (the Trainer's own fields, which the training class inherits, left out)."""
    groups = [("Model", hp.ModelArguments), ("Data, every task", hp.CommonDataArguments)]
    groups += [(f"Data, {task.name}", task.arguments) for task in REGISTRY.values() if task.arguments is not None]
    groups.append(("Training: the Trainer's arguments hftrain adds or sets defaults for", hp.training_args_class()))
    seen: set[str] = set()
    out = []
    for title, cls in groups:
        by_name = {f.name: f for f in dataclasses.fields(cls)}
        fields = [by_name[n] for n in inspect.get_annotations(cls) if n in by_name and n not in seen]
        seen.update(f.name for f in fields)
        out.append((title, cls, fields))
    return out


def _default(item: dataclasses.Field) -> str:
    if item.default_factory is not dataclasses.MISSING:
        return f"computed: `{item.default_factory.__name__}()`"
    value = item.default.value if isinstance(item.default, enum.Enum) else item.default
    if value is None:
        return "none"
    if isinstance(value, str):
        return f"`{value}`" if value else '`""`'
    return f"`{json.dumps(value)}`"


def _type(entry: dict[str, Any]) -> str:
    choices = entry.get("choices")
    return entry["type"] + (": " + ", ".join(f"`{c}`" for c in choices) if choices else "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def render_table() -> str:
    """The tables, one per group, as Markdown (what goes between the markers)."""
    schema = hp.hyperparameter_schema()
    parts = []
    for title, cls, fields in field_groups():
        rows = [f"| `{f.name}` | {_cell(_type(schema[f.name]))} | {_cell(_default(f))} | "
                f"{_cell(schema[f.name]['help'])} |" for f in fields]
        parts.append("\n".join([f"**{title}** (`{cls.__name__}`)", "", *HEAD, *rows]))
    return "\n\n".join(parts)


def render_doc(text: str) -> str:
    """`text` (docs/training.md) with the generated tables between the markers."""
    if BEGIN not in text or END not in text:
        raise SystemExit(f"{DOC}: the markers {BEGIN} / {END} are missing")
    head, rest = text.split(BEGIN, 1)
    return f"{head}{BEGIN}\n{render_table()}\n{END}{rest.split(END, 1)[1]}"


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    current = DOC.read_text()
    new = render_doc(current)
    if "--write" in argv:
        DOC.write_text(new)
        print(f"wrote {DOC.relative_to(REPO)}")
        return 0
    if new != current:
        print(f"stale: {DOC.relative_to(REPO)}; run: make docs")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
