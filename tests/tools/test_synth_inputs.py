"""tools/synth_inputs.py: the digest `make synth-if-changed` compares changes with every input of the synth, and only
with those."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tools import synth_inputs

REPO = Path(__file__).resolve().parents[2]
LIBS = ["aws-cdk-lib==2.0.0"]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    for name in ("app.py", "cdk.json", "package-lock.json", "requirements.txt"):
        (tmp_path / name).write_text(name)
    for folder in ("stacks", "lambda/spec", "training_code/hftrain"):
        (tmp_path / folder).mkdir(parents=True)
        (tmp_path / folder / "mod.py").write_text("x = 1\n")
    return tmp_path


def test_every_input_changes_the_digest(repo: Path) -> None:
    before = synth_inputs.digest("dev", repo, LIBS)
    assert synth_inputs.digest("dev", repo, LIBS) == before  # deterministic
    assert synth_inputs.digest("prod", repo, LIBS) != before
    assert synth_inputs.digest("dev", repo, ["aws-cdk-lib==2.0.1"]) != before
    for edit in ("app.py", "cdk.json", "package-lock.json", "requirements.txt", "stacks/mod.py", "lambda/spec/mod.py",
                 "training_code/hftrain/mod.py"):
        original = (repo / edit).read_text()
        (repo / edit).write_text(original + "# edited\n")
        assert synth_inputs.digest("dev", repo, LIBS) != before, edit
        (repo / edit).write_text(original)
    assert synth_inputs.digest("dev", repo, LIBS) == before
    (repo / "lambda" / "new.py").write_text("")
    assert synth_inputs.digest("dev", repo, LIBS) != before, "a new file"
    (repo / "lambda" / "new.py").unlink()
    (repo / "stacks" / "mod.py").rename(repo / "stacks" / "renamed.py")
    assert synth_inputs.digest("dev", repo, LIBS) != before, "a renamed file"
    (repo / "stacks" / "renamed.py").rename(repo / "stacks" / "mod.py")
    (repo / "cdk.json").unlink()
    assert synth_inputs.digest("dev", repo, LIBS) != before, "a deleted file"


def test_byte_code_and_outputs_do_not(repo: Path) -> None:
    before = synth_inputs.digest("dev", repo, LIBS)
    (repo / "stacks" / "__pycache__").mkdir()
    (repo / "stacks" / "__pycache__" / "mod.cpython-311.pyc").write_bytes(b"\0")
    (repo / "training_code" / "x.egg-info").mkdir()
    (repo / "training_code" / "x.egg-info" / "PKG-INFO").write_text("")
    for output in ("cdk.out", "build", ".local-runs", "tests"):
        (repo / output).mkdir()
        (repo / output / "f").write_text("")
    assert synth_inputs.digest("dev", repo, LIBS) == before


def test_the_checkout_s_inputs_cover_the_app_and_its_packages() -> None:
    names = {p.relative_to(REPO).as_posix() for p in synth_inputs.input_files()}
    assert {"app.py", "cdk.json", "package-lock.json", "stacks/app_builder.py", "lambda/handlers.py",
            "stacks/assets/job_wheels.lock", "training_code/train.py"} <= names
    assert not any("__pycache__" in name for name in names)
    # every top-level package the app imports is covered (stacks, hfsm_lambda, contract)
    assert {n.split("/")[0] for n in names} >= {"stacks", "lambda", "training_code"}


def test_check_and_write(tmp_path: Path) -> None:
    out = tmp_path / "cdk.out"
    out.mkdir()
    assert synth_inputs.main(["dev", "--check", str(out)]) == 1  # nothing recorded
    assert synth_inputs.main(["dev", "--write", str(out)]) == 0
    assert synth_inputs.main(["dev", "--check", str(out)]) == 0
    assert synth_inputs.main(["prod", "--check", str(out)]) == 1
    assert synth_inputs.main(["dev", "--write", str(out), "--digest", "abc"]) == 0
    assert synth_inputs.main(["dev", "--check", str(out)]) == 1
    shutil.rmtree(out)
    assert synth_inputs.main(["dev", "--check", str(out)]) == 1
