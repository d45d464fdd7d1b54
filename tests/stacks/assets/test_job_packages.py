"""The jobs install nothing from an index, and the versions tested here are the versions the jobs run."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path

import pytest

from stacks.assets import inference_compat, job_images, job_wheels
from stacks.settings.environment import ConfigError, load_config

REPO = Path(__file__).resolve().parents[3]
CONTEXT = json.loads((REPO / "cdk.json").read_text())["context"]


def _pins(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            name, _, version = line.partition("==")
            out[name.lower()] = version
    return out


def _installed(name: str) -> str:
    return importlib.metadata.version(name)


def test_job_requirements_install_from_the_shipped_wheels_only():
    lines = (REPO / "training_code" / "requirements.txt").read_text().splitlines()
    assert "--no-index" in lines and "--find-links wheels" in lines
    runproc = (REPO / "training_code" / "runproc.sh").read_text()
    assert "--no-index --no-deps" in runproc and "--find-links wheels -r requirements-processing.txt" in runproc
    locked = {entry.name: entry.version for entry in job_wheels.read_lock()}
    for path in ("requirements.txt", "requirements-processing.txt"):
        for name, version in _pins(REPO / "training_code" / path).items():
            assert locked.get(name) == version, f"{path}: {name}=={version} is not in stacks/assets/job_wheels.lock"


def test_the_versions_tested_are_the_versions_the_jobs_run():
    for path in ("requirements.txt", "requirements-processing.txt"):
        for name, version in _pins(REPO / "training_code" / path).items():
            assert _installed(name) == version, f"{name}: tests use {_installed(name)}, the jobs {version}"
    for env in ("dev", "prod"):
        image = job_images.training_image(load_config(CONTEXT, env))
        shipped = _pins(REPO / "training_code" / "requirements.txt")
        for name in ("transformers", "datasets", "huggingface-hub"):
            assert name not in shipped
            assert _installed(name) == image.packages[name], f"{name}: tests use {_installed(name)}, image has " \
                                                             f"{image.packages[name]}"
        for lacking in image.lacks:
            assert lacking in shipped, f"the image lacks {lacking}: it must be shipped"


def test_the_processing_image_gets_what_the_tokenizer_jobs_import():
    image = job_images.PROCESSING[load_config(CONTEXT, "dev").processing_pytorch_version]
    shipped = _pins(REPO / "training_code" / "requirements-processing.txt")
    imports = set()
    for path in [REPO / "training_code" / "tokenizer_map.py", REPO / "training_code" / "tokenizer_reduce.py",
                 *(REPO / "training_code" / "tokenizer_mr").glob("*.py")]:
        for line in path.read_text().splitlines():
            words = line.strip().split()
            if len(words) >= 2 and words[0] in ("import", "from") and not words[1].startswith("."):
                imports.add(words[1].split(".")[0])
    third_party = imports - {"__future__", "tokenizer_mr"} - set(__import__("sys").stdlib_module_names)
    assert third_party == {"numpy", "pyarrow", "tokenizers", "tokenizer_mr_native"}
    for module in third_party:
        name = module.replace("_", "-")
        assert name in shipped or name in image.packages, f"{module}: neither in the image nor shipped"


def test_a_tampered_download_is_refused(tmp_path, monkeypatch):
    lock = tmp_path / "lock.json"
    lock.write_text(json.dumps({"packages": [{"name": "six", "version": "1.17.0",
                                              "file": "six-1.17.0-py2.py3-none-any.whl", "sha256": "0" * 64}]}))

    def fake_pip(*args):
        target = Path(args[args.index("-d") + 1])
        (target / "six-1.17.0-py2.py3-none-any.whl").write_bytes(b"not the locked file")

    monkeypatch.setattr(job_wheels, "_pip", fake_pip)
    with pytest.raises(job_wheels.WheelError, match="expected six-1.17.0-py2.py3-none-any.whl with sha256 0000"):
        job_wheels.wheel_dir(lock, tmp_path / "cache")
    assert not (tmp_path / "cache" / job_wheels.lock_digest(lock)).exists()


@pytest.mark.parametrize(("train", "serve", "ok"), [
    ("5.3.0", "4.51.3", True), ("5.3.0", "5.5.3", False), ("5.3.0", "4.49.0", False), ("4.56.2", "4.51.3", False),
    ("4.49.0", "4.51.3", True), ("4.51.3", "4.51.3", True)])
def test_inference_image_must_read_what_training_writes(train, serve, ok):
    assert (inference_compat.problem(train, serve) is None) == ok


def test_an_incompatible_inference_version_fails_synth():
    context = json.loads(json.dumps(CONTEXT))
    context["environments"]["dev"]["inference_transformers_version"] = "5.5.3"
    cfg = load_config(context, "dev")
    with pytest.raises(ConfigError, match="inference_transformers_version='5.5.3'.*no question-answering"):
        inference_compat.check(cfg)


def test_an_image_without_a_recorded_package_list_fails_synth():
    context = json.loads(json.dumps(CONTEXT))
    context["environments"]["dev"]["processing_pytorch_version"] = "2.7.0"
    with pytest.raises(ConfigError, match="processing_pytorch_version=2.7.0.*stacks/assets/job_images.py"):
        job_images.check(load_config(context, "dev"))
