"""Data pre-flight: before any job starts, Prepare reads a bounded sample of every S3 channel and checks it the
way the training code will read it, so that a wrong column name costs a second, not a job start.

What is read (never the whole data set): one listing page per channel (at most `LIST_KEYS` keys), then ranged
GETs of the first `SAMPLE_OBJECTS` data files of each channel, at most `SAMPLE_BYTES` of each (JSON lines, JSON,
CSV, gzip-compressed too: the whole lines in that prefix), and for Parquet files the footer (`parquet_footer`:
one or two ranged reads at the end). In all at most `SAMPLE_OBJECTS` x `SAMPLE_BYTES` per channel.

What is checked, each problem naming the hyperparameter or channel and what to fix:
- the channel has data files the training code reads (its extension table, `data_format`'s `extensions` in
  training_code/hyperparameters.json; names starting with `.` or `_` are skipped, as the job does) and none of
  the listed ones is empty (0 bytes, or a Parquet file of 0 rows);
- the sample parses in its format (JSON lines / JSON / CSV / Parquet, UTF-8) and the sampled files of one
  channel have the same columns;
- every column the task reads exists: which hyperparameters name columns, their defaults and the names tried
  when unset all come from the task registry's declaration (`task.columns` in hyperparameters.json, the same
  `Task.columns` the job resolves them with), with the columns found and a did-you-mean; the tokenizer stage's
  `tokenizer.text_field` in its channel;
- values, where the sample has them (JSON and CSV; Parquet values are not decoded): labels against `num_labels`
  when given (the job's rule: integer labels within 0..num_labels-1, named labels at most num_labels distinct),
  SQuAD answers of the right shape, text columns holding text;
- the validation channel has the columns resolved on the training channel.
Not checked here (the job still checks everything when it loads the data): files beyond the sample, FSx
channels, data read from `train_path`/`validation_path` or a Hub dataset, Parquet values.
"""

from __future__ import annotations

import csv
import io
import json
import zlib
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from botocore.exceptions import ClientError

from . import hyperparameters, parquet_footer
from .aws import aws_errors
from .settings import Settings

LIST_KEYS = 1000  # one listing page
SAMPLE_OBJECTS = 3  # data files read per channel
SAMPLE_BYTES = 256 * 1024  # read per file (JSON lines, CSV, JSON)
MAX_ROWS = 200  # rows parsed per file
MAX_INFLATED = 4 * SAMPLE_BYTES  # of a gzip-compressed sample
READERS = 8  # concurrent ranged GETs
SHOWN = 20  # columns listed in a message
READ_CHANNELS = ("train", "validation")  # the channels the training code reads
CHANNEL_PATHS = {"train": "train_path", "validation": "validation_path"}  # a path hyperparameter replaces them


def extensions() -> dict[str, str]:
    """File extension -> format, as the training code reads a channel (hftrain.data.EXTENSIONS)."""
    return dict(hyperparameters.schema()["data_format"]["extensions"])


def task_columns(task: str) -> list[dict[str, Any]]:
    """The columns `task` reads (hftrain.tasks: Task.columns), as hyperparameters.json exports them."""
    return list(hyperparameters.schema()["task"]["columns"].get(task, []))


def detect_format(key: str, table: dict[str, str]) -> str | None:
    name = key.lower().removesuffix(".gz")
    return next((fmt for ext, fmt in table.items() if name.endswith(ext)), None)


@dataclass
class Sample:
    """What one file's sample showed."""

    uri: str
    fmt: str
    columns: list[str] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)  # parsed rows (not for Parquet)
    empty: bool = False
    problem: str | None = None  # why it cannot be read as the job would read it
    unread: str | None = None  # why it was not judged (too large a single document, no permission)


@dataclass
class Channel:
    name: str
    uri: str
    samples: list[Sample] = field(default_factory=list)

    @property
    def readable(self) -> list[Sample]:
        return [s for s in self.samples if not s.problem and not s.unread and not s.empty and s.columns]

    @property
    def columns(self) -> list[str]:
        first = self.readable
        return first[0].columns if first else []

    @property
    def shown(self) -> str:
        """Where the columns were read, for messages."""
        first = self.readable
        return first[0].uri if first else self.uri


# ---------------------------------------------------------------- reading
def _range(s3: Any, bucket: str, key: str, first: int, last: int) -> bytes:
    with aws_errors():
        return s3.get_object(Bucket=bucket, Key=key, Range=f"bytes={first}-{last}")["Body"].read()


def _text(raw: bytes, whole: bool, gz: bool) -> tuple[str, bool]:
    """(decoded text, whole): a gzip prefix is inflated as far as it goes; a cut sample ends at its last line."""
    if gz:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        try:
            raw = inflater.decompress(raw, MAX_INFLATED)
        except zlib.error as err:
            raise ValueError(f"is not gzip data ({err})") from None
        whole = whole and inflater.eof
    if not whole:
        raw = raw[: raw.rfind(b"\n") + 1]  # a newline byte never occurs inside a UTF-8 sequence
    try:
        return raw.decode("utf-8"), whole
    except UnicodeDecodeError as err:
        raise ValueError(f"is not UTF-8 text (byte {err.start})") from None


def _json_lines(text: str, whole: bool) -> tuple[list[str], list[dict[str, Any]]]:
    rows: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"line {number} is not JSON ({err.msg} at column {err.colno}); JSON lines files hold "
                             "one JSON object per line") from None
        if not isinstance(row, dict):
            raise ValueError(f"line {number} is a JSON {type(row).__name__}, not an object of column -> value")
        rows.append(row)
        if len(rows) >= MAX_ROWS:
            break
    return _columns(rows), rows


def _columns(rows: list[dict[str, Any]]) -> list[str]:
    return list(dict.fromkeys(name for row in rows for name in row))


SQUAD_COLUMNS = ["id", "title", "context", "question", "answers"]  # hftrain.data.flatten_squad's rows


def _json_document(text: str, whole: bool) -> tuple[list[str], list[dict[str, Any]]] | None:
    """A .json file: SQuAD's nested format, a list of records, JSON lines, or (whole) a dict of columns; None when
    a single document larger than the sample cannot be judged."""
    head = text[:4096].lstrip()
    if head.startswith("{") and '"data"' in head and ('"paragraphs"' in head or '"version"' in head):
        return SQUAD_COLUMNS, []  # flattened by the training code (hftrain.data.flatten_squad)
    if head.startswith("["):
        decoder, rows, pos = json.JSONDecoder(), [], text.index("[") + 1
        while len(rows) < MAX_ROWS:
            while pos < len(text) and text[pos] in " \t\r\n,":
                pos += 1
            if pos >= len(text) or text[pos] == "]":
                break
            try:
                row, pos = decoder.raw_decode(text, pos)
            except json.JSONDecodeError as err:
                if whole:
                    raise ValueError(f"is not valid JSON ({err.msg} at line {err.lineno})") from None
                break  # the sample ends inside a record
            if not isinstance(row, dict):
                raise ValueError(f"is a JSON list of {type(row).__name__}, not of objects (records)")
            rows.append(row)
        return (_columns(rows), rows) if rows else None
    first = next((line for line in text.splitlines() if line.strip()), "")
    try:
        if isinstance(json.loads(first), dict):
            return _json_lines(text, whole)
    except json.JSONDecodeError:
        pass
    if not whole:
        return None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as err:
        raise ValueError(f"is not valid JSON ({err.msg} at line {err.lineno})") from None
    if isinstance(document, dict) and all(isinstance(v, list) for v in document.values()):
        rows = [dict(zip(document, values, strict=False)) for values in zip(*document.values(), strict=False)]
        return list(document), rows[:MAX_ROWS]
    raise ValueError("is neither records, JSON lines nor a dict of columns")


def _csv(text: str, whole: bool) -> tuple[list[str], list[dict[str, Any]]]:
    records = list(csv.reader(io.StringIO(text)))
    if not whole and len(records) > 1:
        records = records[:-1]  # the cut may fall inside a quoted field
    if not records:
        return [], []
    header = records[0]
    rows = [dict(zip(header, record, strict=False)) for record in records[1:MAX_ROWS + 1]]
    return header, rows


def read_sample(s3: Any, bucket: str, key: str, size: int, fmt: str) -> Sample:
    uri = printable(f"s3://{bucket}/{key}")
    sample = Sample(uri=uri, fmt=fmt)
    try:
        if fmt == "parquet":
            tail = _range(s3, bucket, key, max(0, size - parquet_footer.TAIL_BYTES), size - 1)
            length = parquet_footer.footer_length(tail)
            if length + 8 > size or length > parquet_footer.MAX_FOOTER_BYTES:
                raise parquet_footer.ParquetError(f"has a footer of {length} bytes, more than the file holds")
            meta = tail[-8 - length:-8] if length + 8 <= len(tail) else _range(s3, bucket, key, size - 8 - length,
                                                                               size - 9)
            footer = parquet_footer.parse_footer(meta)
            sample.columns, sample.empty = footer.columns, footer.num_rows == 0
            return sample
        whole = size <= SAMPLE_BYTES
        raw = _range(s3, bucket, key, 0, min(size, SAMPLE_BYTES) - 1)
        text, whole = _text(raw, whole, key.lower().endswith(".gz"))
        if fmt == "csv":
            sample.columns, sample.rows = _csv(text, whole)
        elif fmt == "jsonl":
            sample.columns, sample.rows = _json_lines(text, whole)
        else:
            found = _json_document(text, whole)
            if found is None:
                sample.unread = (f"a single JSON document larger than the {SAMPLE_BYTES // 1024} KB sample (JSON "
                                 "lines files are checked)")
                return sample
            sample.columns, sample.rows = found
        sample.empty = not sample.rows and not (fmt == "json" and sample.columns)
    except (ValueError, parquet_footer.ParquetError) as err:
        sample.problem = f"{uri} {err}" if fmt != "parquet" else f"{uri} {err} (read as Parquet)"
    except ClientError as err:  # no permission, or gone since the listing: the job will tell
        sample.unread = f"cannot read it ({err.response.get('Error', {}).get('Code')})"
    return sample


# ---------------------------------------------------------------- the checks
def _listing(s3: Any, uri: str) -> list[dict[str, Any]]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    with aws_errors():
        return s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=LIST_KEYS).get("Contents", [])


def printable(text: str) -> str:
    """Data-chosen text (keys, labels) for a message: control characters escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def _names(columns: list[str]) -> str:
    shown = ", ".join(repr(c) for c in columns[:SHOWN])
    return shown + (f" and {len(columns) - SHOWN} more" if len(columns) > SHOWN else "") if columns else "no columns"


def _fix(name: str | None, channel: Channel, setting: str, what: str) -> str:
    """The end of a missing-column message: a did-you-mean when a column is close, what to set, then the columns
    found (last: a long list is what a length limit may cut)."""
    import difflib  # only for a missing column (its import costs every cold start otherwise)

    columns = channel.columns
    folded = {c.lower(): c for c in columns}
    close = [] if not name else [folded[name.lower()]] if name.lower() in folded else difflib.get_close_matches(
        name, columns, n=2)
    hint = f" (did you mean {' or '.join(map(repr, close))}?)" if close else ""
    return f"{hint}. Set {setting} to the column that holds the {what}; {channel.shown} has {_names(columns)}"


def _channel_files(name: str, uri: str, listing: list[dict[str, Any]], table: dict[str, str],
                   data_format: str) -> tuple[list[tuple[str, int, str]], list[str]]:
    """(data files as (key, size, format), problems) of one channel's listing."""
    prefix = uri.removeprefix("s3://").partition("/")[2]
    files, empty, unknown = [], [], []
    for obj in listing:
        key, relative = obj["Key"], printable(obj["Key"][len(prefix):])
        if key.endswith("/") or any(part.startswith((".", "_")) for part in relative.split("/") if part):
            continue
        fmt = detect_format(key, table) if data_format == "auto" else data_format
        if fmt is None:
            unknown.append(relative)
        elif obj.get("Size", 0) == 0:
            empty.append(relative)
        else:
            files.append((key, int(obj.get("Size", 0)), fmt))
    problems = []
    if empty:
        problems.append(f"data.{name}: {len(empty)} empty object(s) (0 bytes) under {uri}: "
                        f"{', '.join(empty[:5])}; remove them or upload their content")
    if not files and not empty and listing:
        kinds = ", ".join(sorted(table))
        problems.append(f"data.{name}: none of the {len(listing)} object(s) under {uri} is a data file the training "
                        f"code reads ({kinds}, optionally .gz; or set hyperparameters.data_format); found e.g. "
                        f"{', '.join(unknown[:3])}")
    return files, problems


def _resolve(task: str, channel: Channel, given: dict[str, Any], defaults: dict[str, Any]
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
            problems.append(f"{where}: cannot find the {what} column (tried {_names(col['candidates'])})"
                            f"{_fix(None, channel, 'hyperparameters.' + hp, what)}")
    return resolved, problems


def _label_key(value: Any) -> str:
    """As hftrain.tasks.classification.label_key: 1, '1' and 1.0 are one label."""
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
    """Why `value` is not SQuAD answers as the job reads them (hftrain.tasks.qa._answers), or None."""
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
            bad = next(((uri, i, why) for uri, i, v in rows if (why := _answers_problem(v))), None)
            if bad:
                problems.append(f"{path}: column {column!r} should hold SQuAD answers ({{\"text\": [...], "
                                f"\"answer_start\": [...]}}, JSON text in CSV files), but row {bad[1]} of {bad[0]} "
                                f"has {bad[2]}")
        elif col["kind"] == "text":
            bad = next(((uri, i, v) for uri, i, v in rows if v is not None and not isinstance(v, str)), None)
            if bad:
                problems.append(f"{path}: the {col['what']} column {column!r} should hold text, but row {bad[1]} of "
                                f"{bad[0]} has {type(bad[2]).__name__} {json.dumps(bad[2], default=str)[:40]}; "
                                f"name the column that holds the {col['what']}")
    return problems


def _channels(spec: dict[str, Any], settings: Settings) -> list[tuple[str, str]]:
    given = spec["hyperparameters"]
    wanted = set(READ_CHANNELS)
    tok = spec.get("tokenizer")
    if tok:
        wanted.add(tok["channel"])
    out = []
    for name, channel in spec["data"].items():
        if name not in wanted or "s3" not in channel:
            continue  # FSx channels are not sampled; `test` is not read by the job
        if name in CHANNEL_PATHS and given.get(CHANNEL_PATHS[name]) and not (tok and tok["channel"] == name):
            continue  # the job reads train_path / validation_path instead
        if channel["s3"].removeprefix("s3://").partition("/")[0] in settings.project_buckets:
            out.append((name, channel["s3"]))
    return out


def problems(spec: dict[str, Any], settings: Settings, s3: Any) -> list[str]:
    """Every data problem the sample shows (see the module doc); [] when there is nothing to read."""
    channels = _channels(spec, settings)
    if not channels:
        return []
    given = spec["hyperparameters"]
    table = extensions()
    data_format = given.get("data_format", "auto")
    found: list[str] = []
    reads: list[tuple[Channel, str, str, int, str]] = []
    checked: dict[str, Channel] = {}
    for name, uri in channels:
        try:
            listing = _listing(s3, uri)
        except ClientError:
            continue  # storage_problems reports unreadable prefixes
        files, file_problems = _channel_files(name, uri, listing, table, data_format)
        found += file_problems
        channel = checked[name] = Channel(name, uri)
        bucket = uri.removeprefix("s3://").partition("/")[0]
        reads += [(channel, bucket, key, size, fmt) for key, size, fmt in files[:SAMPLE_OBJECTS]]
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        samples = list(pool.map(lambda r: read_sample(s3, r[1], r[2], r[3], r[4]), reads))
    for (channel, *_), sample in zip(reads, samples, strict=True):
        channel.samples.append(sample)
    for channel in checked.values():
        found += _sample_problems(channel)
    found += _column_problems(spec, checked, given)
    return found


def _sample_problems(channel: Channel) -> list[str]:
    out = [f"data.{channel.name}: {s.problem}" for s in channel.samples if s.problem]
    out += [f"data.{channel.name}: {s.uri} has no rows; remove it or upload its content" for s in channel.samples
            if s.empty and not s.problem]
    readable = channel.readable
    for other in readable[1:]:
        if set(other.columns) != set(readable[0].columns):
            out.append(f"data.{channel.name}: {other.uri} has columns {_names(other.columns)} but {readable[0].uri} "
                       f"has {_names(readable[0].columns)}; every file of a channel needs the same columns")
    return out


def _column_problems(spec: dict[str, Any], checked: dict[str, Channel], given: dict[str, Any]) -> list[str]:
    task, out = spec["task"], []
    defaults = {name: meta.get("default") for name, meta in hyperparameters.schema().items()}
    read = [checked[n] for n in READ_CHANNELS if n in checked and checked[n].readable]
    if read:
        first = read[0]
        resolved, problems = _resolve(task, first, given, defaults)
        out += problems + _value_problems(task, first, resolved, given)
        for other in read[1:]:
            kinds = {c["hyperparameter"]: c["kind"] for c in task_columns(task)}
            missing = [(hp, c) for hp, c in resolved.items() if kinds[hp] != "id" and c not in other.columns]
            if missing:
                names = ", ".join(f"{c!r} ({hp})" for hp, c in missing)
                out.append(f"data.{other.name}: no column {names} in {other.shown}, which has "
                           f"{_names(other.columns)}; data.{first.name} has it: give both channels the same columns")
            out += _value_problems(task, other, {hp: c for hp, c in resolved.items() if c in other.columns}, given)
    tok = spec.get("tokenizer")
    channel = checked.get(tok["channel"]) if tok else None
    if channel and channel.readable and tok["text_field"] not in channel.columns:
        out.append(f"tokenizer.text_field: {tok['text_field']!r} is not a field of data.{channel.name}"
                   f"{_fix(tok['text_field'], channel, 'tokenizer.text_field', 'text')}")
    return out
