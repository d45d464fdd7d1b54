"""The pipeline's metric definitions are derived from what each task really logs: a short real run per task,
its `METRIC <name>=` lines and its per-window `[train]` lines, against job_requests.metric_definitions."""

from __future__ import annotations

import re

import pytest
from testkit.training import layout_job

from contract import verdict_metrics
from hfsm_lambda.plan import job_requests
from local_mode import synthetic as synth

FAST = {"save_steps": 1000, "logging_steps": 1, "per_device_train_batch_size": 4, "learning_rate": 1e-3,
        "max_steps": 2}
# Logged by the Trainer for every task, not worth a definition (counters and throughput of eval itself).
UNDEFINED_OK = {"eval_steps_per_second", "total_flos", "train_global_step", "eval_HasAns_total",
                "eval_NoAns_total", "total_runtime_seconds"}


def _runs(tiny_models):
    return {
        "text-classification": ({"train": synth.cls_examples(24, 1), "validation": synth.cls_examples(12, 2)},
                                {"model_name_or_path": tiny_models["roberta"]}),
        # v2 data (answerable and unanswerable questions): the HasAns/NoAns breakdown is logged too
        "question-answering": ({"train": synth.qa_examples(16, 1, v2=True),
                                "validation": synth.qa_examples(12, 2, v2=True)},
                               {"model_name_or_path": tiny_models["bert"], "max_seq_length": 48, "doc_stride": 16,
                                "version_2_with_negative": True}),
        "summarization": ({"train": synth.summ_examples(16, 1), "validation": synth.summ_examples(6, 2)},
                          {"model_name_or_path": tiny_models["bart"], "val_max_target_length": 8,
                           "generation_num_beams": 1}),
    }


@pytest.mark.slow
@pytest.mark.parametrize("task", list(job_requests.TASK_METRICS))
def test_metric_definitions_are_what_the_task_logs(task, tiny_models, tmp_path, run_inprocess):
    data, hps = _runs(tiny_models)[task]
    base = layout_job(tmp_path, train=data["train"], validation=data["validation"])
    run = run_inprocess(base, {"task": task, **hps, **FAST})
    assert run.returncode == 0, run.output[-3000:]
    logged = set(re.findall(r"^METRIC ([A-Za-z0-9_]+)=", run.output, re.MULTILINE))
    definitions = job_requests.metric_definitions(task)
    defined = {d["Name"] for d in definitions}

    # every task-specific definition names something the task logs (no dead eval_f1 for classification) ...
    assert set(job_requests.TASK_METRICS[task]) <= logged, set(job_requests.TASK_METRICS[task]) - logged
    # ... and everything the task's evaluation logs has a definition
    assert {n for n in logged if n.startswith("eval_")} - UNDEFINED_OK <= defined
    # the baseline of the headline metric sits next to it, and the verdict's figures are logged and defined
    assert any(n.startswith("eval_baseline_") for n in logged)
    assert set(verdict_metrics.ALL) <= logged & defined, set(verdict_metrics.ALL) - (logged & defined)
    assert len(definitions) <= job_requests.MAX_METRIC_DEFINITIONS

    # each definition's regex reads its value from the real log (SageMaker takes the first group)
    values = {}
    for d in definitions:
        matches = re.findall(d["Regex"], run.output)
        if matches:
            values[d["Name"]] = float(matches[-1])
    assert set(job_requests.TASK_METRICS[task]) <= set(values)
    assert values["samples_per_second"] > 0  # from the [train] step lines
    train_lines = [line for line in run.output.splitlines() if line.startswith("[train] step ")]
    assert len(train_lines) == FAST["max_steps"]
    assert re.match(r"\[train\] step 2/2 \(100%\) loss=\S+ lr=\S+ samples/s=[0-9.]+ elapsed=\d+:\d\d:\d\d "
                    r"eta=\d+:\d\d:\d\d$", train_lines[-1]), train_lines[-1]
