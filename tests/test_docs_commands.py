"""Docs that run: every shell command shown in README.md and docs/*.md is run by this test, as written or, when it
takes minutes or needs AWS, as a dry run (issue: everything a user reads is true, point 6).

The convention (for whoever writes docs): every fenced block whose language is `bash`, `sh`, `shell` or `console` has,
on the line just before its opening fence, one marker:

    <!-- docs-test: run -->      the block runs offline as written, in a fresh `bash -e` with no AWS variables, the
                                 venv's bin first on PATH, in a temporary copy of the repository (cdk.out: the dev app
                                 synthesized for the tests); `/tmp/` in a command is the test's own temporary folder.
                                 Use it for what takes seconds.
    <!-- docs-test: dry-run -->  what takes minutes (`make test`, `make demo`, a local run) or needs AWS (deploy,
                                 submit): each command is checked, not run: `make T` as `make -n T`; `aws S OP ...` as
                                 `aws S OP help`; `python -m M [SUB]`, `python FILE.py`, `runctl [SUB]`, `npx cdk SUB`
                                 with `--help` after the program and its sub-command; `. .venv/bin/activate` runs.

A block without a marker fails this test with its file and line: each new block gets a decision. Other fences (json,
text, python, plain ```) are not commands. In a block, `#` starts a comment, a trailing `\\` continues the line, and `;`
separates commands (a dry run checks each). Sample outputs the docs show are checked where they are produced (the
progress lines: tests/contract/test_progress_lines_docs.py; the spec problems and the data check's message:
tests/lambda/spec/test_lambda_docs.py, tests/lambda/data/test_lambda_data_preflight.py).
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
SHELL = {"bash", "sh", "shell", "console"}
MARKER = re.compile(r"<!--\s*docs-test:\s*(run|dry-run)\s*-->")
FENCE = re.compile(r"^(\s*)```(\S*)\s*$")
SUBCOMMAND = re.compile(r"[a-z][a-z-]*")


@dataclass
class Block:
    where: str  # file:line of the opening fence
    mode: str | None  # run, dry-run, or None (no marker)
    commands: list[str]


def blocks(path: Path, root: Path = REPO) -> list[Block]:
    found, lines, i = [], path.read_text().splitlines(), 0
    while i < len(lines):
        match = FENCE.match(lines[i])
        if not match:
            i += 1
            continue
        end = next(j for j in range(i + 1, len(lines)) if lines[j].strip() == "```")
        if match[2] in SHELL:
            marker = MARKER.search(lines[i - 1]) if i else None
            found.append(Block(f"{path.relative_to(root)}:{i + 1}", marker[1] if marker else None,
                               commands(lines[i + 1:end])))
        i = end + 1
    return found


def commands(body: list[str]) -> list[str]:
    """The block's commands: continuation lines joined, comments dropped (a `#` inside quotes stays)."""
    joined, current = [], ""
    for line in body:
        current += line.strip()
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        lexer = shlex.shlex(current, posix=True, punctuation_chars=False)
        lexer.whitespace_split, lexer.commenters = True, "#"
        try:
            list(lexer)  # validates the quoting
        except ValueError as err:
            raise AssertionError(f"not a shell command: {current!r} ({err})") from err
        text = _strip_comment(current)
        if text:
            joined.append(text)
        current = ""
    return joined


def _strip_comment(line: str) -> str:
    quote = None
    for index, char in enumerate(line):
        if quote:
            quote = None if char == quote else quote
        elif char in "'\"":
            quote = char
        elif char == "#" and (index == 0 or line[index - 1].isspace()):
            return line[:index].strip()
    return line.strip()


def dry_run(command: str) -> str:
    """The check of a command that takes minutes or needs AWS."""
    words = shlex.split(command)
    program = words[0]
    if program in (".", "source"):
        return command
    if program == "make":
        return shlex.join(["make", "-n", *words[1:]])
    if program == "aws":
        return shlex.join([*words[:3], "help"])
    if program == "npx" and words[1:2] == ["cdk"]:
        return shlex.join([*words[:3], "--help"])
    if program == "python" and words[1:2] == ["-m"]:
        head = words[:3] + [w for w in words[3:4] if SUBCOMMAND.fullmatch(w)]
        return shlex.join([*head, "--help"])
    if program == "python" and words[1].endswith(".py"):
        return shlex.join([*words[:2], "--help"])
    if program == "runctl":
        return shlex.join([*words[:1], *[w for w in words[1:2] if SUBCOMMAND.fullmatch(w)], "--help"])
    raise AssertionError(f"no dry run known for {command!r}: mark its block `run`, or add a rule here")


def all_blocks() -> list[Block]:
    return [block for path in DOCS for block in blocks(path)]


def test_every_shell_block_of_the_docs_is_marked() -> None:
    unmarked = [block.where for block in all_blocks() if block.mode is None]
    assert unmarked == [], "put <!-- docs-test: run --> or <!-- docs-test: dry-run --> on the line before each"
    assert len(all_blocks()) >= 5  # the walk found the README's blocks


def test_the_collector_reads_the_convention(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text("text\n<!-- docs-test: run -->\n```bash\nmake docs   # regenerate\necho 'a # b' \\\n  c\n```\n"
                   "```bash\nls\n```\n```json\n{}\n```\n")
    found = blocks(doc, tmp_path)
    assert [(b.where, b.mode, b.commands) for b in found] == [("doc.md:3", "run", ["make docs", "echo 'a # b'  c"]),
                                                               ("doc.md:8", None, ["ls"])]
    assert dry_run("make demo") == "make -n demo"
    assert dry_run("python -m runctl stage-model FacebookAI/roberta-base --env dev") == \
        "python -m runctl stage-model --help"
    assert dry_run("python -m local_mode run DIR/x.json --data DIR") == "python -m local_mode run --help"
    assert dry_run("npx cdk deploy -c env=dev --all") == "npx cdk deploy --help"
    assert dry_run("aws s3 cp a s3://b/c") == "aws s3 cp help"
    with pytest.raises(AssertionError, match="no dry run known"):
        dry_run("rm -rf /")


@pytest.fixture(scope="module")
def checkout(tmp_path_factory: pytest.TempPathFactory, dev_outdir: Path) -> Path:
    """A copy of the repository's tracked files (commands write where they run), with the venv, the CDK CLI and the
    synthesized dev app linked in."""
    root = tmp_path_factory.mktemp("docs-checkout") / "repo"
    tracked = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    for name in filter(None, tracked.decode().split("\0")):
        source = REPO / name
        if source.is_file():
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, root / name)
    for name in (".venv", "node_modules", ".whl"):
        if (REPO / name).exists():
            (root / name).symlink_to(REPO / name)
    (root / "cdk.out").symlink_to(dev_outdir)
    return root


def shell(script: str, cwd: Path, tmp: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYTHON")) and k != "VIRTUAL_ENV"}
    env.update(PATH=f"{cwd / '.venv' / 'bin'}:{env.get('PATH', '')}", AWS_EC2_METADATA_DISABLED="true",
               AWS_CONFIG_FILE=str(tmp / "no-aws-config"), AWS_SHARED_CREDENTIALS_FILE=str(tmp / "no-aws-config"),
               HF_HUB_OFFLINE="1", PAGER="cat", MANPAGER="cat",
               # the copy's training code before the editable install's: what a command writes lands in the copy
               PYTHONPATH=str(cwd / "training_code"))
    return subprocess.run(["bash", "-e", "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=600, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize("block", [b for b in all_blocks() if b.mode], ids=lambda b: b.where)
def test_each_documented_command_works(block: Block, checkout: Path, tmp_path: Path) -> None:
    if block.mode == "run":
        script = "\n".join(c.replace("/tmp/", f"{tmp_path}/") for c in block.commands)
    else:
        script = "\n".join(dry_run(c) for part in block.commands for c in _split(part))
    done = shell(script, checkout, tmp_path)
    assert done.returncode == 0, f"{block.where} ({block.mode}):\n{script}\n---\n{done.stdout[-2000:]}" \
                                 f"\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr, done.stderr[-3000:]


def _split(command: str) -> list[str]:
    return [part.strip() for part in command.split(";") if part.strip()]
