"""The data check's column and value rules (preflight.py reads the samples): the task's columns resolved on
a channel's sample as the job resolves them, labels against `num_labels`, SQuAD answers, text columns holding
text, every file of a channel with the same columns, the validation channel with the training channel's columns,
the tokenizer's text field. Each problem names the hyperparameter or channel and what to fix."""

from __future__ import annotations

import json
from typing import Any

from hfsm_lambda.data.sample import READ_CHANNELS, Channel, Sample, names, printable
from hfsm_lambda.spec import hyperparameters
from hfsm_lambda.spec.typed import RunSpec


def task_columns(task: str) -> list[dict[str, Any]]:
    """The columns `task` reads (hftrain.tasks: Task.columns), as hyperparameters.json exports them."""
    return list(hyperparameters.schema()["task"]["columns"].get(task, []))


def _fix(name: str | None, channel: Channel, setting: str, what: str) -> str:
    """The end of a missing-column message: a did-you-mean when a column is close, what to set, then the columns
    found (last: a long list is what a length limit may cut)."""
    import difflib  # only for a missing column (its import costs every cold start otherwise)

    columns = channel.columns
    folded = {c.lower(): c for c in columns}
    close = [] if not name else [folded[name.lower()]] if name.lower() in folded else difflib.get_close_matches(
        name, columns, n=2)
    hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
    return f"{hint}. Set {setting} to the column that holds the {what}; {channel.shown} has {names(columns)}"


def resolve_columns(task: str, channel: Channel, given: dict[str, Any], defaults: dict[str, Any]
                    ) -> tuple[dict[str, str], list[str]]:
    """The task's columns resolved on `channel` as the job resolves them (hftrain.tasks.base.Task.resolve_columns):
    ({hyperparameter: column}, problems)."""
    columns, resolved, problems = channel.columns, {}, []
    where = f"data.{channel.name}"
    for col in task_columns(task):
        hp, what = col["hyperparameter"], col["what"]
        value = given.get(hp, defaults.get(hp))
        if col["off"] and isinstance(value, str) and value.lower() == col["off"]:
            continue
        if isinstance(value, str) and value:
            if value in columns:
                resolved[hp] = value
            elif hp in given and (col["required"] or value != defaults.get(hp)):
                problems.append(f"hyperparameters.{hp}: {value!r} is not a column of {where}"
                                f"{_fix(value, channel, 'hyperparameters.' + hp, what)}")
            elif col["required"]:
                problems.append(f"{where}: no {what} column {value!r} (the default of {hp})"
                                f"{_fix(value, channel, 'hyperparameters.' + hp, what)}")
            continue
        found = next((c for c in col["candidates"] if c in columns), None)
        if found:
            resolved[hp] = found
        elif col["required"]:
            problems.append(f"{where}: cannot find the {what} column (tried {names(col['candidates'])})"
                            f"{_fix(None, channel, 'hyperparameters.' + hp, what)}")
    return resolved, problems


def _label_key(value: Any) -> str:
    """As hftrain.scoring.classification.label_key: 1, '1' and 1.0 are one label."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def _label_problems(path: str, column: str, samples: list[Sample], num_labels: Any) -> list[str]:
    """The job's rule for num_labels (hftrain.tasks.classification.labels_for_count) on the sampled labels."""
    if not isinstance(num_labels, int) or isinstance(num_labels, bool):
        return []
    labels = {_label_key(row.get(column)) for s in samples for row in s.rows if row.get(column) not in (None, "")}
    try:
        numbers = sorted({int(v) for v in labels})
    except ValueError:
        numbers = None
    where = samples[0].uri if samples else ""
    if numbers is not None:
        outside = [v for v in numbers if not 0 <= v < num_labels]
        return [f"{path}: label value(s) {outside[:5]} in {where} are outside 0..{num_labels - 1} "
                f"(hyperparameters.num_labels={num_labels}); fix num_labels or the labels"] if outside else []
    if len(labels) > num_labels:
        return [f"{path}: the sample of {where} already has {len(labels)} distinct named labels "
                f"({', '.join(repr(printable(v)) for v in sorted(labels)[:10])}) but hyperparameters.num_labels="
                f"{num_labels}; named labels must "
                f"be at most num_labels names"]
    return []


def _answers_problem(value: Any) -> str | None:
    """Why `value` is not SQuAD answers as the job reads them (hftrain.scoring.squad.answers), or None."""
    if value is None:
        return None
    if isinstance(value, str):
        if not value.strip():
            return None
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            return "text that is not JSON"
    if isinstance(value, list):
        if all(isinstance(a, dict) and "text" in a and "answer_start" in a for a in value):
            return None
        return "a list whose items are not {text, answer_start} objects"
    if not isinstance(value, dict) or not {"text", "answer_start"} <= set(value):
        return f"{type(value).__name__} without the keys 'text' and 'answer_start'"
    texts, starts = value["text"], value["answer_start"]
    if not isinstance(texts, list) or not isinstance(starts, list) or len(texts) != len(starts):
        return "'text' and 'answer_start' that are not lists of one length"
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in starts):
        return "'answer_start' values that are not integers"
    return None


def _answers_column_problem(path: str, column: str, rows: list[tuple[str, int, Any]]) -> list[str]:
    bad = next(((uri, i, why) for uri, i, v in rows if (why := _answers_problem(v))), None)
    if not bad:
        return []
    return [f"{path}: column {column!r} should hold SQuAD answers ({{\"text\": [...], \"answer_start\": [...]}}, "
            f"JSON text in CSV files), but row {bad[1]} of {bad[0]} has {bad[2]}"]


def _text_column_problem(path: str, column: str, what: str, rows: list[tuple[str, int, Any]]) -> list[str]:
    bad = next(((uri, i, v) for uri, i, v in rows if v is not None and not isinstance(v, str)), None)
    if not bad:
        return []
    return [f"{path}: the {what} column {column!r} should hold text, but row {bad[1]} of {bad[0]} has "
            f"{type(bad[2]).__name__} {json.dumps(bad[2], default=str)[:40]}; name the column that holds the {what}"]


def _value_problems(task: str, channel: Channel, resolved: dict[str, str], given: dict[str, Any]) -> list[str]:
    kinds = {c["hyperparameter"]: c for c in task_columns(task)}
    samples = [s for s in channel.readable if s.rows]
    problems = []
    for hp, column in resolved.items():
        col = kinds[hp]
        path = f"hyperparameters.{hp}" if hp in given else f"data.{channel.name}"
        rows = [(s.uri, i, row[column]) for s in samples for i, row in enumerate(s.rows, 1) if column in row]
        if col["kind"] == "label":
            problems += _label_problems(path, column, samples, given.get("num_labels"))
        elif col["kind"] == "answers":
            problems += _answers_column_problem(path, column, rows)
        elif col["kind"] == "text":
            problems += _text_column_problem(path, column, col["what"], rows)
    return problems


def sample_problems(channel: Channel) -> list[str]:
    """Files that do not parse or hold no rows; files of one channel with other columns than its first."""
    out = [f"data.{channel.name}: {s.problem}" for s in channel.samples if s.problem]
    out += [f"data.{channel.name}: {s.uri} has no rows; remove it or upload its content" for s in channel.samples
            if s.empty and not s.problem]
    readable = channel.readable
    for other in readable[1:]:
        if set(other.columns) != set(readable[0].columns):
            out.append(f"data.{channel.name}: {other.uri} has columns {names(other.columns)} but {readable[0].uri} "
                       f"has {names(readable[0].columns)}; every file of a channel needs the same columns")
    return out


def _read_channel_problems(task: str, read: list[Channel], given: dict[str, Any]) -> list[str]:
    """The task's columns resolved on the first channel the job reads, and present in the others."""
    defaults = {name: meta.get("default") for name, meta in hyperparameters.schema().items()}
    first = read[0]
    resolved, out = resolve_columns(task, first, given, defaults)
    out += _value_problems(task, first, resolved, given)
    for other in read[1:]:
        kinds = {c["hyperparameter"]: c["kind"] for c in task_columns(task)}
        missing = [(hp, c) for hp, c in resolved.items() if kinds[hp] != "id" and c not in other.columns]
        if missing:
            listed = ", ".join(f"{c!r} ({hp})" for hp, c in missing)
            out.append(f"data.{other.name}: no column {listed} in {other.shown}, which has "
                       f"{names(other.columns)}; data.{first.name} has it: give both channels the same columns")
        out += _value_problems(task, other, {hp: c for hp, c in resolved.items() if c in other.columns}, given)
    return out


def column_problems(spec: RunSpec, checked: dict[str, Channel], given: dict[str, Any]) -> list[str]:
    """The task's columns on the channels the job reads; the tokenizer's text field on its channel."""
    out = []
    read = [checked[n] for n in READ_CHANNELS if n in checked and checked[n].readable]
    if read:
        out += _read_channel_problems(spec.task, read, given)
    tok = spec.tokenizer
    channel = checked.get(tok.channel) if tok else None
    if tok and channel and channel.readable and tok.text_field not in channel.columns:
        out.append(f"tokenizer.text_field: {tok.text_field!r} is not a field of data.{channel.name}"
                   f"{_fix(tok.text_field, channel, 'tokenizer.text_field', 'text')}")
    return out
