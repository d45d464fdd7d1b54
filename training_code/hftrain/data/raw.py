"""The raw rows a run reads (run/runner.py's data_load phase): a path hyperparameter, a channel, or a Hub dataset."""

from __future__ import annotations

import os

from hftrain.data.files import DataError, load_hub, load_local
from hftrain.parallel import process_group as distributed


def load_raw(data_args, env, which: str, cache_dir):
    """(dataset or None, sharded) for 'train' or 'validation'."""
    explicit = data_args.train_path if which == "train" else data_args.validation_path
    if explicit:
        return load_local(explicit, data_format=data_args.data_format, cache_dir=cache_dir), False
    channel = env.channels.get(which)
    if channel and not os.path.isdir(channel) and env.is_sharded(which):
        return None, True  # ShardedByS3Key with fewer objects than hosts: this host got none
    if channel and os.path.isdir(channel):
        sharded = env.is_sharded(which)
        return load_local(channel, data_format=data_args.data_format, cache_dir=cache_dir, allow_empty=sharded), sharded
    if data_args.dataset_name:
        split = data_args.train_split if which == "train" else data_args.validation_split
        if not split:
            return None, False
        return load_hub(data_args.dataset_name, data_args.dataset_config_name, split, cache_dir), False
    if which == "train":
        raise DataError(
            "no training data: send a `train` channel (SM_CHANNEL_TRAIN), or set train_path (e.g. an FSx path) "
            "or dataset_name (Hub, online only)"
        )
    return None, False


def data_source(data_args, env, which: str) -> str | None:
    """What load_raw reads for 'train' or 'validation': a path, 'hub:<name>/<config>/<split>', or None."""
    explicit = data_args.train_path if which == "train" else data_args.validation_path
    if explicit:
        return explicit
    channel = env.channels.get(which)
    if channel and os.path.isdir(channel):
        return channel
    split = data_args.train_split if which == "train" else data_args.validation_split
    if data_args.dataset_name and split:
        return f"hub:{data_args.dataset_name}/{data_args.dataset_config_name}/{split}"
    return None


def gather_sharded(dataset):
    """A sharded validation channel: every rank gets every host's rows (validation sets are small)."""
    import datasets

    rows = dataset.to_list() if (dataset is not None and distributed.local_rank() == 0) else []
    everything = [row for part in distributed.all_gather_objects(rows) for row in part]
    if not everything:
        return None
    return datasets.Dataset.from_list(everything)


def first_rows(dataset, limit):
    if dataset is not None and limit:
        return dataset.select(range(min(len(dataset), limit)))
    return dataset


def row_count(dataset) -> int:
    return len(dataset) if dataset is not None else 0
