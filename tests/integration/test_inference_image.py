"""The model a run registers loads and serves in the inference image its model package names.

Each task's model is trained and saved by the training code (transformers 5.3.0 here, as in the training image),
then served by sagemaker-huggingface-inference-toolkit's handler under the inference image's transformers
version (read from the environment's config), with the model package's own inference specification: the
container environment (HF_TASK) and content types come from lambda/runs/model_package.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from testkit import KIT
from testkit.image_sim import inference_python
from testkit.training import layout_job, subprocess_env, to_argv

from hfsm_lambda.runs import model_package
from local_mode import synthetic as synth
from stacks.app_builder import cdk_json_context
from stacks.assets import job_images
from stacks.settings.environment import load_config

REPO = Path(__file__).resolve().parents[2]

CASES = {
    "question-answering": ("bert", synth.qa_examples, {"inputs": {"question": "Who wrote it?",
                                                                  "context": "The report was written by Ada."}}),
    "text-classification": ("bert", lambda n, s: synth.cls_examples(n, s), {"inputs": "a short and happy text"}),
    "summarization": ("bart", synth.summ_examples, {"inputs": "One long sentence here. And another one there.",
                                                    "parameters": {"max_new_tokens": 6}}),
}


@pytest.fixture(scope="module")
def server_python() -> Path:
    cfg = load_config(cdk_json_context(), "dev")
    image = job_images.INFERENCE[(cfg.inference_transformers_version, cfg.inference_pytorch_version)]
    pins = {name: image.packages[name] for name in ("transformers", "huggingface-hub", "multi-model-server")}
    pins["Pillow"] = "13.0.0"  # the toolkit's decoder imports PIL; the image has a Pillow (unpinned)
    assert pins["transformers"] == cfg.inference_transformers_version
    return inference_python(pins)


@pytest.mark.slow
@pytest.mark.parametrize("task", list(CASES))
def test_saved_model_serves_in_the_inference_image(task, tmp_path, server_python):
    kind, examples, body = CASES[task]
    model = synth.build_model_dir(kind, tmp_path / "base")
    base = layout_job(tmp_path / "job", train=examples(8, 1))
    hps = {"task": task, "model_name_or_path": str(model), "max_steps": 2, "per_device_train_batch_size": 4,
           "save_steps": 100}
    done = subprocess.run([sys.executable, str(REPO / "training_code" / "train.py"), *to_argv(hps)],
                          env=subprocess_env(base), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    saved = base / "model"
    # transformers 5.3 would have written TokenizersBackend, unknown to 4.x: the training code exports for 4.x
    assert json.loads((saved / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"

    spec = model_package.inference_specification("image", "s3://bucket/model.tar.gz", task)
    container = spec["Containers"][0]
    request = {"environment": container["Environment"], "content_type": spec["SupportedContentTypes"][0],
               "accept": spec["SupportedResponseMIMETypes"][0], "body": body}
    served = subprocess.run([str(server_python), str(KIT / "inference_driver.py"), str(saved),
                             json.dumps(request)], capture_output=True, text=True, timeout=300,
                            env={"PATH": "/usr/bin:/bin", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                                 "HOME": str(tmp_path)})
    assert served.returncode == 0, (served.stdout + served.stderr)[-4000:]
    lines = dict(line.split(" ", 1) for line in served.stdout.splitlines() if line.startswith(("RESPONSE", "TRANS")))
    assert lines["TRANSFORMERS"] == container_version(server_python)
    prediction = json.loads(lines["RESPONSE"])
    if task == "question-answering":
        assert isinstance(prediction["answer"], str) and 0.0 <= prediction["score"] <= 1.0
    elif task == "text-classification":
        assert prediction[0]["label"] and 0.0 <= prediction[0]["score"] <= 1.0
    else:
        assert isinstance(prediction[0]["summary_text"], str)


def container_version(python: Path) -> str:
    return subprocess.run([str(python), "-c", "import transformers; print(transformers.__version__)"],
                          capture_output=True, text=True, check=True).stdout.strip()
