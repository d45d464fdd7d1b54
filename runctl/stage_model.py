"""`runctl stage-model HUB_ID --env NAME` (or `runctl stage-model --from-dir DIR`): a Hugging Face Hub model, downloaded on this machine, uploaded under
`base-models/` of the environment's data bucket, for environments whose jobs cannot reach the Hub (no NAT
gateway: dev) or should not (network-isolated jobs).

The download is `huggingface_hub.snapshot_download` (installed with transformers) into its usual cache, weights of
other frameworks left out (TensorFlow, Flax, ONNX, ...); the files go to
`s3://<data bucket>/base-models/<org>/<name>/<commit>/` (the commit the revision resolved to, so the staged
copy is pinned), which is the URI to put in the spec's `model`. `--from-dir DIR` uploads a model folder that is
already on this machine instead (a `save_pretrained` folder: config.json, weights, tokenizer files): under the Hub id
when one is given, else under `base-models/local/<folder name>/<first 12 hex of the files' sha256>/` (pinned to its
content as a commit pins a Hub model).
The data bucket's name comes from cdk.out (`make synth ENV=NAME`) unless `--bucket` names it; the bucket's
default encryption (the project key) applies, as its policy requires.

Pickle files (`pytorch_model.bin`, `training_args.bin`, `*.pt`, ...) are left out: the training code loads
safetensors weights only unless the spec sets the hyperparameter `allow_pickle: true` (a pickle can run code). A
model without safetensors weights is refused unless `--allow-pickle` is given, which uploads its pickles as they
are (then set `allow_pickle: true` in the spec's hyperparameters).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from cloud_assembly.reader import AssemblyError, CloudAssembly
from hfsm_lambda.spec.run_spec import HUB_ID
from runctl.core import Clients, RunctlError

PREFIX = "base-models/"
# Weights for other frameworks: a PyTorch job never reads them.
IGNORE = ["*.h5", "*.msgpack", "*.ot", "*.onnx", "onnx/*", "tf_model*", "flax_model*", "rust_model*", "coreml/*",
          "*.tflite", "openvino/*", ".gitattributes"]
COMMIT = re.compile(r"[0-9a-f]{40}")
PICKLES = (".bin", ".pt", ".pth", ".ckpt", ".pkl", ".pickle")  # torch.save / pickle formats


def is_pickle(path: Path) -> bool:
    return path.name.lower().endswith(PICKLES)


def data_bucket(cdk_out: Path, environment: str) -> tuple[str, str]:
    """(data bucket, region) of `environment` as cdk.out names them."""
    try:
        assembly = CloudAssembly(cdk_out)
        if assembly.environment_name != environment:
            raise RunctlError(f"{cdk_out} holds environment {assembly.environment_name!r}, not {environment!r}: run "
                              f"`make synth ENV={environment}`, or pass --bucket")
        return assembly.data_bucket_name(), assembly.stacks[0].region
    except AssemblyError as err:
        raise RunctlError(f"{err} (or pass --bucket)") from err


def download(hub_id: str, revision: str | None) -> Path:
    """The model's files on this machine (huggingface_hub's cache), its commit as the folder name."""
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(repo_id=hub_id, revision=revision, ignore_patterns=IGNORE))
    except OSError as err:  # every huggingface_hub error (no network, no such repo or revision, gated) is one
        first = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise RunctlError(f"cannot download {hub_id} from the Hugging Face Hub ({type(err).__name__}: {first}). "
                          "Check the id and your network; or save the model on a machine that reaches the Hub "
                          "(save_pretrained) and stage that folder: runctl stage-model --from-dir DIR") from err


def local_key(folder: Path, files: list[Path]) -> tuple[str, str]:
    """(name, version) of a model folder staged without a Hub id: its folder name, and its content's digest."""
    digest = hashlib.sha256()
    for path in files:
        digest.update(path.relative_to(folder).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    slug = re.sub(r"[^a-z0-9-]+", "-", folder.resolve().name.lower()).strip("-") or "model"
    return f"local/{slug}", digest.hexdigest()[:12]


def model_files(folder: Path) -> list[Path]:
    if not folder.is_dir():
        raise RunctlError(f"{folder} is not a folder: give a model folder written by save_pretrained (config, "
                          "weights, tokenizer)")
    if not (folder / "config.json").is_file():
        raise RunctlError(f"{folder} has no config.json: not a model folder (save_pretrained writes one)")
    return sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))


def staged_uri(bucket: str, folder: Path) -> str:
    """Where `stage-model --from-dir FOLDER` (no Hub id) puts a folder: what `runctl plan` plans with."""
    name, version = local_key(folder, _kept(model_files(folder), allow_pickle=False))
    return f"s3://{bucket}/{PREFIX}{name}/{version}/"


def _kept(files: list[Path], *, allow_pickle: bool) -> list[Path]:
    return files if allow_pickle else [p for p in files if not is_pickle(p)]


def stage(clients: Clients, bucket: str, hub_id: str | None, *, revision: str | None = None,
          from_dir: Path | None = None, fetch: Callable[[str, str | None], Path] = download,
          say: Callable[[str], None] = print, allow_pickle: bool = False) -> dict[str, Any]:
    if hub_id is None and from_dir is None:
        raise RunctlError("name a Hugging Face Hub id to download (e.g. FacebookAI/roberta-base), or give "
                          "--from-dir DIR to upload a model folder on this machine")
    if hub_id is not None and not re.fullmatch(HUB_ID, hub_id):
        raise RunctlError(f"{hub_id!r} is not a Hugging Face Hub id like 'org/name' (for a model folder on this "
                          "machine: --from-dir DIR, with no Hub id)")
    if hub_id is None and revision:
        raise RunctlError("--revision names a Hub revision: give the Hub id too, or leave --revision out")
    if from_dir is None:
        assert hub_id is not None
        say(f"downloading {hub_id}{f'@{revision}' if revision else ''} from the Hugging Face Hub ...")
        folder = fetch(hub_id, revision)
    else:
        folder = from_dir
    files = model_files(folder)
    if hub_id is None:
        name, version = local_key(folder, _kept(files, allow_pickle=allow_pickle))
    else:
        name, version = hub_id, folder.name if COMMIT.fullmatch(folder.name) else (revision or "local")
    key = f"{PREFIX}{name}/{version}/"
    if not allow_pickle:
        if not any(p.name.endswith(".safetensors") for p in files):
            raise RunctlError(f"{hub_id or folder.name} ({folder}) has no safetensors weights, only pickle files the training code "
                              "does not load by default (a pickle can run code): convert it (save_pretrained with "
                              "safe_serialization=True), or pass --allow-pickle and set the hyperparameter "
                              "allow_pickle: true in the spec")
        left = [p.name for p in files if is_pickle(p)]
        files = [p for p in files if not is_pickle(p)]
        if left:
            say(f"left out pickle files: {', '.join(left[:10])}{' ...' if len(left) > 10 else ''} (--allow-pickle "
                "uploads them)")
    total = 0
    for path in files:
        clients.s3.upload_file(str(path), bucket, key + path.relative_to(folder).as_posix())
        total += path.stat().st_size
    uri = f"s3://{bucket}/{key}"
    what = "commit " + version if COMMIT.fullmatch(version) else ("content " + version if hub_id is None else version)
    say(f"uploaded {len(files)} files ({total / 1e6:.1f} MB) of {hub_id or folder} ({what}) to {uri}")
    say(f'put it in the run spec: "model": "{uri}"')
    return {"hub_id": hub_id, "from_dir": None if from_dir is None else str(from_dir), "version": version,
            "uri": uri, "files": len(files), "bytes": total}
