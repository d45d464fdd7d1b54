"""Loading the raw examples: channel directories, any local path (FSx), or a Hub dataset when online.

Channel files may be JSON lines, JSON (records, a list, or SQuAD's nested {"data": [...]} format), CSV
or Parquet, optionally gzip-compressed, in any sub-directory. Files whose names start with "." or "_"
(manifests, markers) are ignored.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import logging
import os
from pathlib import Path

from contract import data_files

logger = logging.getLogger(__name__)


class DataError(ValueError):
    """Missing channel, empty data, missing column: the message says what to fix."""


EXTENSIONS = {  # exported in hyperparameters.json (data_format's `extensions`) for Prepare's data check
    ".jsonl": "jsonl",
    ".ndjson": "jsonl",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
}
_BUILDER = {"jsonl": "json", "json": "json", "csv": "csv", "parquet": "parquet"}


def detect_format(name: str) -> str | None:
    lower = name.lower()
    if lower.endswith(".gz"):
        lower = lower[:-3]
    for ext, fmt in EXTENSIONS.items():
        if lower.endswith(ext):
            return fmt
    return None


MARKER_REASON, UNKNOWN_REASON = data_files.MARKER_REASON, data_files.UNKNOWN_REASON


def supported_formats() -> str:
    """The extensions the reader takes, as messages say them."""
    return ", ".join(EXTENSIONS) + " (optionally .gz)"


def inventory(path: str, data_format: str = "auto") -> tuple[dict[str, list[str]], list[tuple[str, str]]]:
    """(format -> sorted files it reads, [(relative name, why it is skipped)]) under `path` (a file or a directory,
    searched recursively): every object accounted for."""
    root = Path(path)
    if root.is_file():
        candidates = [root]
    elif root.is_dir():
        candidates = sorted(p for p in root.rglob("*") if p.is_file())
    else:
        raise DataError(f"data path {path} does not exist")
    found: dict[str, list[str]] = {}
    skipped: list[tuple[str, str]] = []
    for file in candidates:
        relative = file.name if file == root else file.relative_to(root).as_posix()
        if file != root and any(part.startswith((".", "_")) for part in file.relative_to(root).parts):
            skipped.append((relative, MARKER_REASON))
            continue
        fmt = detect_format(file.name) if data_format == "auto" else data_format
        if fmt is None:
            skipped.append((relative, UNKNOWN_REASON))
            continue
        found.setdefault(fmt, []).append(str(file))
    return found, skipped


def find_data_files(path: str, data_format: str = "auto") -> dict[str, list[str]]:
    """format -> sorted files under `path` (a file or a directory, searched recursively)."""
    found, skipped = inventory(path, data_format)
    unknown = [name for name, why in skipped if why == UNKNOWN_REASON]
    if unknown:
        logger.warning("ignoring %d file(s) with unknown extensions under %s: %s", len(unknown), path, unknown[:5])
    return found


def _open_text(path: str):
    return gzip.open(path, "rt", encoding="utf-8") if path.endswith(".gz") else open(path, encoding="utf-8")


def _is_nested_squad(path: str) -> bool:
    with _open_text(path) as handle:
        head = handle.read(4096).lstrip()
    return head.startswith("{") and '"data"' in head and ('"paragraphs"' in head or '"version"' in head)


def flatten_squad(document: dict) -> list[dict]:
    """SQuAD's nested format -> one row per question (id, title, context, question, answers)."""
    rows = []
    for article in document.get("data", []):
        title = article.get("title", "")
        for paragraph in article.get("paragraphs", []):
            context = paragraph["context"]
            for qa in paragraph.get("qas", []):
                answers = [] if qa.get("is_impossible") else qa.get("answers", [])
                rows.append(
                    {
                        "id": str(qa["id"]),
                        "title": title,
                        "context": context,
                        "question": qa["question"],
                        "answers": {
                            "text": [a["text"] for a in answers],
                            "answer_start": [int(a["answer_start"]) for a in answers],
                        },
                    }
                )
    return rows


def _flattened_copy(path: str, cache_dir: str) -> str:
    """Write a nested SQuAD file as JSON lines once (named by the content hash), for the json builder."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    target = Path(cache_dir) / "squad-flat" / f"{digest.hexdigest()[:20]}.jsonl"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with _open_text(path) as handle:
            rows = flatten_squad(json.load(handle))
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        with open(tmp, "w") as out:
            for row in rows:
                out.write(json.dumps(row) + "\n")
        os.replace(tmp, target)
    return str(target)


def load_local(path: str, *, data_format: str = "auto", cache_dir: str | None = None, allow_empty: bool = False):
    """All examples under a file or directory as one `datasets.Dataset` (None when empty and allowed)."""
    import datasets

    files = find_data_files(path, data_format)
    if not files:
        if allow_empty:
            return None
        raise DataError(
            f"no data files under {path} (expected .jsonl, .json, .csv or .parquet files, optionally .gz)"
        )
    parts = []
    for fmt, names in sorted(files.items()):
        if fmt == "csv":
            _refuse_tab_separated(names)
        if fmt == "json":
            names = [_flattened_copy(n, cache_dir or _default_cache()) if _is_nested_squad(n) else n for n in names]
        kwargs = {}
        try:
            part = datasets.load_dataset(_BUILDER[fmt], data_files=names, split="train", cache_dir=cache_dir, **kwargs)
        except Exception as err:  # the builders' errors name the file poorly; add the path
            raise DataError(f"cannot read {fmt} data under {path}: {err}") from err
        parts.append(part)
    dataset = parts[0] if len(parts) == 1 else datasets.concatenate_datasets(parts)
    if len(dataset) == 0 and not allow_empty:
        raise DataError(f"the data under {path} has no examples")
    return dataset if len(dataset) else None


def _refuse_tab_separated(names: list[str]) -> None:
    for name in names:
        with _open_text(name) as handle:
            first = handle.readline(64 * 1024)
        if data_files.tab_separated(first):
            raise DataError(f"{name}: {data_files.TAB_SEPARATED}")


def _default_cache() -> str:
    return os.environ.get("HF_DATASETS_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "hftrain")


def load_hub(name: str, config: str | None, split: str, cache_dir: str | None = None):
    import datasets

    offline = any(os.environ.get(v, "").lower() in ("1", "true", "yes") for v in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE"))
    if offline:
        raise DataError(
            f"dataset_name={name!r} needs the Hugging Face Hub, but this job is offline (HF_HUB_OFFLINE/"
            "HF_DATASETS_OFFLINE set): send the data as a `train` channel instead"
        )
    try:
        return datasets.load_dataset(name, config, split=split, cache_dir=cache_dir)
    except Exception as err:
        raise DataError(f"cannot load dataset {name!r} split {split!r} from the Hub: {err}") from err


def require_columns(dataset, columns: list[str], what: str) -> None:
    missing = [c for c in columns if c not in dataset.column_names]
    if missing:
        raise DataError(
            f"{what} is missing column(s) {missing}; it has {dataset.column_names}. Set the *_column "
            "hyperparameters to the names your data uses."
        )


def pick_column(dataset, preferred: str | None, candidates: tuple[str, ...], what: str) -> str:
    if preferred:
        require_columns(dataset, [preferred], what)
        return preferred
    for name in candidates:
        if name in dataset.column_names:
            return name
    raise DataError(
        f"cannot find the {what} column: tried {list(candidates)}, the data has {dataset.column_names}; "
        f"set it with a hyperparameter"
    )
