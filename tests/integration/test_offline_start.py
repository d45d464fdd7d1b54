"""Jobs start with every package index unreachable: the real sagemaker-training toolkit and runproc.sh, in
stand-ins of the job images that lack what the real images lack, install what they need from the wheels
shipped in the code bundle (and nothing else), then train / count."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest
from mlflow import MlflowClient
from testkit import smhost
from testkit.image_sim import offline_pip_env, simulated_image
from testkit.tracking import mlflow_server

from contract import tracking
from local_mode import synthetic as synth
from stacks.assets import job_wheels
from stacks.assets.code_asset import ENTRYPOINT, sourcedir_bytes

REPO = Path(__file__).resolve().parents[2]

# What the job images lack (stacks/assets/job_images.py) or hold at another version than the one the jobs pin; the
# stand-ins hide them so that only the shipped wheels can provide them.
TRAINING_IMAGE_LACKS = ("rouge-score", "nltk", "defusedxml", "tokenizers", "accelerate", "mlflow-skinny",
                        "sagemaker-mlflow")
PROCESSING_IMAGE_LACKS = ("tokenizers", "tokenizer-mr-native", "transformers", "datasets", "accelerate", "rouge-score",
                          "nltk")


@pytest.fixture(scope="module")
def sourcedir(tmp_path_factory) -> Path:
    """The code bundle exactly as the stack deploys it (training_code/ + the locked wheels)."""
    path = tmp_path_factory.mktemp("bundle") / "sourcedir.tar.gz"
    path.write_bytes(sourcedir_bytes(REPO / "training_code", job_wheels.wheel_files(job_wheels.wheel_dir())))
    return path


def _installed_line(log: str) -> str:
    return next((line for line in log.splitlines() if "Successfully installed" in line), "")


@pytest.mark.slow
def test_training_job_starts_with_no_package_index(tmp_path, sourcedir):
    """Also with tracking on: the job's MLflow client comes from the shipped wheels and logs to a real server."""
    python = simulated_image(tmp_path / "image", TRAINING_IMAGE_LACKS)
    check = subprocess.run([str(python), "-c", "import rouge_score"], capture_output=True, text=True)
    assert check.returncode != 0  # the stand-in really lacks it
    model = synth.build_model_dir("bart", tmp_path / "bart")
    train = synth.write_jsonl(tmp_path / "data" / "train.jsonl", synth.summ_examples(8, 1))
    validation = synth.write_jsonl(tmp_path / "data" / "validation.jsonl", synth.summ_examples(4, 2))
    job = smhost.lay_out(
        tmp_path / "hosts", hosts=["algo-1"], sourcedir=sourcedir,
        hyperparameters={"task": "summarization", "model_name_or_path": str(model), "max_steps": 2,
                         "per_device_train_batch_size": 2, "max_target_length": 8, "logging_steps": 1},
        channels={"train": {"algo-1": [train]}, "validation": {"algo-1": [validation]}},
    )
    with mlflow_server(tmp_path / "mlflow") as server:
        env = tracking.environment(server.uri, "summarization", "offline-1")
        (result,) = job.run(timeout=600, python=python, adjust_env=lambda e: offline_pip_env({**e, **env}))
        client = MlflowClient(server.uri)
        (run,) = client.search_runs([client.get_experiment_by_name("summarization").experiment_id])
        assert sorted(m.step for m in client.get_metric_history(run.info.run_id, "loss")) == [1, 2]
    log = result.log
    assert result.returncode == 0, log[-5000:]
    assert f'exec "{python}" ' in (job.root / "bin" / "torchrun").read_text()  # torchrun and workers: the image's
    installed = _installed_line(log)
    for wheel in ("accelerate-1.15.0", "nltk-3.10.4", "rouge-score-0.1.2", "tokenizers-0.22.2", "mlflow-skinny-3.17.2",
                  "sagemaker-mlflow-0.5.0"):
        assert wheel in installed or wheel.replace("-score", "_score") in installed, installed
    assert "Looking in indexes" not in log  # pip never looked at an index
    assert "METRIC eval_rouge1=" in log  # rouge_score from the shipped wheel, in the training process
    assert result.host.path("/opt/ml/model/model.safetensors").exists()


@pytest.mark.slow
def test_tokenizer_processing_job_starts_with_no_package_index(tmp_path, sourcedir):
    python = simulated_image(tmp_path / "image", PROCESSING_IMAGE_LACKS)
    base = tmp_path / "opt-ml"
    code = base / "processing" / "input" / "code"
    code.mkdir(parents=True)
    (code / "sourcedir.tar.gz").write_bytes(sourcedir.read_bytes())
    (code / ENTRYPOINT).write_bytes((REPO / "training_code" / ENTRYPOINT).read_bytes())
    data = base / "processing" / "input" / "data"
    synth.write_jsonl(data / "part-0.jsonl", [{"text": line} for line in synth.corpus()[:200]])
    (base / "config").mkdir(parents=True)
    (base / "config" / "resourceconfig.json").write_text(json.dumps({"current_host": "algo-1", "hosts": ["algo-1"]}))
    env = offline_pip_env({"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "SAGEMAKER_BASE_DIR": str(base),
                           "RUNPROC_PYTHON": str(python)})
    proc = subprocess.run(["/bin/bash", str(code / ENTRYPOINT), "tokenizer_map.py", "--tokenizer-type", "bpe",
                           "--text-field", "text", "--input-dir", str(data),
                           "--output-dir", str(base / "processing" / "output" / "counts")],
                          env=env, capture_output=True, text=True, timeout=300)
    log = proc.stdout + proc.stderr
    assert proc.returncode == 0, log[-4000:]
    assert "tokenizers-0.22.2" in _installed_line(log) and "tokenizer-mr-native-1.0.0" in _installed_line(log)
    assert list((base / "processing" / "output" / "counts").glob("counts-algo-1.*"))
    # the reduce in the same image: the merge loop from the shipped (compiled) wheel, not the Python fallback
    out = base / "processing" / "output" / "tokenizer"
    proc = subprocess.run([str(python), str(code / "tokenizer_reduce.py"), "--tokenizer-type", "bpe", "--text-field",
                           "text", "--vocab-size", "300", "--input-dir", str(base / "processing" / "output" / "counts"),
                           "--output-dir", str(out)], env=env, capture_output=True, text=True, timeout=300, cwd=code)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    assert json.loads((out / "tokenizer_stats.json").read_text())["learning"]["implementation"] == "native"
    with tarfile.open(sourcedir) as tar:
        assert any(name.startswith("wheels/tokenizers-0.22.2-") for name in tar.getnames())
