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
- every object accounted for: a ShardedByS3Key channel (over more than one instance) holding any object the reader
  does not take is refused, naming them (SageMaker decides which instance receives which object: one could
  receive only those and train on nothing); for a channel every instance reads whole, `skipped` lists what the
  job will skip, which Prepare keeps in the run (`data_skipped`) for its summary;
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

Here: the reading (listing, ranged GETs, Parquet footers) and the order of the checks; sample_parsing.py
parses a sample, column_checks.py holds the column and value rules, sample.py what was read.
"""


from __future__ import annotations

import csv
import struct
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from botocore.exceptions import ClientError

from contract import data_files
from hfsm_lambda.aws import aws_errors
from hfsm_lambda.data import parquet_footer
from hfsm_lambda.data.column_checks import column_problems, sample_problems
from hfsm_lambda.data.sample import READ_CHANNELS, Channel, Sample, printable
from hfsm_lambda.data.sample_parsing import SAMPLE_BYTES, csv_rows, decode, json_document, json_lines
from hfsm_lambda.settings import Settings
from hfsm_lambda.spec import hyperparameters
from hfsm_lambda.spec.typed import RunSpec

LIST_KEYS = 1000  # one listing page
SAMPLE_OBJECTS = 3  # data files read per channel
READERS = 8  # concurrent ranged GETs
CHANNEL_PATHS = {"train": "train_path", "validation": "validation_path"}  # a path hyperparameter replaces them


def extensions() -> dict[str, str]:
    """File extension -> format, as the training code reads a channel (hftrain.data.files.EXTENSIONS)."""
    return dict(hyperparameters.schema()["data_format"]["extensions"])


def detect_format(key: str, table: dict[str, str]) -> str | None:
    name = key.lower().removesuffix(".gz")
    return next((fmt for ext, fmt in table.items() if name.endswith(ext)), None)


# ---------------------------------------------------------------- reading
def _range(s3: Any, bucket: str, key: str, first: int, last: int) -> bytes:
    with aws_errors():
        return s3.get_object(Bucket=bucket, Key=key, Range=f"bytes={first}-{last}")["Body"].read()


def _read_parquet(s3: Any, bucket: str, key: str, size: int, sample: Sample) -> None:
    """The footer only (one or two ranged reads at the end): the columns and the row count."""
    tail = _range(s3, bucket, key, max(0, size - parquet_footer.TAIL_BYTES), size - 1)
    length = parquet_footer.footer_length(tail)
    if length + 8 > size or length > parquet_footer.MAX_FOOTER_BYTES:
        raise parquet_footer.ParquetError(f"has a footer of {length} bytes, more than the file holds")
    meta = tail[-8 - length:-8] if length + 8 <= len(tail) else _range(s3, bucket, key, size - 8 - length,
                                                                       size - 9)
    footer = parquet_footer.parse_footer(meta)
    sample.columns, sample.empty = footer.columns, footer.num_rows == 0


def _read_text(s3: Any, bucket: str, key: str, size: int, fmt: str, sample: Sample) -> None:
    """The first SAMPLE_BYTES, parsed in `fmt`; a single JSON document larger than that is left unread."""
    whole = size <= SAMPLE_BYTES
    raw = _range(s3, bucket, key, 0, min(size, SAMPLE_BYTES) - 1)
    text, whole = decode(raw, whole, key.lower().endswith(".gz"))
    if fmt == "csv":
        sample.columns, sample.rows = csv_rows(text, whole)
    elif fmt == "jsonl":
        sample.columns, sample.rows = json_lines(text, whole)
    else:
        found = json_document(text, whole)
        if found is None:
            sample.unread = (f"a single JSON document larger than the {SAMPLE_BYTES // 1024} KB sample (JSON "
                             "lines files are checked)")
            return
        sample.columns, sample.rows = found
    sample.empty = not sample.rows and not (fmt == "json" and sample.columns)


# What a parser of hostile bytes may raise (csv's field limit, json's nesting, struct, a value of another type):
# each becomes the pre-flight's message about the file. AWS errors are not among them (ClientError is handled
# below; throttling propagates for Step Functions to retry).
PARSER_FAILURES = (ValueError, TypeError, AttributeError, IndexError, KeyError, OverflowError, RecursionError,
                   csv.Error, struct.error)


def read_sample(s3: Any, bucket: str, key: str, size: int, fmt: str) -> Sample:
    uri = printable(f"s3://{bucket}/{key}")
    sample = Sample(uri=uri, fmt=fmt)
    try:
        if fmt == "parquet":
            _read_parquet(s3, bucket, key, size, sample)
        else:
            _read_text(s3, bucket, key, size, fmt, sample)
    except PARSER_FAILURES as err:  # the file's content, chosen by whoever uploaded it: never an exception of ours
        said = str(err) if isinstance(err, ValueError) else f"cannot be parsed ({type(err).__name__}: {err})"
        said = printable(said[:300])
        sample.problem = f"{uri} {said}" if fmt != "parquet" else f"{uri} {said} (read as Parquet)"
    except ClientError as err:  # no permission, or gone since the listing: the job will tell
        sample.unread = f"cannot read it ({err.response.get('Error', {}).get('Code')})"
    return sample


# ---------------------------------------------------------------- the checks
def _listing(s3: Any, uri: str) -> list[dict[str, Any]]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    with aws_errors():
        return s3.list_objects_v2(Bucket=bucket, Prefix=prefix, MaxKeys=LIST_KEYS).get("Contents", [])


MARKER_REASON, UNKNOWN_REASON = data_files.MARKER_REASON, data_files.UNKNOWN_REASON


def _channel_files(name: str, uri: str, listing: list[dict[str, Any]], table: dict[str, str],
                   data_format: str) -> tuple[list[tuple[str, int, str]], list[str], list[tuple[str, str]]]:
    """(data files as (key, size, format), problems, skipped objects as (name, why)) of one channel's listing."""
    prefix = uri.removeprefix("s3://").partition("/")[2]
    files, empty, unknown, skipped = [], [], [], []
    for obj in listing:
        key, relative = obj["Key"], printable(obj["Key"][len(prefix):])
        if key.endswith("/"):
            continue
        if any(part.startswith((".", "_")) for part in relative.split("/") if part):
            skipped.append((relative, MARKER_REASON))
            continue
        fmt = detect_format(key, table) if data_format == "auto" else data_format
        if fmt is None:
            unknown.append(relative)
            skipped.append((relative, UNKNOWN_REASON))
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
    return files, problems, skipped


def _named(skipped: list[tuple[str, str]], limit: int = 5) -> str:
    more = f" and {len(skipped) - limit} more" if len(skipped) > limit else ""
    return ", ".join(f"{name} ({why})" for name, why in skipped[:limit]) + more


def sharded_problem(name: str, uri: str, skipped: list[tuple[str, str]], table: dict[str, str]) -> str:
    """A ShardedByS3Key channel holding objects the reader does not take: SageMaker decides which instance gets
    which object, so an instance may get only those and train on nothing (the job then fails: hftrain/data/
    coverage.py)."""
    names = ", ".join(n for n, _ in skipped[:5]) + (f" and {len(skipped) - 5} more" if len(skipped) > 5 else "")
    return (f"data.{name}: ShardedByS3Key, and SageMaker decides which instance gets which object, so one may get "
            f"only objects the job cannot read and train on nothing: keep only {', '.join(sorted(table))} files "
            f"(.gz too) under {uri}, moving the rest to another prefix, or use FullyReplicated. Not read: "
            f"{len(skipped)} object(s): {names}")


def skipped_note(name: str, uri: str, skipped: list[tuple[str, str]]) -> str:
    """What the job will skip of a channel every instance reads whole."""
    return f"data.{name}: {len(skipped)} object(s) under {uri} will be skipped: {_named(skipped)}"


def _channels(spec: RunSpec, settings: Settings) -> list[tuple[str, str, bool]]:
    """(name, uri, sharded) of every S3 channel the jobs read."""
    given = spec.hyperparameters
    wanted = set(READ_CHANNELS)
    tok = spec.tokenizer
    if tok:
        wanted.add(tok.channel)
    out = []
    for name, channel in spec.data.channels().items():
        if name not in wanted or channel.s3 is None:
            continue  # FSx channels are not sampled; `test` is not read by the job
        if name in CHANNEL_PATHS and given.get(CHANNEL_PATHS[name]) and not (tok and tok.channel == name):
            continue  # the job reads train_path / validation_path instead
        if channel.s3.removeprefix("s3://").partition("/")[0] in settings.project_buckets:
            sharded = channel.distribution == "ShardedByS3Key" and spec.compute.instance_count > 1
            out.append((name, channel.s3, sharded))
    return out


def problems(spec: RunSpec, settings: Settings, s3: Any) -> list[str]:
    """Every data problem the sample shows (see the module doc); [] when there is nothing to read."""
    channels = _channels(spec, settings)
    if not channels:
        return []
    given = dict(spec.hyperparameters)
    table = extensions()
    data_format = given.get("data_format", "auto")
    found: list[str] = []
    reads: list[tuple[Channel, str, str, int, str]] = []
    checked: dict[str, Channel] = {}
    for name, uri, sharded in channels:
        try:
            listing = _listing(s3, uri)
        except ClientError:
            continue  # storage_problems reports unreadable prefixes
        files, file_problems, passed = _channel_files(name, uri, listing, table, data_format)
        found += file_problems
        if passed and sharded:
            found.append(sharded_problem(name, uri, passed, table))
        channel = checked[name] = Channel(name, uri)
        bucket = uri.removeprefix("s3://").partition("/")[0]
        reads += [(channel, bucket, key, size, fmt) for key, size, fmt in files[:SAMPLE_OBJECTS]]
    with ThreadPoolExecutor(max_workers=READERS) as pool:
        samples = list(pool.map(lambda r: read_sample(s3, r[1], r[2], r[3], r[4]), reads))
    for (channel, *_), sample in zip(reads, samples, strict=True):
        channel.samples.append(sample)
    for channel in checked.values():
        found += sample_problems(channel)
    found += column_problems(spec, checked, given)
    return found


def skipped(spec: RunSpec, settings: Settings, s3: Any) -> list[str]:
    """One line per channel that every instance reads whole and that holds objects the job will skip, naming them
    and why (a sharded channel holding any is refused by `problems` instead)."""
    notes = []
    for name, uri, sharded in _channels(spec, settings):
        try:
            listing = _listing(s3, uri)
        except ClientError:
            continue
        passed = _channel_files(name, uri, listing, extensions(), dict(spec.hyperparameters).get("data_format",
                                                                                                     "auto"))[2]
        if passed and not sharded:
            notes.append(skipped_note(name, uri, passed))
    return notes
