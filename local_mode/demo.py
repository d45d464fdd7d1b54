"""`python -m local_mode demo`: the whole pipeline offline, as a new user first sees it.

A generated extractive-QA dataset (SQuAD format; the answer is the two words after the marker word "key") and
a tiny BERT-like model built from a config are uploaded to the emulated data bucket; then a run spec under
runs/ starts the run: tokenizer map on 2 hosts + reduce -> fine-tuning on 2 hosts with one spot interruption
injected mid-training -> model package -> notification.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from local_mode.report import write_report
from local_mode.session import LocalSession, RunOutcome
from local_mode.synthetic import build_model_dir, qa_examples, write_jsonl

DEMO_NAME = "demo-qa"
INTERRUPT_AT_STEP = 100


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


def run_demo(cdk_out: Path, work_dir: Path, *, interrupt_at_step: int = INTERRUPT_AT_STEP) -> RunOutcome:
    t0 = time.time()
    work_dir.mkdir(parents=True, exist_ok=True)
    inputs = build_inputs(work_dir / "inputs")
    with LocalSession(cdk_out, work_dir) as session:
        n = session.upload_folder(inputs)
        print(f"uploaded {n} dataset and base-model files to s3://{session.dep.data_bucket}/")
        spec = demo_spec(session.dep.data_bucket)
        outcome = session.run_spec(spec, interrupt_at_step=interrupt_at_step)
        if outcome.status != "SUCCEEDED":
            print(f"\nrun {outcome.status}: {outcome.error}: {outcome.cause}")
            return outcome
        # The same object uploaded again is the same run: no second execution.
        before = len(session.executions())
        session.upload_spec(spec)
        again = len(session.executions()) - before
        result = outcome.output["result"]
        model_dir = session.download_model(result["model_uri"], work_dir / "artifacts")
        _check_model(model_dir)
        report = write_report(work_dir / "report", outcome, model_dir)
        _summary(outcome, session, model_dir, report, again, time.time() - t0)
    return outcome


def _check_model(model_dir: Path) -> None:
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    AutoModelForQuestionAnswering.from_pretrained(model_dir)
    AutoTokenizer.from_pretrained(model_dir)


def _summary(outcome: RunOutcome, session: LocalSession, model_dir: Path, report: Path, again: int,
             seconds: float) -> None:
    r = outcome.output["result"]
    cost = r.get("cost", {})
    lines = [
        "",
        f"run {r.get('run_id')} {outcome.status} in {outcome.seconds:.0f}s (demo total {seconds:.0f}s)",
        f"  model artifact : {r.get('model_uri')}",
        f"  local model    : {model_dir} (loads with from_pretrained)",
        f"  model package  : {r.get('model_package_arn')} (PendingManualApproval)",
        f"  summary        : {r.get('summary_uri')}",
        f"  metrics        : {json.dumps(r.get('metrics', {}), sort_keys=True)}",
        f"  cost           : {json.dumps(cost, sort_keys=True)}",
        f"  attempts       : {len(r.get('attempts', []))}; spot interruption injected and resumed from checkpoints",
        *[f"  interruption   : step {i.get('step_reached')} reached, resumed from step {i.get('resumed_from_step')}, "
          f"{i.get('lost_steps')} step(s) / {i.get('lost_minutes')} min of work lost" for i in r.get("interruptions") or []],
        f"  checkpoints    : last durable step {(r.get('checkpoints') or {}).get('last_durable_step')} in "
        f"{(r.get('checkpoints') or {}).get('checkpoint_uri')}",
        f"  re-upload      : {'no second run' if again == 0 else f'{again} new run(s)!'}",
        f"  report         : {report}",
        f"  notification   : published to {session.dep.settings['topic_arn']}",
    ]
    print("\n".join(lines))
