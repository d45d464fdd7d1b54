"""Stand-ins for the job images on this machine, and the inference image's library versions in a cached venv.

`simulated_image(root, lacks)`: a fresh venv that sees this test venv's packages *except* the distributions the
image lacks (a symlinked view of site-packages without their files), with its own pip. A job started with it
has to install what the image lacks, and can only do so from what it was shipped.

`inference_python(transformers_version)`: a venv under .cache/ (ignored, reused) with the inference image's
transformers, huggingface-hub and multi-model-server versions, PyPI's sagemaker-huggingface-inference-toolkit and
this machine's torch 2.13.0 CPU wheel (no CUDA torch is ever downloaded).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Iterable
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache" / "inference-venvs"
TOOLKIT = "sagemaker-huggingface-inference-toolkit==2.6.0"  # what the 4.51.3 inference image installs
TORCH_VERSION = "2.13.0"  # the CPU build on this machine's disk (pip's find-links): never the CUDA one


def local_torch_wheel() -> Path | None:
    """The CPU torch wheel in pip's configured find-links (PIP_FIND_LINKS or pip config), if there is one."""
    dirs = os.environ.get("PIP_FIND_LINKS", "").split()
    done = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True)
    for line in done.stdout.splitlines():
        if "find-links" in line:
            dirs += line.split("=", 1)[1].strip().strip("'\"").split()
    for directory in dirs:
        found = sorted(Path(directory).glob(f"torch-{TORCH_VERSION}+cpu-*.whl")) if Path(directory).is_dir() else []
        if found:
            return found[0]
    return None


def _top_levels(name: str) -> set[str]:
    dist = importlib.metadata.distribution(name)
    return {Path(str(f)).parts[0] for f in (dist.files or []) if Path(str(f)).parts[0] != ".."}


def simulated_image(root: Path, lacks: Iterable[str]) -> Path:
    """The python of a venv that has this venv's packages minus `lacks`; returns its interpreter."""
    site = Path(sysconfig.get_paths()["purelib"])
    hidden = set().union(*(_top_levels(name) for name in lacks))
    view = root / "image-site-packages"
    view.mkdir(parents=True)
    for entry in site.iterdir():
        if entry.name not in hidden and not entry.name.endswith(".pth") and entry.name not in ("pip", "_distutils_hack"):
            (view / entry.name).symlink_to(entry)
    venv = root / "image-venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    python = venv / "bin" / "python"
    own = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                              check=True, capture_output=True, text=True).stdout.strip())
    for entry in own.iterdir():  # the venv's bundled setuptools would shadow the (newer) one the image has
        if entry.name.startswith(("setuptools", "pkg_resources", "_distutils_hack", "distutils-precedence")):
            shutil.rmtree(entry) if entry.is_dir() else entry.unlink()
    (own / "_image_packages.pth").write_text(f"{view}\n")
    for script, module in (("train", "sagemaker_training.cli.train"), ("torchrun", "torch.distributed.run")):
        path = venv / "bin" / script
        path.write_text(f"#!{python}\nimport sys\nfrom {module} import main\nsys.exit(main())\n")
        path.chmod(0o755)
    return python


def offline_pip_env(env: dict[str, str]) -> dict[str, str]:
    """Every package index unreachable, and no pip configuration (this machine's find-links) in play."""
    out = {k: v for k, v in env.items() if not k.startswith("PIP_")}
    out.update({"PIP_NO_INDEX": "1", "PIP_INDEX_URL": "http://127.0.0.1:9/simple",
                "PIP_EXTRA_INDEX_URL": "http://127.0.0.1:9/extra", "PIP_CONFIG_FILE": os.devnull,
                "PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_DEFAULT_TIMEOUT": "3", "PIP_RETRIES": "0"})
    return out


def inference_python(pins: dict[str, str]) -> Path:
    """A cached venv with the inference image's versions (`pins`: name -> version); returns its interpreter."""
    torch = local_torch_wheel()
    if torch is None:
        raise FileNotFoundError(f"no torch-{TORCH_VERSION}+cpu wheel in pip's find-links: refusing to download a CUDA "
                                "build")
    requirements = sorted(f"{name}=={version}" for name, version in pins.items()) + [str(torch),
                                                                                      "sagemaker-inference", "retrying"]
    digest = hashlib.sha256("\n".join([*requirements, TOOLKIT]).encode()).hexdigest()[:12]
    venv = CACHE / f"transformers-{pins['transformers']}-{digest}"
    python = venv / "bin" / "python"
    if (venv / ".complete").exists():
        return python
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, capture_output=True)
    for args in (requirements, ["--no-deps", TOOLKIT]):  # the toolkit's audio extras are not needed to serve text
        done = subprocess.run([str(python), "-m", "pip", "install", "-q", *args], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"installing {args} failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    (venv / ".complete").write_text("ok\n")
    return python
