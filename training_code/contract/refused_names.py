"""The names the training code gives to what it refused under a run's checkpoint prefix, and the pattern that finds
them there.

Producers (the training code renames in place and never deletes what it refused): a directory at a checkpoint's
name that was not a verified checkpoint of this run, moved aside before its step is saved again,
`checkpoint-<step>.unverified-<k>/` (hftrain/checkpoint/manager.py `quarantine_name`); a tokenized data set whose
marker did not verify, `_tokenized/<digest>[.<host>].refused-<k>/` (hftrain/data/tokenized_cache.py). Consumer:
lambda/runs/set_aside.py, which moves every object under such a directory to `refused/<run_id>/` before an attempt
starts (SageMaker copies the whole checkpoint prefix to every instance at every start; no job reads `refused/`).
"""

from __future__ import annotations

import re

from contract.checkpoint_marker import PREFIX

QUARANTINE_TAG = ".unverified-"  # checkpoint-<step>.unverified-<k>
CACHE_DIR = "_tokenized"  # the tokenized data sets kept with the checkpoints
REFUSED_TAG = ".refused-"  # _tokenized/<name>.refused-<k>
# a tokenized data set's directory (fullmatch): the first 20 hex digits of its fingerprint; a sharded channel's
# adds the host
CACHE_NAME_RE = re.compile(r"(?P<digest>[0-9a-f]{20})(?:\.(?P<host>[A-Za-z0-9_-]+))?")
# an object under a refused directory, relative to the checkpoint prefix (fullmatch); group `directory`
REFUSED_KEY_RE = re.compile(
    rf"(?P<directory>{re.escape(PREFIX)}\d+{re.escape(QUARANTINE_TAG)}\d+"
    rf"|{re.escape(CACHE_DIR)}/{CACHE_NAME_RE.pattern}{re.escape(REFUSED_TAG)}\d+)/.+",
    re.DOTALL,
)
