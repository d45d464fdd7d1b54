"""Deterministic, content-addressed `sourcedir.tar.gz` of training_code/, built at synth time.

The same source tree always yields the same bytes (sorted names, mtime 0, uid/gid 0, normalized modes, gzip
header without name or time), so the tarball's SHA-256 names its S3 prefix: `code/<sha>/`. Redeploying
unchanged code uploads nothing new, and a job always runs the exact code its request names.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import shutil
import tarfile
from collections.abc import Sequence
from pathlib import Path

from hfsm_lambda.plan.job_requests import PROCESSING_SCRIPT
from stacks.assets.build_once import build_once

EXCLUDE_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".ipynb_checkpoints"}
EXCLUDE_SUFFIXES = (".pyc", ".pyo")
ENTRYPOINT = PROCESSING_SCRIPT  # the processing-job entrypoint, shipped beside the tarball
WHEELS_DIR = "wheels"  # inside the tarball: what the job images lack (stacks/assets/job_wheels.py)


def _files(root: Path) -> list[Path]:
    out = []
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if any(part in EXCLUDE_DIRS for part in rel.parts) or path.suffix in EXCLUDE_SUFFIXES:
            continue
        if path.is_file():
            out.append(path)
    return out


def sourcedir_bytes(source: Path, wheels: Sequence[Path] = ()) -> bytes:
    entries = [(path.relative_to(source).as_posix(), path) for path in _files(source)]
    entries += sorted((f"{WHEELS_DIR}/{path.name}", path) for path in wheels)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        for name, path in entries:
            info = tarfile.TarInfo(name)
            info.size = path.stat().st_size
            info.mode = 0o755 if path.stat().st_mode & 0o111 else 0o644
            info.mtime = 0
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            with path.open("rb") as fh:
                tar.addfile(info, fh)
    out = io.BytesIO()
    with gzip.GzipFile(fileobj=out, mode="wb", mtime=0, filename="", compresslevel=9) as gz:
        gz.write(raw.getvalue())
    return out.getvalue()


def build_code_bundle(source: Path, build_root: Path, wheels: Sequence[Path] = ()) -> tuple[Path, str]:
    """Writes `<build_root>/<sha16>/{sourcedir.tar.gz, runproc.sh}`; returns (folder, sha16)."""
    data = sourcedir_bytes(source, wheels)
    sha = hashlib.sha256(data).hexdigest()[:16]

    def build(tmp: Path) -> None:
        entry = source / ENTRYPOINT
        if entry.exists():
            shutil.copyfile(entry, tmp / ENTRYPOINT)
        (tmp / "sourcedir.tar.gz").write_bytes(data)  # last: it marks the bundle complete

    folder = build_once(build_root / sha, "sourcedir.tar.gz", build)
    return folder, sha
