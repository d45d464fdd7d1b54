"""The file side of checkpoints (manager.py): content hashes and the few file operations, behind
`LocalStorage` so that the checkpoint logic is tested with a fake."""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import stat
from collections.abc import Iterable
from pathlib import Path

_CHUNK = 8 << 20


# ---------------------------------------------------------------- hashing


def hash_algorithm() -> str:
    try:
        import xxhash  # noqa: F401 - a dependency of `datasets`, so present wherever the training code runs

        return "xxh3_128"
    except ImportError:  # pragma: no cover - only without datasets
        return "blake2b"


def _new_hasher(algorithm: str):
    if algorithm == "xxh3_128":
        import xxhash

        return xxhash.xxh3_128()
    if algorithm in hashlib.algorithms_available:
        return hashlib.new(algorithm)
    raise ValueError(f"unknown hash algorithm {algorithm!r}")


def hash_file(path: str, algorithm: str) -> str:
    hasher = _new_hasher(algorithm)
    with open(path, "rb", buffering=0) as handle:
        buffer = bytearray(_CHUNK)
        view = memoryview(buffer)
        while True:
            n = handle.readinto(buffer)
            if not n:
                break
            hasher.update(view[:n])
    return hasher.hexdigest()


# ---------------------------------------------------------------- storage


class LocalStorage:
    """The few file operations checkpoints need (tests substitute a fake)."""

    def list_dirs(self, root: str) -> list[str]:
        """Directories directly under root (a symbolic link to a directory is not one)."""
        try:
            return sorted(entry.name for entry in os.scandir(root) if entry.is_dir(follow_symlinks=False))
        except FileNotFoundError:
            return []

    def list_files(self, directory: str) -> dict[str, int]:
        """relative path -> size of every regular file, recursively; symbolic links are neither followed nor
        listed (see `list_links`)."""
        out: dict[str, int] = {}
        for parent, _dirs, names in os.walk(directory):  # followlinks=False: a linked directory is not entered
            for name in names:
                path = os.path.join(parent, name)
                info = os.lstat(path)
                if stat.S_ISREG(info.st_mode):
                    out[Path(path).relative_to(directory).as_posix()] = info.st_size
        return out

    def list_links(self, directory: str) -> dict[str, str]:
        """relative path -> target of every symbolic link inside `directory` (to files or directories)."""
        out: dict[str, str] = {}
        for parent, dirs, names in os.walk(directory):
            for name in dirs + names:
                path = os.path.join(parent, name)
                if os.path.islink(path):
                    out[Path(path).relative_to(directory).as_posix()] = os.readlink(path)
        return out

    def list_dir_links(self, root: str) -> list[str]:
        """Names directly under root that are symbolic links."""
        try:
            return sorted(entry.name for entry in os.scandir(root) if entry.is_symlink())
        except FileNotFoundError:
            return []

    def read_text(self, path: str) -> str | None:
        try:
            return Path(path).read_text()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError, UnicodeDecodeError):
            return None

    def write_text_atomic(self, path: str, text: str) -> None:
        tmp = f"{path}.tmp"
        with open(tmp, "w") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)

    def hash_file(self, path: str, algorithm: str) -> str:
        return hash_file(path, algorithm)

    def remove_tree(self, path: str) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def remove_files(self, directory: str, names: Iterable[str]) -> list[str]:
        """Unlink these relative paths (a link itself, never its target); returns the ones that could not be."""
        failed = []
        for name in names:
            try:
                os.unlink(os.path.join(directory, name))
            except FileNotFoundError:
                pass
            except OSError:
                failed.append(name)
        return failed

    def remove_empty_dirs(self, directory: str) -> bool:
        """Remove `directory` and the directories under it that are empty (deepest first); True when it is gone."""
        for parent, _dirs, _names in sorted(os.walk(directory), key=lambda item: -item[0].count(os.sep)):
            with contextlib.suppress(OSError):
                os.rmdir(parent)
        return not os.path.lexists(directory)

    def stage_files(self, source: str, names: Iterable[str], target: str) -> str:
        """A fresh `target` holding these files of `source` and nothing else. Hard links (the same inodes: what is
        verified there is what is loaded, and no space is used): returns "linked". Where hard links are
        impossible (another file system), symbolic links to the files by name: returns "symlinked" (a copy could
        need as much space as the checkpoint, on a volume that may not have it)."""
        shutil.rmtree(target, ignore_errors=True)
        os.makedirs(target)
        how = "linked"
        for name in names:
            src, dst = os.path.join(source, name), os.path.join(target, name)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if how == "linked":
                try:
                    os.link(src, dst, follow_symlinks=False)
                    continue
                except OSError:  # another file system, or hard links not supported
                    how = "symlinked"
            os.symlink(os.path.abspath(src), dst)
        return how

    def rename(self, source: str, target: str) -> None:
        os.rename(source, target)

    def exists(self, path: str) -> bool:
        return os.path.exists(path)
