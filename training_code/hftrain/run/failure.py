"""The job's user-facing error where SageMaker reads it back: `<base>/output/failure` -> FailureReason.

SageMaker shows the first 1024 characters of /opt/ml/output/failure as DescribeTrainingJob's FailureReason
(prefixed with "AlgorithmError: "). The sagemaker-training toolkit (5.1.4, `files.write_failure_file`) writes
its own text there when the script fails ("ExecuteUserScriptError: ExitCode 2 ErrorMessage ..."), but only if
the file does not exist yet: written by the script first, the script's message is what the user sees in
Describe, in the failure notification and in local runs. The first rank to fail writes it (O_EXCL): the
first error wins, later ones (other ranks failing because of it) are only logged.
"""

from __future__ import annotations

import os
from pathlib import Path

from hftrain.smenv import base_dir

FAILURE_REASON_LIMIT = 1024  # characters SageMaker keeps
# Set by the recovery supervisor (hftrain/recovery/supervisor.py): each worker's own first failure text, by rank,
# whoever wins the race for the shared failure file (a host's ranks share it).
RANK_FAILURE_DIR_ENV = "HFTRAIN_RANK_FAILURE_DIR"


def rank_failure_path(folder: str | Path, rank: int) -> Path:
    return Path(folder) / f"rank-{rank}.txt"


def failure_path() -> Path:
    return base_dir() / "output" / "failure"


def clip_utf8(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a character boundary (never half a UTF-8 sequence)."""
    return text if len(text) <= limit else text[: limit - 3] + "..."


def write_failure(message: str, *, where: str | None = None) -> bool:
    """Write the failure file unless one exists; True when this call wrote it.

    `message`'s first line says what is wrong and how to fix it; `where` (host/rank) goes on a second line.
    """
    text = message.strip() or "the training script failed without a message"
    if where:
        text = f"{text}\n({where})"
    _rank_copy(text)
    path = failure_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    except OSError:
        return False  # an unwritable output dir must not hide the original error
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(clip_utf8(text, FAILURE_REASON_LIMIT) + "\n")
    return True


def _rank_copy(text: str) -> None:
    folder = os.environ.get(RANK_FAILURE_DIR_ENV)
    if not folder:
        return
    try:
        fd = os.open(rank_failure_path(folder, int(os.environ.get("RANK", "0") or 0)),
                     os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except (OSError, ValueError):
        return  # the first text of this rank stays
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(text + "\n")
