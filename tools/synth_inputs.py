"""A digest of everything `cdk synth` reads, so that `make demo` synthesizes again only when one of them changed.

    python -m tools.synth_inputs ENV              print the digest of ENV's synth inputs
    python -m tools.synth_inputs ENV --check DIR  exit 0 when DIR (a cdk.out) was synthesized from these inputs
    python -m tools.synth_inputs ENV --write DIR  record DIGEST (--digest) or the current one in DIR

What goes in (any change re-synthesizes): the environment's name; every file of the CDK app (app.py, cdk.json,
cdk.context.json) and of the packages it imports or bundles (stacks/, lambda/, training_code/: the Lambda asset,
the code bundle, the wheels' lock, the tokenizer's native source); the pins of the CDK CLI (package.json,
package-lock.json) and of the Python libraries (pyproject.toml, requirements*.txt), and the name and version of every
distribution installed in the interpreter that synthesizes (aws-cdk-lib, cdk-nag, sagemaker-core, ... as they really
are, whatever the pins say). Byte-code caches are left out: Python writes them, they say nothing new.

The digest is taken before the synth starts and recorded only after it succeeded: a file edited while synth runs
makes the next `make demo` synthesize again.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import sys
from importlib import metadata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FILES = ("app.py", "cdk.json", "cdk.context.json", "package.json", "package-lock.json", "pyproject.toml",
         "requirements.txt", "requirements-dev.txt")
FOLDERS = ("stacks", "lambda", "training_code")
SKIPPED_DIRS = {"__pycache__", ".pytest_cache", ".ruff_cache", ".hypothesis"}
SKIPPED_SUFFIXES = (".pyc", ".pyo")
STAMP = ".synth-inputs.sha256"  # inside the synthesized folder: it goes when the folder goes


def input_files(repo: Path = REPO) -> list[Path]:
    """Every file the digest covers, sorted; a missing top-level file is simply absent (and that changes the digest)."""
    found = [repo / name for name in FILES if (repo / name).is_file()]
    for folder in FOLDERS:
        for root, dirs, files in os.walk(repo / folder):
            dirs[:] = sorted(d for d in dirs if d not in SKIPPED_DIRS and not d.endswith(".egg-info"))
            found += [Path(root) / f for f in files if not f.endswith(SKIPPED_SUFFIXES)]
    return sorted(found)


def installed() -> list[str]:
    """name==version of every distribution the synthesizing interpreter has, sorted."""
    names = {f"{(d.metadata['Name'] or '').lower()}=={d.version}" for d in metadata.distributions()}
    return sorted(names)


def digest(environment: str, repo: Path = REPO, distributions: list[str] | None = None) -> str:
    h = hashlib.sha256()
    h.update(f"env={environment}\0python={sys.version}\0".encode())
    for name in installed() if distributions is None else distributions:
        h.update(name.encode() + b"\0")
    for path in input_files(repo):
        h.update(path.relative_to(repo).as_posix().encode() + b"\0")
        h.update(hashlib.sha256(path.read_bytes()).digest())
    return h.hexdigest()


def recorded(out: Path) -> str | None:
    try:
        return (out / STAMP).read_text().strip()
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.synth_inputs", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("env", help="the environment synthesized (-c env=ENV)")
    action = parser.add_mutually_exclusive_group()
    action.add_argument("--check", type=Path, metavar="DIR", help="exit 0 if DIR holds a synth of these inputs, else 1")
    action.add_argument("--write", type=Path, metavar="DIR", help="record the digest in DIR")
    parser.add_argument("--digest", help="with --write: the digest taken before the synth started")
    args = parser.parse_args(argv)
    if args.check:
        return 0 if recorded(args.check) == digest(args.env) else 1
    if args.write:
        (args.write / STAMP).write_text((args.digest or digest(args.env)) + "\n")
        return 0
    print(digest(args.env))
    return 0


if __name__ == "__main__":
    sys.exit(main())
