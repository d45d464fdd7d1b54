"""Where the model and tokenizer come from (a Hub id, a directory, a `model`/`tokenizer` channel, a model.tar.gz)
and loading them (runner.py's model_load phase)."""

from __future__ import annotations

import hashlib
import logging
import os
import tarfile
import tempfile
from pathlib import Path

from hftrain import args as hp
from hftrain import smenv
from hftrain.data.files import DataError
from hftrain.parallel import process_group as distributed

logger = logging.getLogger("hftrain")


def _extract_model_archive(archive: str) -> str:
    """model.tar.gz -> a directory (extracted once per node: local rank 0 first, the others wait)."""
    digest = hashlib.sha256(f"{archive}:{os.path.getsize(archive)}:{os.path.getmtime(archive)}".encode()).hexdigest()
    target = Path(tempfile.gettempdir()) / f"hftrain-model-{digest[:16]}"
    if distributed.local_rank() == 0 and not (target / ".done").exists():
        target.mkdir(parents=True, exist_ok=True)
        with tarfile.open(archive, "r:*") as tar:
            tar.extractall(target, filter="data")
        (target / ".done").write_text("ok")
    distributed.barrier()
    # an archive that holds one top-level directory
    entries = [p for p in target.iterdir() if p.name != ".done"]
    if len(entries) == 1 and entries[0].is_dir() and not (target / "config.json").exists():
        return str(entries[0])
    return str(target)


def resolve_model_path(model_args, env: smenv.SageMakerEnv) -> str:
    channel = env.channels.get("model")
    if model_args.model_name_or_path:
        if channel and os.path.isdir(channel) and os.listdir(channel):
            logger.warning("both model_name_or_path and a model channel are set: using %s", model_args.model_name_or_path)
        path = model_args.model_name_or_path
    elif channel and os.path.isdir(channel):
        path = channel
    else:
        raise hp.ArgumentError(
            "no model: set the model_name_or_path hyperparameter (a Hub id or directory) or send a `model` channel"
        )
    if os.path.isfile(path) and (path.endswith((".tar.gz", ".tgz", ".tar"))):
        return _extract_model_archive(path)
    if os.path.isdir(path) and not os.path.exists(os.path.join(path, "config.json")):
        archives = sorted(p for p in os.listdir(path) if p.endswith((".tar.gz", ".tgz")))
        if archives:
            return _extract_model_archive(os.path.join(path, archives[0]))
        raise DataError(f"the model directory {path} has no config.json and no model.tar.gz")
    return path


def resolve_tokenizer_path(model_args, env: smenv.SageMakerEnv, model_path: str) -> str:
    if model_args.tokenizer_name_or_path:
        return model_args.tokenizer_name_or_path
    channel = env.channels.get("tokenizer")
    if channel and os.path.isdir(channel) and os.listdir(channel):
        for root, _dirs, files in os.walk(channel):  # the tokenizer stage may nest its output
            if "tokenizer.json" in files or "tokenizer_config.json" in files:
                return root
        raise DataError(f"the tokenizer channel {channel} has no tokenizer.json / tokenizer_config.json")
    return model_path


def prepare_tokenizer(tokenizer, task):
    if tokenizer.pad_token is None:
        if tokenizer.eos_token is not None:
            tokenizer.pad_token = tokenizer.eos_token
        else:
            raise DataError("the tokenizer has no pad token and no eos token to pad with; add a [PAD] token")
    task.check_tokenizer(tokenizer)
    return tokenizer


def load_model(task, model_path, config, model_args):
    """The pretrained model: safetensors weights only unless `allow_pickle` (a pickle-only model is refused
    before any pickle is opened, saying how to proceed)."""
    kwargs = dict(
        config=config,
        cache_dir=model_args.cache_dir,
        revision=model_args.model_revision,
        trust_remote_code=model_args.trust_remote_code,
        use_safetensors=None if model_args.allow_pickle else True,
        **task.model_kwargs(),
    )
    try:
        return task.auto_model.from_pretrained(model_path, attn_implementation=model_args.attn_implementation, **kwargs)
    except OSError as err:
        if model_args.allow_pickle or "safetensors" not in str(err):
            raise
        raise DataError(f"the model {model_path} has no safetensors weights (model.safetensors): pickle weights "
                        "(pytorch_model.bin) are loaded only with the hyperparameter allow_pickle: true, since a "
                        "pickle can run code. Convert the model (save_pretrained with safe_serialization=True) or "
                        "opt in") from err
    except (ValueError, ImportError) as err:
        if model_args.attn_implementation == "eager" or "attn" not in str(err).lower() and "sdpa" not in str(err).lower():
            raise
        logger.warning("attention %s unavailable for this model (%s); using eager", model_args.attn_implementation, err)
        return task.auto_model.from_pretrained(model_path, attn_implementation="eager", **kwargs)
