"""`runctl stage-model HUB_ID --env NAME`: a Hugging Face Hub model, downloaded on this machine, uploaded under
`base-models/` of the environment's data bucket, for environments whose jobs cannot reach the Hub (no NAT
gateway: dev) or should not (network-isolated jobs).

The download is `huggingface_hub.snapshot_download` (installed with transformers) into its usual cache, weights of
other frameworks left out (TensorFlow, Flax, ONNX, ...); the files go to
`s3://<data bucket>/base-models/<org>/<name>/<commit>/` (the commit the revision resolved to, so the staged
copy is pinned), which is the URI to put in the spec's `model`. `--from-dir DIR` uploads a model folder that is
already on this machine instead (a `save_pretrained` folder: config.json, weights, tokenizer files).
The data bucket's name comes from cdk.out (`make synth ENV=NAME`) unless `--bucket` names it; the bucket's
default encryption (the project key) applies, as its policy requires.

Pickle files (`pytorch_model.bin`, `training_args.bin`, `*.pt`, ...) are left out: the training code loads
safetensors weights only unless the spec sets the hyperparameter `allow_pickle: true` (a pickle can run code). A
model without safetensors weights is refused unless `--allow-pickle` is given, which uploads its pickles as they
are (then set `allow_pickle: true` in the spec's hyperparameters).
"""

from __future__ import annotations

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

    return Path(snapshot_download(repo_id=hub_id, revision=revision, ignore_patterns=IGNORE))


def stage(clients: Clients, bucket: str, hub_id: str, *, revision: str | None = None, from_dir: Path | None = None,
          fetch: Callable[[str, str | None], Path] = download, say: Callable[[str], None] = print,
          allow_pickle: bool = False) -> dict[str, Any]:
    naming_ok = re.fullmatch(HUB_ID, hub_id)
    if not naming_ok:
        raise RunctlError(f"{hub_id!r} is not a Hugging Face Hub id like 'org/name'")
    if from_dir is None:
        say(f"downloading {hub_id}{f'@{revision}' if revision else ''} from the Hugging Face Hub ...")
        folder = fetch(hub_id, revision)
    else:
        folder = from_dir
    if not (folder / "config.json").is_file():
        raise RunctlError(f"{folder} has no config.json: not a model folder (save_pretrained writes one)")
    version = folder.name if COMMIT.fullmatch(folder.name) else (revision or "local")
    key = f"{PREFIX}{hub_id}/{version}/"
    files = sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith("."))
    if not allow_pickle:
        if not any(p.name.endswith(".safetensors") for p in files):
            raise RunctlError(f"{hub_id} ({folder}) has no safetensors weights, only pickle files the training code "
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
    say(f"uploaded {len(files)} files ({total / 1e6:.1f} MB) of {hub_id} ({'commit ' + version if COMMIT.fullmatch(version) else version}) to {uri}")
    say(f'put it in the run spec: "model": "{uri}"')
    return {"hub_id": hub_id, "version": version, "uri": uri, "files": len(files), "bytes": total}
