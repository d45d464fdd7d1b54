"""Malformed and hostile run specs, the way the state machine hands them to Prepare: as an object, as JSON text,
and as an upload (trigger -> execution input {source} -> prepare). Each is a SpecError naming the field (never
another exception), with a bounded message, in well under a second; no job starts.

One case per bad-input class of issue 15 (docs/run_spec.md, "Strict JSON and limits").
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from testkit.lambdas import ACCOUNT, REGION, SETTINGS, stand_in_state_machine

from hfsm_lambda import aws, handlers
from hfsm_lambda.errors import SpecError
from hfsm_lambda.plan import job_requests
from hfsm_lambda.plan import run as planned

BASE = {"version": 1, "name": "hostile", "task": "question-answering", "model": "bert-base-uncased",
        "data": {"train": {"s3": "datasets/h/train/"}, "validation": {"s3": "datasets/h/val/"}},
        "spot": {"enabled": False}}
MAX_MESSAGE = 16_000  # well inside Step Functions' 32,768-character error cause


def spec_text(**changes: Any) -> str:
    return json.dumps({**BASE, **changes})


def hp_text(**hps: Any) -> str:
    return spec_text(hyperparameters=hps)


def _nested(depth: int) -> str:
    return "[" * depth + "]" * depth


# (case id, JSON text, the path the first problem must start with)
CASES = [
    # exceptions that used to escape: RecursionError, ValueError (int digits)
    ("nested-document", _nested(1500), "(root)"),
    ("nested-in-spec", spec_text()[:-1] + ', "tags": ' + _nested(1500) + "}", "(root)"),
    ("nested-hp-value", spec_text(hyperparameters={"lr_scheduler_kwargs": "{\"a\": " + _nested(1200) + "}"}),
     "hyperparameters.lr_scheduler_kwargs"),
    ("nested-object", spec_text(hyperparameters={"lr_scheduler_kwargs": {"a": [[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]}}),
     "hyperparameters.lr_scheduler_kwargs.a"),
    ("int-digits", spec_text()[:-1] + ', "max_runtime_seconds": 1' + "0" * 5000 + "}", "max_runtime_seconds"),
    ("int-digits-hp-text", hp_text(lr_scheduler_kwargs='{"power": 1' + "0" * 5000 + "}"),
     "hyperparameters.lr_scheduler_kwargs"),
    # anchored patterns accepting a trailing newline
    ("name-newline", spec_text(name="r\n"), "name"),
    ("tag-key-newline", spec_text(tags={"team\n": "x"}), 'tags["team\\n"]'),
    ("tag-value-newline", spec_text(tags={"team": "nlp\n"}), "tags.team"),
    ("hub-id-newline", spec_text(model="bert-base-uncased\n"), "model"),
    ("text-field-newline", spec_text(tokenizer={"type": "bpe", "text_field": "text\n"}), "tokenizer.text_field"),
    ("s3-prefix-newline", spec_text(data={"train": {"s3": "datasets/h/train/\n"}}), "data.train.s3"),
    ("s3-uri-newline", spec_text(data={"train": {"s3": "s3://hfsm-dev-data/datasets/h/\n"}}), "data.train.s3"),
    ("instance-type-newline", spec_text(compute={"instance_type": "ml.g5.2xlarge\n"}), "compute.instance_type"),
    ("description-newline", spec_text(description="one line\n"), "description"),
    # accepted, then refused by CreateModelPackage / the Hub
    *[(f"description-{name}", spec_text(description=f"fine{char}tune"), "description")
      for name, char in (("zwj", "\u200d"), ("bom", "\ufeff"), ("bidi", "\u202e"), ("nel", "\x85"),
                         ("private", "\ue000"), ("nul", "\x00"))],
    ("description-lone-surrogate", spec_text()[:-1] + ', "description": "x\\ud800y"}', "description"),
    ("hub-double-dash", spec_text(model="org/a--b"), "model"),
    ("hub-trailing-dash", spec_text(model="bert-"), "model"),
    ("hub-double-dot", spec_text(model="org/a..b"), "model"),
    ("hub-dot-git", spec_text(model="org/model.git"), "model"),
    ("model-uri-metadata-chars", spec_text(model="s3://hfsm-dev-artifacts/models/base(1)/"), "model"),
    # accepted, then refused by train.py after the instances started
    ("hp-dash", hp_text(text_column="-x"), "hyperparameters.text_column"),
    ("hp-dash-exponent", hp_text(text_column="-1e-5"), "hyperparameters.text_column"),
    ("fp16-bf16", hp_text(fp16=True, bf16=True), "hyperparameters.bf16"),
    ("load-best-without-eval", hp_text(load_best_model_at_end=True), "hyperparameters.load_best_model_at_end"),
    ("eval-without-validation", spec_text(data={"train": {"s3": "datasets/h/train/"}},
                                          hyperparameters={"eval_strategy": "steps"}),
     "hyperparameters.eval_strategy"),
    ("doc-stride-vs-length", hp_text(max_seq_length=128, doc_stride=128), "hyperparameters.doc_stride"),
    ("doc-stride-vs-default", hp_text(doc_stride=400), "hyperparameters.doc_stride"),
    ("save-on-each-node", hp_text(save_on_each_node=True), "hyperparameters.save_on_each_node"),
    ("load-best-steps", hp_text(load_best_model_at_end=True, eval_strategy="steps", eval_steps=300),
     "hyperparameters.eval_steps"),
    # silently wrong
    ("duplicate-key", json.dumps({k: v for k, v in BASE.items() if k != "spot"})[:-1]
     + ', "spot": {"enabled": false, "enabled": true}}', "spot.enabled"),
    ("nan-in-hp", hp_text()[:-2] + '"lr_scheduler_kwargs": {"power": NaN}}}', "hyperparameters.lr_scheduler_kwargs.power"),
    ("infinity-in-fsdp", spec_text(distribution={"strategy": "fsdp", "fsdp": {"config": {}}})[:-5]
     + '{"limit": Infinity}}}}', "distribution.fsdp.config.limit"),
    ("overflow-float", spec_text()[:-1] + ', "max_runtime_seconds": 1e999}', "max_runtime_seconds"),
    ("version-float", spec_text(version=1.0), "version"),
    ("empty-key", spec_text()[:-1] + ', "": 1}', '[""]'),
    ("lone-surrogate-key", spec_text()[:-1] + ', "tags": {"a\\udc00": "x"}}', "tags"),
    # not JSON at all
    ("syntax", '{"version": 1,\n "name": }', "(root)"),
    ("not-utf8", b'{"version": 1, "name": "\xff"}', "(root)"),
]


def unknown_keys(count: int) -> str:
    return json.dumps({**BASE, **{f"x{i:05d}": i for i in range(count)}})


@pytest.fixture
def started_uploads(aws_account, monkeypatch):
    """trigger -> StartExecution on a stand-in state machine; returns a function: spec bytes -> prepare's input."""
    stand_in_state_machine(monkeypatch)
    s3, sfn = aws.client("s3"), aws.client("stepfunctions")

    def upload(body: bytes, key: str = "runs/hostile.json") -> dict[str, Any]:
        put = s3.put_object(Bucket=SETTINGS["data_bucket"], Key=key, Body=body)
        event = {"detail-type": "Object Created", "source": "aws.s3", "account": ACCOUNT, "region": REGION,
                 "detail": {"bucket": {"name": SETTINGS["data_bucket"]},
                            "object": {"key": key, "etag": put["ETag"].strip('"'), "version-id": put["VersionId"]}}}
        started = handlers.trigger(event)
        return json.loads(sfn.describe_execution(executionArn=started["execution_arn"])["input"])

    return upload


def _prepare_fails(payload: dict[str, Any], path: str) -> SpecError:
    # The faster of two calls: the first call in a process also pays one-off lazy imports and model loads
    # (over 1 s of CPU on a loaded CI runner); a hostile spec that is slow to refuse is slow both times.
    seconds = float("inf")
    for _ in range(2):
        start = time.process_time()
        with pytest.raises(SpecError) as info:
            handlers.prepare(payload)
        seconds = min(seconds, time.process_time() - start)
    error = info.value
    assert type(error).__name__ == "SpecError"  # the Step Functions error name
    first = error.problems[0]
    assert first.startswith(f"{path}: ") or first.startswith(f"{path}.") or first.startswith(f"{path}["), error.problems
    assert len(str(error)) <= MAX_MESSAGE
    assert seconds < 1.0, f"{seconds:.2f} s of CPU"
    return error


@pytest.mark.parametrize(("case", "text", "path"), CASES, ids=[c[0] for c in CASES])
def test_hostile_specs_are_spec_errors_through_every_input_path(case, text, path, started_uploads):
    body = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if isinstance(text, str):
        _prepare_fails({"spec": text}, path)
    _prepare_fails(started_uploads(body), path)
    try:  # what the Lambda runtime hands over after its own json.loads of the event (when that succeeds)
        as_object = json.loads(body)
    except (ValueError, RecursionError):
        return
    if "duplicate" in case:
        return  # json.loads keeps the last key: an object cannot carry duplicates (the text paths catch them)
    _prepare_fails({"spec": as_object}, path)
    assert aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


def test_object_input_beyond_json(aws_account):
    """Objects the runtime could hand over that no JSON text yields: huge ints, deep nesting, non-JSON types."""
    deep: Any = 1
    for _ in range(5000):
        deep = [deep]
    for value, path in ((10**5000, "max_runtime_seconds"), (float("nan"), "max_runtime_seconds"),
                        ({1, 2}, "max_runtime_seconds"), (deep, "max_runtime_seconds")):
        _prepare_fails({"spec": {**BASE, "max_runtime_seconds": value}}, path)


def test_fifty_thousand_unknown_keys_give_a_bounded_message_fast(started_uploads):
    text = unknown_keys(50_000)
    assert 700_000 < len(text) < 1 << 20
    for payload in ({"spec": text}, {"spec": json.loads(text)}, started_uploads(text.encode())):
        error = _prepare_fails(payload, "x00000")
        assert len(error.problems) == 50 and error.omitted == 50_000 - 50
        assert str(error).endswith(f"(and {50_000 - 50} more problems)")


def test_a_spec_over_one_megabyte_is_refused_before_parsing(started_uploads):
    text = spec_text(description="x" * 200)[:-1] + ', "pad": "' + "y" * (1 << 20) + '"}'
    for payload in ({"spec": text}, started_uploads(text.encode())):
        error = _prepare_fails(payload, "(root)")
        assert "at most 1048576" in error.problems[0]


def test_a_negative_float_hyperparameter_is_passed_so_argparse_reads_it(aws_account, put_data, settings):
    put_data(f"s3://{SETTINGS['data_bucket']}/datasets/h/train/", 1)
    put_data(f"s3://{SETTINGS['data_bucket']}/datasets/h/val/", 1)
    state = handlers.prepare({"spec": hp_text(null_score_diff_threshold=-1e-05)})
    request = job_requests.training_request(planned.from_json(state["run"]), settings, 0)
    assert request["HyperParameters"]["null_score_diff_threshold"] == '"-0.00001"'  # not -1e-05: a flag to argparse


# --- issue 23: paths, reserved names, shell metacharacters, environment variables ---------------------------------
# (a separate block: issue 24 adds its own classes above)

ISSUE_23_CASES = [
    # a file the job would open, named into a channel anyone with datasets/ or base-models/ writes
    ("path-resume-into-data", hp_text(resume_from_checkpoint="/opt/ml/input/data/train/ckpt/checkpoint-10"),
     "hyperparameters.resume_from_checkpoint"),
    ("path-resume-traversal", hp_text(resume_from_checkpoint="/opt/ml/checkpoints/../input/data/validation/c-1"),
     "hyperparameters.resume_from_checkpoint"),
    ("path-tokenizer-into-data", hp_text(tokenizer_name_or_path="/opt/ml/input/data/train/tok"),
     "hyperparameters.tokenizer_name_or_path"),
    ("path-tokenizer-relative", hp_text(tokenizer_name_or_path="../input/data/train/tok"),
     "hyperparameters.tokenizer_name_or_path"),
    ("path-cache-into-data", hp_text(cache_dir="/opt/ml/input/data/train/hub"), "hyperparameters.cache_dir"),
    ("path-train-into-checkpoints", hp_text(train_path="/opt/ml/checkpoints/checkpoint-10"),
     "hyperparameters.train_path"),
    ("path-generation-config-into-data", hp_text(generation_config="/opt/ml/input/data/train/g.json"),
     "hyperparameters.generation_config"),
    ("path-checkpoint-dir", hp_text(checkpoint_dir="/opt/ml/input/data/train"), "hyperparameters.checkpoint_dir"),
    # reserved names: the toolkit reads sagemaker_* itself (the script name, launcher options)
    ("reserved-program", hp_text(sagemaker_program="evil.py"), "hyperparameters.sagemaker_program"),
    ("reserved-submit-dir", hp_text(sagemaker_submit_directory="s3://elsewhere/code.tar.gz"),
     "hyperparameters.sagemaker_submit_directory"),
    ("reserved-mpi-options", hp_text(sagemaker_mpi_custom_mpi_options="-x LD_PRELOAD=/tmp/x.so"),
     "hyperparameters.sagemaker_mpi_custom_mpi_options"),
    ("reserved-upper-case", hp_text(SAGEMAKER_PROGRAM="evil.py"), "hyperparameters.SAGEMAKER_PROGRAM"),
    # newlines (SageMaker's `.*` pattern; a second line would read as more arguments to a line-based parser)
    ("hp-value-newline", hp_text(text_column="text\n--trust_remote_code true"), "hyperparameters.text_column"),
    ("hp-value-crlf", hp_text(run_name="a\r\nb"), "hyperparameters.run_name"),
    ("hp-value-line-separator", hp_text(run_name="a\u2028b"), "hyperparameters.run_name"),
    # environment variables: a spec sets none (the pipeline's own come from lambda/plan/efa.py)
    ("env-field", spec_text(environment={"LD_PRELOAD": "/opt/ml/input/data/train/x.so"}), "environment"),
    ("env-as-hp-pythonpath", hp_text(PYTHONPATH="/opt/ml/input/data/train"), "hyperparameters.PYTHONPATH"),
    ("env-as-hp-ld-preload", hp_text(LD_PRELOAD="/opt/ml/input/data/train/x.so"), "hyperparameters.LD_PRELOAD"),
    ("env-as-hp-nccl", hp_text(NCCL_NET_PLUGIN="/opt/ml/input/data/train/p.so"), "hyperparameters.NCCL_NET_PLUGIN"),
]


@pytest.mark.parametrize(("case", "text", "path"), ISSUE_23_CASES, ids=[c[0] for c in ISSUE_23_CASES])
def test_issue_23_hostile_specs_are_spec_errors_through_every_input_path(case, text, path, started_uploads):
    _prepare_fails({"spec": text}, path)
    _prepare_fails(started_uploads(text.encode()), path)
    _prepare_fails({"spec": json.loads(text)}, path)
    assert aws.client("sagemaker").list_training_jobs()["TrainingJobSummaries"] == []


SHELL_VALUE = "$(touch {0}); `touch {0}` | touch {0} && touch {0} > {0}; echo '\"' \\ *"


def test_shell_metacharacters_in_values_reach_the_script_as_one_argument(aws_account, put_data, settings,
                                                                          tmp_path, monkeypatch):
    """Values are data: Prepare keeps them, and the real toolkit passes each as one argv element of an exec'd
    process (sagemaker_training.process: no shell for Python entry points), so nothing in them runs."""
    import sagemaker_training.environment as sm_environment
    from sagemaker_training import logging_config, mapping, process

    put_data(f"s3://{SETTINGS['data_bucket']}/datasets/h/train/", 1)
    put_data(f"s3://{SETTINGS['data_bucket']}/datasets/h/val/", 1)
    touched = tmp_path / "touched"
    value = SHELL_VALUE.format(touched)
    run = planned.from_json(handlers.prepare({"spec": hp_text(text_column=value, run_name=value)})["run"])
    encoded = job_requests.training_request(run, settings, 0)["HyperParameters"]
    decoded = {k: json.loads(v) for k, v in encoded.items() if not k.startswith("sagemaker_")}  # as the toolkit
    code = tmp_path / "code"
    code.mkdir()
    (code / "argv.py").write_text("import json, sys\nopen('argv.json', 'w').write(json.dumps(sys.argv[1:]))\n")
    monkeypatch.setattr(sm_environment, "code_dir", str(code))
    invoked = []  # its log line reads the container's config files, which this test has none of
    monkeypatch.setattr(logging_config, "log_script_invocation", lambda cmd, env, logger=None: invoked.append(cmd))
    process.ProcessRunner("argv.py", mapping.to_cmd_args(decoded), {}, 1).run(wait=True)
    argv = json.loads((code / "argv.json").read_text())
    assert argv[argv.index("--text_column") + 1] == value and argv[argv.index("--run_name") + 1] == value
    assert not touched.exists() and value in invoked[0]  # one argv element, as exec'd
