"""End to end, offline: the synthesized app in the emulator, the real Lambda code, the local SageMaker running
the real training code (tokenizer map/reduce, then QA fine-tuning on 2 hosts with two abrupt spot interruptions:
one during the save of the first checkpoint, one just after a later checkpoint)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchmarks.bench_goodput import cross_check
from local_mode.demo import build_inputs, demo_spec
from local_mode.job_settings import Interruption
from local_mode.report import write_report
from local_mode.session import LocalSession

pytestmark = pytest.mark.slow


def test_local_run_end_to_end(dev_outdir: Path, tmp_path: Path) -> None:
    from transformers import AutoModelForQuestionAnswering, AutoTokenizer

    inputs = build_inputs(tmp_path / "inputs")
    said: list[str] = []
    with LocalSession(dev_outdir, tmp_path / "run", say=said.append) as s:
        s.upload_folder(inputs)
        spec = demo_spec(s.dep.data_bucket)
        spec["hyperparameters"].update(max_steps=24, logging_steps=2)
        spec["checkpoint"]["every_steps"] = 5
        interruptions = [Interruption(5, abrupt=True, during_save=True), Interruption(12, abrupt=True)]
        outcome = s.run_spec(spec, interruptions=interruptions)
        assert outcome.status == "SUCCEEDED", outcome.cause
        result = outcome.output["result"]
        run_id = result["run_id"]

        # The execution visited every stage, in order.
        visited = list(dict.fromkeys(outcome.states))
        for earlier, later in [("Prepare", "StartTokenizerMap"), ("StartTokenizerMap", "StartTokenizerReduce"),
                               ("StartTokenizerReduce", "StartTraining"), ("StartTraining", "Finish")]:
            assert visited.index(earlier) < visited.index(later)
        assert visited[-1] == "RunSucceeded"

        # The model artifact is in emulated S3 and loads; its tokenizer is the reduce's output.
        model_dir = s.download_model(result["model_uri"], tmp_path / "artifacts")
        AutoModelForQuestionAnswering.from_pretrained(model_dir)
        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        reduce_out = s.s3.get_object(Bucket=s.dep.artifacts_bucket,
                                     Key=f"outputs/{run_id}/tokenizer/tokenizer/tokenizer.json")
        reduce_vocab = json.loads(reduce_out["Body"].read())["model"]["vocab"]
        assert tokenizer.get_vocab() == reduce_vocab

        # Both interruptions happened; each restart resumed from what was durable in S3 when it came.
        (job,) = [j for j in s.sagemaker.jobs if j.name.endswith("train0")]
        desc = s.sagemaker.wait(job.name, timeout=10)
        assert [t["Status"] for t in desc["SecondaryStatusTransitions"]].count("Interrupted") == 2
        logs = sorted((tmp_path / "run" / "sagemaker" / job.name / "logs").glob("attempt-*"))
        logged = [[int(m) for m in re.findall(r"^PROGRESS global_step=(\d+)", (d / "algo-1.log").read_text(), re.M)]
                  for d in logs]
        assert len(logged) == 3 and logged[-1][-1] == 24
        assert desc["BillableTimeInSeconds"] < desc["TrainingTimeInSeconds"]
        # The summary reports each interruption as the lost attempt logged it (goodput ledger): the step its log
        # reached, the step the next attempt resumed from, the steps and time lost; the last checkpoint complete
        # in S3; the session printed the durability watchdog's findings while it ran.
        during_save, after_checkpoint = result["interruptions"]
        assert during_save["during_save"] and during_save["step_reached"] == logged[0][-1] == 5
        assert during_save["resumed_from_step"] == 0 == logged[1][0] - 1  # the first save never completed
        assert after_checkpoint["step_reached"] == logged[1][-1] >= 12 and not after_checkpoint["during_save"]
        assert after_checkpoint["resumed_from_step"] == logged[2][0] - 1 in (0, 5, 10)  # what had reached S3
        ledger = result["goodput"]
        for record, attempt in zip(result["interruptions"], ledger["attempts"], strict=False):
            assert record["lost_steps"] == record["step_reached"] - record["resumed_from_step"]
            assert record["unknown"] is None and record["lost_minutes"] is not None
            expected = record["lost_steps"] * attempt["step_seconds"] * attempt["instance_count"]
            assert attempt["details"]["replayed"]["lost_steps"] == pytest.approx(
                expected, rel=0.10, abs=2 * attempt["step_seconds"])
        assert ledger["attempts"][1]["parts"]["checkpointing"] > 0  # the save it was killed in
        assert sum(ledger["parts"].values()) == pytest.approx(ledger["billed_seconds"], abs=0.01)
        assert ledger["billed_seconds"] == pytest.approx(desc["TrainingTimeInSeconds"] * 2, rel=0.02)
        assert abs(ledger["parts"]["unaccounted"]) < 0.05 * ledger["billed_seconds"], ledger["parts"]
        assert result["checkpoints"]["last_durable_step"] >= 20
        assert any("is durable in S3 (last_durable_step=" in line for line in said)
        # The simulator (benchmarks/bench_goodput.py), given this run's parameters, predicts its goodput.
        check = cross_check(ledger, every_steps=5)
        assert check["ok"], check

        # Registered, notified, summarized.
        packages = s.sagemaker_client().list_model_packages(ModelPackageGroupName="hfsm-dev-models")
        assert len(packages["ModelPackageSummaryList"]) == 1
        assert result["metrics"]["eval_f1"] >= 0 and "spot_saving" in result["cost"]
        assert result["metrics"]["eval_baseline_f1"] >= 0  # the trivial baseline next to it
        # the summary reports the interruptions as they happened (from the job's status transitions)
        assert [a["interruptions"] for a in result["attempts"]] == [2]
        (note,) = [n for n in outcome.notifications if "succeeded" in n["subject"]]
        assert "2 spot interruptions, resumed from checkpoints" in note["message"]
        assert "Goodput: " in note["message"] and "(during a checkpoint save)" in note["message"]
        assert "trivial baseline" in note["message"] and "eval_baseline_f1" not in note["message"]
        report = write_report(tmp_path / "report", outcome, model_dir)
        assert (report.parent / "loss.png").stat().st_size > 1000 and len(outcome.losses) >= 5

        # The same spec uploaded again is the same run.
        before = len(s.executions())
        s.upload_spec(spec)
        assert len(s.executions()) == before

        # A bad spec fails fast, names the field, and starts no job.
        jobs_before = len(s.sagemaker.jobs)
        bad = s.run_spec({**spec, "name": "bad-spec", "compute": {"instance_type": "p3.2xlarge"}})
        assert bad.status == "FAILED" and bad.error == "SpecError" and "compute.instance_type" in bad.cause
        assert len(s.sagemaker.jobs) == jobs_before
