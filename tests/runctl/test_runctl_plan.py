"""`runctl plan` through the command line: validate and plan without AWS, worst-case cost over the fallbacks."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SETTINGS = {
    "project": "hfsm", "environment": "dev", "region": "us-east-1", "account": "111111111111",
    "data_bucket": "hfsm-dev-data-111111111111-us-east-1", "artifacts_bucket": "hfsm-dev-artifacts-111111111111-us-east-1",
    "kms_key_arn": "arn:aws:kms:us-east-1:111111111111:key/1234abcd-12ab-34cd-56ef-1234567890ab",
    "sagemaker_role_arn": "arn:aws:iam::111111111111:role/hfsm-dev-sagemaker",
    "training_image_uri": "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-training:2.9.0",
    "processing_image_uri": "763104351884.dkr.ecr.us-east-1.amazonaws.com/pytorch-training:2.8.0-cpu-py312",
    "inference_image_uri": "763104351884.dkr.ecr.us-east-1.amazonaws.com/huggingface-pytorch-inference:2.6.0",
    "code_s3_prefix": "s3://hfsm-dev-artifacts-111111111111-us-east-1/code/0123456789abcdef/",
    "subnet_ids": ["subnet-0aaa1111"], "security_group_ids": ["sg-0123456789abcdef0"], "fsx": None,
    "allowed_instance_types": ["ml.g5.xlarge", "ml.g5.2xlarge", "ml.g5.12xlarge", "ml.g6.2xlarge"],
    "tokenizer_instance_types": ["ml.c5.2xlarge", "ml.m5.2xlarge"], "max_instance_count": 2,
    "spot_default": True, "inter_container_encryption": False, "internet_access": True,
    "default_max_runtime_seconds": 86400, "default_max_wait_seconds": 172800, "poll_seconds": 60,
    "model_package_group": "hfsm-dev-models", "topic_arn": "arn:aws:sns:us-east-1:111111111111:hfsm-dev-runs",
    "instance_prices": {"ml.g5.2xlarge": 1.515, "ml.g6.2xlarge": 1.222, "ml.g5.12xlarge": 7.09, "ml.c5.2xlarge": 0.408},
}


def runctl(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "runctl", *args], cwd=REPO, capture_output=True, text=True,
                          timeout=120)


def test_plan_offline_lists_jobs_requests_and_worst_case_cost(tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(SETTINGS))
    done = runctl("plan", "examples/question-answering.json", "--settings", str(settings), "--offline")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Plan for squad-distilbert (question-answering" in out and "nothing was started" in out
    for attempt in range(3):
        assert f"training attempt {attempt}" in out
    assert "1 x ml.g6.2xlarge spot, max 2h00m, waits up to 4h00m for spot" in out
    assert "1 x ml.g5.2xlarge on-demand, max 2h00m" in out
    # 2 h each on g5 (spot), g6 (spot), g5 (on-demand), at on-demand list prices, plus the 100 GB volume for 2 h
    storage = round(100 * 0.14 * 2 / 730, 2)
    items = [round(2 * price + storage, 2) for price in (1.515, 1.222, 1.515)]
    assert f"total: ${sum(items):.2f} at on-demand list prices" in out and "+ 100 GB storage" in out
    assert '"TrainingJobName": "hfsm-dev-squad-distilbert-' in out and "# CreateTrainingJob (training attempt 2)" in out
    # the limits the stall watch applies (issue 34), and when a fallback attempt runs (runs/actions.py)
    assert "Stall limits (stall.action retry): training steps max(10 min, 20 x the median step time); start-up " \
        "phases (imports, data and model load, tokenization, rendezvous, restore) auto: 3 x the longest start-up " \
        "the run measured, at least 10 min (30 min before the first measurement); evaluations and saves 3 x the " \
        "longest measured, at least 10 min (the start-up limit before the first); the outside watch adds 5 min" in out
    assert "a rank killed by a signal" in out

    as_json = json.loads(runctl("plan", "examples/question-answering.json", "--settings", str(settings),
                                "--offline", "--json").stdout)
    assert [r["operation"] for r in as_json["requests"]] == ["CreateTrainingJob"] * 3
    assert as_json["worst_case"]["total_usd"] == round(sum(items), 2) == 8.62


def test_plan_names_every_problem_and_starts_nothing(tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({**SETTINGS, "internet_access": False}))
    done = runctl("plan", "examples/tokenizer-text-classification.json", "--settings", str(settings), "--offline")
    assert done.returncode == 1
    assert done.stdout.startswith("PreflightError in environment dev: nothing would start.")
    assert "tokenizer.instance_count: 4 is over environment dev's limit of 2" in done.stdout
    assert "model: environment dev has no internet access" in done.stdout
    assert "Traceback" not in done.stdout + done.stderr


def test_plan_with_unusable_settings_says_so(tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"project": "hfsm"}))
    done = runctl("plan", "examples/summarization.json", "--settings", str(settings), "--offline")
    assert done.returncode == 2 and "the pipeline settings are not usable" in done.stderr
    assert "Traceback" not in done.stderr


def test_plan_takes_a_model_folder_on_disk_and_plans_it_where_stage_model_puts_it(tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps(SETTINGS))
    model = tmp_path / "tuned"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "distilbert"}')
    (model / "model.safetensors").write_bytes(b"\0" * 10)
    spec = json.loads((REPO / "examples" / "question-answering.json").read_text())
    (tmp_path / "spec.json").write_text(json.dumps({**spec, "model": "tuned"}))  # relative to the spec file
    done = runctl("plan", str(tmp_path / "spec.json"), "--settings", str(settings), "--offline", "--brief")
    assert done.returncode == 0, done.stdout + done.stderr
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"Model: tuned is a folder on this machine ({model}): planned as "
                            "s3://hfsm-dev-data-111111111111-us-east-1/base-models/local/tuned/"), first
    assert f"`runctl stage-model --from-dir {model} --env dev` uploads it" in first
    as_json = json.loads(runctl("plan", str(tmp_path / "spec.json"), "--settings", str(settings), "--offline",
                                "--json").stdout)
    planned = as_json["model_folder"]["planned_as"]
    assert as_json["run"]["spec"]["model"] == planned and planned in first
