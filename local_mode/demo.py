"""`python -m local_mode demo`: the whole pipeline offline, as a new user first sees it.

A generated extractive-QA dataset (SQuAD format; the answer is the two words after the marker word "key") and
a tiny BERT-like model built from a config are uploaded to the emulated data bucket; then a run spec under
runs/ starts the run: tokenizer map on 2 hosts + reduce -> fine-tuning on 2 hosts with one spot interruption
injected mid-training (none with --interrupt-at-step 0) -> model package -> notification.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from importlib.metadata import version
from pathlib import Path
from typing import Any

from local_mode.cli_runs import conclude, warm_model_check
from local_mode.session import LocalSession, RunOutcome
from local_mode.synthetic import build_model_dir, qa_examples, write_jsonl

DEMO_NAME = "demo-qa"
INTERRUPT_AT_STEP = 100
# The generated inputs, built once and reused by every later demo: named by what makes them (this module, the
# generators, the torch and transformers that write the model). The rows are seeded; a fresh build's tiny tokenizer
# may number equal-count words in another order, which no run depends on.
INPUTS_CACHE = Path(__file__).resolve().parents[1] / ".cache" / "demo-inputs"


def demo_spec(data_bucket: str) -> dict[str, Any]:
    return {
        "version": 1,
        "name": DEMO_NAME,
        "description": "Local demo: tokenizer map/reduce, then extractive QA on 2 hosts with spot checkpoints",
        "task": "question-answering",
        "model": f"s3://{data_bucket}/base-models/tiny-bert/",
        "data": {
            "train": {"s3": "datasets/demo-qa/train/", "distribution": "ShardedByS3Key"},
            "validation": {"s3": "datasets/demo-qa/validation/"},
        },
        "tokenizer": {"type": "wordpiece", "vocab_size": 400, "min_frequency": 1, "lowercase": True,
                      "text_field": "context", "model_max_length": 256, "instance_type": "ml.c5.2xlarge",
                      "instance_count": 2},
        "compute": {"instance_type": "ml.g5.2xlarge", "instance_count": 2},
        "distribution": {"strategy": "ddp"},
        "spot": {"enabled": True},
        "max_runtime_seconds": 3600,
        "checkpoint": {"every_steps": 50},
        "hyperparameters": {"max_steps": 300, "per_device_train_batch_size": 16, "learning_rate": 0.003,
                            "max_seq_length": 128, "doc_stride": 32, "logging_steps": 10, "warmup_ratio": 0.0,
                            "seed": 7},
        "tags": {"purpose": "local-demo"},
    }


def build_inputs(folder: Path) -> Path:
    """The dataset and base model the demo uploads (generated, deterministic, nothing downloaded)."""
    train = folder / "datasets" / "demo-qa" / "train"
    if not train.exists():
        rows = qa_examples(640, seed=1)
        for i in range(4):  # 4 objects: ShardedByS3Key gives each of 2 hosts 2 of them
            write_jsonl(train / f"part-{i}.jsonl", rows[i::4])
        write_jsonl(folder / "datasets" / "demo-qa" / "validation" / "part-0.jsonl", qa_examples(64, seed=2))
    build_model_dir("bert", folder / "base-models" / "tiny-bert")
    return folder


def cached_inputs(cache: Path = INPUTS_CACHE) -> Path:
    """The demo's inputs from the cache, built there first when absent (a private temp folder renamed into place:
    two demos at once each get a complete folder). Nothing writes into it afterwards: the demo uploads copies."""
    made_by = [Path(__file__).read_bytes(), Path(build_model_dir.__code__.co_filename).read_bytes(),
               version("torch").encode(), version("transformers").encode()]
    folder = cache / hashlib.sha256(b"\0".join(made_by)).hexdigest()[:16]
    if folder.is_dir():  # renamed into place only once complete
        return folder
    cache.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".building.", dir=cache))
    try:
        build_inputs(tmp)
        try:
            tmp.rename(folder)
        except OSError:
            if not folder.is_dir():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def run_demo(cdk_out: Path, work_dir: Path, *, interrupt_at_step: int = INTERRUPT_AT_STEP,
             verbose: bool = False, tracking: bool | str = False) -> RunOutcome:
    t0 = time.time()
    work_dir.mkdir(parents=True, exist_ok=True)
    inputs = cached_inputs()
    with LocalSession(cdk_out, work_dir, verbose=verbose, tracking=tracking) as session:
        n = session.upload_folder(inputs)
        print(f"uploaded {n} dataset and base-model files to s3://{session.dep.data_bucket}/")
        spec = demo_spec(session.dep.data_bucket)
        warm_model_check()
        outcome = session.run_spec(spec, interrupt_at_step=interrupt_at_step)
        local: list[tuple[str, str]] = []
        if outcome.status == "SUCCEEDED":
            # The same object uploaded again is the same run: no second execution.
            before = len(session.executions())
            session.upload_spec(spec)
            again = len(session.executions()) - before
            local.append(("re-upload", "the same spec uploaded again started no second run" if again == 0
                          else f"{again} new run(s) from the same spec!"))
            local.append(("notification", f"published to {session.dep.topic_arn}"))
        local.append(("demo total", f"{time.time() - t0:.0f} s"))
        conclude(session, outcome, work_dir, verbose=verbose, local=local)
    return outcome
