"""Wheels that travel with the training code, so that jobs install nothing from the internet at start-up.

Training and processing jobs run in private subnets that may reach no package index (dev has no NAT). What the
images already hold (see stacks/assets/job_images.py) is used as it is; what they lack is pinned in
`stacks/assets/job_wheels.lock` (name, version, file name, sha256) for the images' Python 3.12 on manylinux x86_64,
downloaded once at synth time (`pip download --require-hashes`) into `.whl/<lock sha>/`, and packed into
`sourcedir.tar.gz` as `wheels/`. The jobs install from that folder only: the training toolkit's
`pip install -r requirements.txt` reads `--no-index --find-links wheels` from training_code/requirements.txt,
and runproc.sh installs training_code/requirements-processing.txt with `--no-index --no-deps`.

An sdist-only package (rouge-score publishes no wheel) is downloaded by its locked sdist hash and built into a
pure-Python wheel here, with SOURCE_DATE_EPOCH fixed so the bytes do not depend on the time of the build.
The project's own compiled helper (`tokenizer-mr-native`, the tokenizer reduce's merge loop in C) has a lock entry
with a `source` folder in this repository instead of a hash: it is built here the same way (a C compiler and the
registry's setuptools are all it needs); the wheel folder's name covers its source files, so a change rebuilds it.

`python -m stacks.assets.job_wheels --lock NAME==VERSION ...` rewrites the lock (after an image change: README,
Deploying).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from stacks.assets.build_once import build_once

REPO = Path(__file__).resolve().parents[2]
LOCK = Path(__file__).with_name("job_wheels.lock")
CACHE = REPO / ".whl"
PYTHON_VERSION = "3.12"  # both job images are py312 (their tags say so; stacks/assets/job_images.py)
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
_PLATFORM_ARGS = ["--only-binary=:all:", *[a for p in PLATFORMS for a in ("--platform", p)],
                  "--python-version", PYTHON_VERSION, "--implementation", "cp",
                  "--abi", "cp312", "--abi", "abi3", "--abi", "none"]
SOURCE_DATE_EPOCH = "315532800"  # 1980-01-01, the earliest time a zip entry can carry


class WheelError(RuntimeError):
    """A locked wheel could not be fetched or verified: synth stops here, before anything is deployed."""


@dataclass(frozen=True)
class Locked:
    name: str
    version: str
    file: str
    sha256: str = ""  # of the downloaded file; empty for a package built from `source`
    source: str = ""  # a folder of this repository to build the wheel from (the project's own packages)

    @property
    def is_sdist(self) -> bool:
        return self.file.endswith((".tar.gz", ".zip"))


def read_lock(path: Path = LOCK) -> list[Locked]:
    return [Locked(**entry) for entry in json.loads(path.read_text())["packages"]]


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        raise WheelError(f"`pip {' '.join(args)}` failed (the package index must be reachable at synth time; "
                         f"wheels are cached in {CACHE} afterwards):\n{done.stdout[-1500:]}{done.stderr[-1500:]}")


def _download(entry: Locked, target: Path) -> Path:
    requirement = target / "req.txt"
    requirement.write_text(f"{entry.name}=={entry.version} --hash=sha256:{entry.sha256}\n")
    binary = ["--no-binary=:all:"] if entry.is_sdist else _PLATFORM_ARGS
    _pip("download", "--no-deps", "--require-hashes", "--no-cache-dir", *binary, "-r", str(requirement),
         "-d", str(target))
    requirement.unlink()
    path = target / entry.file
    if not path.exists() or _sha256(path) != entry.sha256:
        raise WheelError(f"{entry.name}=={entry.version}: expected {entry.file} with sha256 {entry.sha256}")
    return path


def _build_wheel(sdist: Path, target: Path) -> None:
    """A wheel from an sdist file or a source folder, with no index (setuptools from this environment)."""
    env = {**os.environ, "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH, "PYTHONHASHSEED": "0"}
    cmd = [sys.executable, "-m", "pip", "--disable-pip-version-check", "wheel", "--no-deps",
           "--no-build-isolation", "--no-index", "-w", str(target), str(sdist)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        raise WheelError(f"building a wheel from {sdist.name} failed:\n{done.stdout[-1500:]}{done.stderr[-1500:]}")


def lock_digest(path: Path = LOCK) -> str:
    """Names the wheel folder: the lock, and the files of the packages built from this repository."""
    digest = hashlib.sha256(path.read_bytes())
    for entry in read_lock(path):
        if entry.source:
            files = (REPO / entry.source).rglob("*")
            for file in sorted(p for p in files if p.is_file() and "__pycache__" not in p.parts):
                digest.update(file.relative_to(REPO).as_posix().encode() + b"\0" + file.read_bytes())
    return digest.hexdigest()[:16]


def _build_local(entry: Locked, target: Path) -> None:
    _build_wheel(REPO / entry.source, target)
    if not (target / entry.file).exists():
        built = ", ".join(p.name for p in target.glob(f"{entry.name.replace('-', '_')}-*.whl")) or "nothing"
        raise WheelError(f"{entry.name}=={entry.version} from {entry.source}: expected {entry.file}, built {built}")


def wheel_dir(lock: Path = LOCK, cache: Path = CACHE) -> Path:
    """The folder of wheels for the lock (downloaded and verified, or built, on first use, then reused)."""

    def build(tmp: Path) -> None:
        (tmp / "sdist").mkdir()
        for entry in read_lock(lock):
            if entry.source:
                _build_local(entry, tmp)
            elif entry.is_sdist:
                _build_wheel(_download(entry, tmp / "sdist"), tmp)
            else:
                _download(entry, tmp)
        shutil.rmtree(tmp / "sdist")
        (tmp / ".complete").write_text("ok\n")

    return build_once(cache / lock_digest(lock), ".complete", build)


def wheel_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.whl"))


def write_lock(requirements: list[str], path: Path = LOCK) -> None:
    """Resolve `name==version` pins to one file each for the job images' platform and record their hashes."""
    import tempfile

    packages = []
    with tempfile.TemporaryDirectory() as tmp:
        for requirement in requirements:
            name, _, version = requirement.partition("==")
            target = Path(tmp) / name
            target.mkdir()
            try:
                _pip("download", "--no-deps", "--no-cache-dir", *_PLATFORM_ARGS, "-d", str(target), requirement)
            except WheelError:
                _pip("download", "--no-deps", "--no-cache-dir", "--no-binary=:all:", "-d", str(target), requirement)
            (file,) = list(target.iterdir())
            packages.append({"name": name, "version": version, "file": file.name, "sha256": _sha256(file)})
    packages += [{"name": e.name, "version": e.version, "file": e.file, "source": e.source}
                 for e in (read_lock(path) if path.exists() else []) if e.source]  # kept: built here, not resolved
    path.write_text(json.dumps({"python": PYTHON_VERSION, "platforms": list(PLATFORMS), "packages": packages},
                               indent=1) + "\n")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--lock"]:
        write_lock(sys.argv[2:])
        print(f"wrote {LOCK}")
    else:
        print(wheel_dir())
