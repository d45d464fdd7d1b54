"""Hostile run specs, fourth round (issue 36): Prepare refuses what the job would refuse, naming the field.

Findings (each has a fast test here that fails when its fix is reverted):
- 7: `fallback` given as null, 1, 1.5, true on a base whose spot is off raised TypeError in the runtime rule
  (lambda/plan/runtime_limits.py); any rule that stumbles over a field that failed its own check adds nothing
  (run_spec.apply_rule);
- 8: tf32 (and bf16) accepted on a CPU instance type (lambda/plan/instance_types.py, CPU_FAMILIES); a bf16 problem
  caused by a fallback option names the option (hyperparameters.bf16_option_problems);
- 9: a spec with several phases (tokenizer, training and its fallback options) reports every phase's problems, the
  environment's limits too, even when another field fails its own check (lambda/plan/environment_limits.py);
- 10: label_smoothing_factor outside [0, 1], integers beyond int64 (hp_rules.BOUNDS, INT64_*: the job's parser
  refuses them too), and a location that names an object while it is read as a folder (plan/preflight.py,
  folder_named_like_object_problems).

The sweep (slow: imports transformers): at least 2,000 generated specs, every class above and the earlier ones
(hyperparameter edges, types, s3 locations), on every base spec (the shipped examples and a spec that uses every
field), each through `handlers.prepare` as the state machine calls it, on one moto account. It counts exceptions
other than SpecError/PreflightError and specs accepted whose training requests the job's own parser refuses
(`hftrain.args.parse_args` on each attempt's HyperParameters as the sagemaker-training toolkit decodes them, on a
host of that attempt's instance type): both must be 0. The figures are printed at the end of the session.
"""

from __future__ import annotations

import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest
from testkit.lambdas import SETTINGS, settings_dict, stand_in_state_machine

from hfsm_lambda import aws, handlers
from hfsm_lambda.errors import PreflightError, SpecError
from hfsm_lambda.plan import instance_types, job_requests
from hfsm_lambda.plan import run as planned
from hfsm_lambda.runs.prepare import prepare_run
from hfsm_lambda.settings import Settings
from hfsm_lambda.spec import hyperparameters, run_spec

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {p.stem: json.loads(p.read_text()) for p in sorted((ROOT / "examples").glob("*.json"))}
TYPES = ["ml.g5.2xlarge", "ml.g5.12xlarge", "ml.g6.2xlarge", "ml.p4d.24xlarge", "ml.p5.48xlarge", "ml.p3.2xlarge",
         "ml.g4dn.12xlarge", "ml.m5.xlarge", "ml.c5.2xlarge"]
SWEEP_SETTINGS = settings_dict(allowed_instance_types=TYPES, max_instance_count=4)
PLAIN = Settings.from_dict(SWEEP_SETTINGS)
SUMMARIZATION = EXAMPLES["summarization"]
TOKENIZER = EXAMPLES["tokenizer-text-classification"]


def verdict(spec: Any, settings: Settings = PLAIN, s3: Any = None) -> list[str] | str:
    """Prepare's problems, [] when it would start, or the text of any other exception (never expected)."""
    try:
        prepare_run(copy.deepcopy(spec), settings, s3=s3)
    except (SpecError, PreflightError) as err:
        return list(err.problems)
    except Exception as err:  # noqa: BLE001 - the finding: any other exception
        return f"{type(err).__name__}: {err}"
    return []


def about(problems: list[str] | str, path: str) -> list[str]:
    assert isinstance(problems, list), problems
    return [p for p in problems if p.startswith((f"{path}: ", f"{path}.", f"{path}["))]


# --- 7: fallback of another type ------------------------------------------------------------------------------
@pytest.mark.parametrize("value", [None, 1, 1.5, True, "x", []], ids=repr)
def test_7_a_fallback_of_another_type_is_a_spec_error_on_every_base(value):
    for name, base in EXAMPLES.items():
        problems = verdict({**base, "fallback": value})
        assert isinstance(problems, list), f"{name}: {problems}"
        assert about(problems, "fallback"), f"{name}: {problems}"


def test_7_a_rule_that_stumbles_over_an_invalid_field_adds_nothing():
    """The class: every container field given as null, a number or a list, on every base."""
    containers = [n for n, kind in run_spec.SPEC.fields.items() if type(kind).__name__ == "Obj"]
    for name, base in EXAMPLES.items():
        for field in containers:
            for value in (None, 0, 2.5, True, [], "s"):
                problems = verdict({**base, field: value})
                assert isinstance(problems, list) and about(problems, field), f"{name} {field}={value!r}: {problems}"


# --- 8: tf32 / bf16 on instances without them, naming the fallback option -------------------------------------
@pytest.mark.parametrize("hp", ["tf32", "bf16", "bf16_full_eval"])
@pytest.mark.parametrize("cpu", ["ml.m5.xlarge", "ml.c5.2xlarge"])
def test_8_tf32_and_bf16_are_refused_on_a_cpu_instance(hp, cpu):
    spec = {**SUMMARIZATION, "compute": {"instance_type": cpu}, "distribution": {"strategy": "none"},
            "hyperparameters": {hp: True}}
    problems = about(verdict(spec), f"hyperparameters.{hp}")
    assert problems and cpu in problems[0], problems


def test_8_a_bf16_problem_of_a_fallback_option_names_the_option():
    spec = {**SUMMARIZATION, "spot": {"enabled": False},
            "fallback": {"options": [{"instance_type": "ml.g5.12xlarge"}, {"instance_type": "ml.p3.2xlarge"}]}}
    problems = verdict(spec)
    named = about(problems, "fallback.options[1].instance_type")
    assert named and "ml.p3.2xlarge" in named[0] and "hyperparameters.bf16" in named[0], problems
    assert not about(problems, "fallback.options[0]"), problems
    assert about(problems, "hyperparameters.bf16"), problems


# --- 9: every phase's problems ---------------------------------------------------------------------------------
def test_9_a_spec_with_several_phases_reports_every_phase():
    spec = copy.deepcopy(TOKENIZER)
    spec["tokenizer"]["instance_count"] = 1000  # the tokenizer phase: its own check
    spec["compute"]["instance_count"] = 8  # the training phase: over the environment's limit of 4
    spec["fallback"] = {"options": [{"instance_type": "ml.p3dn.24xlarge"}]}  # a fallback phase: not allowed
    problems = verdict(spec)
    assert about(problems, "tokenizer.instance_count"), problems
    assert about(problems, "compute.instance_count"), problems
    assert about(problems, "fallback.options[0].instance_type"), problems
    spec = copy.deepcopy(TOKENIZER)
    spec["tokenizer"]["instance_type"] = "ml.p5.48xlarge"  # environment, tokenizer phase
    spec["hyperparameters"]["learning_rate"] = -1  # spec, training phase
    problems = verdict(spec)
    assert about(problems, "tokenizer.instance_type") and about(problems, "hyperparameters.learning_rate"), problems
    assert len([p for p in problems if p.startswith("tokenizer.instance_type")]) == 1, problems


# --- 10: values the job refuses, and a file named as a folder --------------------------------------------------
@pytest.mark.parametrize(("name", "value", "refused"), [
    ("label_smoothing_factor", 1.5, True), ("label_smoothing_factor", -0.1, True), ("label_smoothing_factor", 1, False),
    ("label_smoothing_factor", 0.1, False), ("max_steps", 2**70, True), ("max_steps", 2**63, True),
    ("max_steps", 2**63 - 1, False), ("save_steps", 2**64, True), ("seed", 2**70, True), ("logging_steps", -(2**63) - 1, True),
])
def test_10_values_beyond_what_the_job_takes_are_refused(name, value, refused):
    problems = about(verdict({**SUMMARIZATION, "hyperparameters": {name: value}}), f"hyperparameters.{name}")
    assert bool(problems) == refused, problems


def test_10_the_job_s_parser_refuses_the_same_values():
    from hftrain import hp_rules

    assert hp_rules.bound_problem("max_steps", 2**70) and hp_rules.bound_problem("label_smoothing_factor", 1.5)
    assert hp_rules.bound_problem("max_steps", 2**63 - 1) is None


def test_10_a_location_that_names_an_object_is_refused_with_what_was_understood(aws_account):
    s3 = aws.client("s3")
    bucket = SETTINGS["data_bucket"]
    for key in ("datasets/cnn/train.jsonl", "datasets/cnn/train.jsonl/part-0.jsonl", "datasets/cnn/val/part-0.jsonl"):
        s3.put_object(Bucket=bucket, Key=key, Body=b'{"article": "a b", "highlights": "a"}\n')
    spec = {**SUMMARIZATION, "data": {"train": {"s3": "datasets/cnn/train.jsonl"},
                                      "validation": {"s3": "datasets/cnn/val/"}}}
    problems = about(verdict(spec, s3=s3), "data.train.s3")
    assert problems and "is an object" in problems[0] and "datasets/cnn/train.jsonl/" in problems[0], problems
    spec["data"]["train"]["s3"] = "datasets/cnn/val"
    assert not about(verdict(spec, s3=s3), "data.train.s3")


# --- the sweep ------------------------------------------------------------------------------------------------
def every_field_spec() -> dict[str, Any]:
    """A spec that sets every field of the declaration (parse_spec's output of a rich spec: defaults filled in)."""
    raw = copy.deepcopy(EXAMPLES["question-answering"])
    raw.update({"description": "every field", "stall": {"action": "retry"},
                "tokenizer": {**copy.deepcopy(TOKENIZER["tokenizer"]), "instance_count": 1},
                "local": {"interrupt_at_step": 5}})
    raw["data"]["train"].update({"distribution": "FullyReplicated", "input_mode": "File"})
    raw["data"]["test"] = {"s3": "datasets/squad/validation/"}
    spec = run_spec.parse_spec(raw, PLAIN)
    spec["$schema"] = raw["$schema"]
    missing = sorted(set(run_spec.SPEC.fields) - set(spec))
    assert not missing, missing
    return spec


COLUMNS = {"question-answering": b'{"id": "1", "question": "which?", "context": "hello world", '
                                 b'"answers": {"text": ["hello"], "answer_start": [0]}}\n',
           "summarization": b'{"article": "hello world", "highlights": "hello", "document": "x", "summary": "y"}\n',
           "text-classification": b'{"text": "hello world", "label": 1, "category": 0}\n'}


def _put_data(bases: dict[str, dict[str, Any]]) -> None:
    s3 = aws.client("s3")
    for base in bases.values():
        for channel in base["data"].values():
            prefix = channel["s3"].removeprefix(f"s3://{SETTINGS['data_bucket']}/")
            for i in range(4):
                s3.put_object(Bucket=SETTINGS["data_bucket"], Key=f"{prefix}part-{i}.jsonl",
                              Body=COLUMNS[base["task"]] * 2)
    s3.put_object(Bucket=SETTINGS["data_bucket"], Key="datasets/squad/train", Body=b"a file, not a folder")


INT_EDGES = [-(2**63) - 1, -1, 0, 2**31, 2**63 - 1, 2**70]
NUM_EDGES = [-1e-05, 0, 1, 1.0001, 1e6, 1e300]
INTEGER_HPS = sorted(n for n, m in hyperparameters.schema().items() if m["type"] == "integer"
                     and n in hyperparameters.settable() and n not in hyperparameters.POLICED)
NUMBER_HPS = sorted(n for n, m in hyperparameters.schema().items() if m["type"] == "number"
                    and n in hyperparameters.settable() and n not in hyperparameters.POLICED)


def _mutations(base: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(class, spec) for one base: the issue's classes and the earlier ones."""
    out: list[tuple[str, dict[str, Any]]] = []

    def hp(cls: str, **values: Any) -> None:
        spec = copy.deepcopy(base)
        spec["hyperparameters"] = {**spec.get("hyperparameters", {}), **values}
        out.append((cls, spec))

    for field in ("fallback", "spot", "checkpoint", "compute", "distribution", "stall", "network", "tokenizer",
                  "tags", "local"):
        for value in (None, 1, 1.5, True, "x", [], {}):
            out.append(("7-container-types", {**copy.deepcopy(base), field: value}))
    for hp_name in ("tf32", "bf16", "bf16_full_eval"):
        for first in TYPES:
            for option in ("ml.g5.2xlarge", "ml.p3.2xlarge", "ml.m5.xlarge"):
                spec = copy.deepcopy(base)
                spec["compute"] = {**spec.get("compute", {}), "instance_type": first}
                spec["fallback"] = {"options": [{"instance_type": option}]}
                spec["hyperparameters"] = {**spec.get("hyperparameters", {}), hp_name: True}
                spec["hyperparameters"].pop("bf16", None) if hp_name != "bf16" else None
                out.append(("8-bf16-tf32", spec))
    for tok_count, count, tok_type in ((1000, 8, "ml.c5.2xlarge"), (2, 8, "ml.p5.48xlarge"), (0, 1, "ml.c5.2xlarge"),
                                       (1, 5, "ml.g5.2xlarge")):
        spec = copy.deepcopy(base)
        spec["tokenizer"] = {**copy.deepcopy(TOKENIZER["tokenizer"]), "instance_count": tok_count,
                             "instance_type": tok_type}
        spec["compute"] = {**spec.get("compute", {}), "instance_count": count}
        spec["hyperparameters"] = {**spec.get("hyperparameters", {}), "learning_rate": -1}
        out.append(("9-phases", spec))
    for value in (-0.5, -1e-9, 0, 0.1, 1, 1.0000001, 2, 1e300):
        hp("10-label-smoothing", label_smoothing_factor=value)
    for name in INTEGER_HPS:
        for value in INT_EDGES:
            hp("10-integers", **{name: value})
    for name in NUMBER_HPS:
        for value in NUM_EDGES:
            hp("earlier-number-edges", **{name: value})
    for name in ("num_train_epochs", "max_steps", "save_total_limit"):
        for value in ("3", [3], {"a": 1}, None, True):
            hp("earlier-types", **{name: value})
    for channel, location in (("train", "datasets/squad/train"), ("train", "datasets/squad/train/../x/"),
                              ("train", "datasets//squad/"), ("validation", "datasets/squad/%2Fvalidation/"),
                              ("train", "s3://other-bucket/datasets/x/")):
        spec = copy.deepcopy(base)
        spec["data"] = {**spec["data"], channel: {"s3": location}}
        out.append(("10-s3-locations", spec))
    return out


def _attempt_host(instance_type: str) -> tuple[bool, bool]:
    """(CUDA, bf16/TF32) of an instance type, from the same table (a CPU family: neither)."""
    cpu = instance_types.family(instance_type) in instance_types.CPU_FAMILIES
    return (not cpu, instance_types.has_bf16(instance_type) and not cpu)


def _job_refuses(request: dict[str, Any], validation: bool, tmp: Path) -> str:
    """What the job's own parser says to one attempt's hyperparameters, as the toolkit hands them over."""
    import transformers.training_args as training_args
    from sagemaker_training import environment as toolkit_env
    from sagemaker_training import mapping as toolkit_mapping
    from sagemaker_training import params as toolkit_params

    from hftrain import args as hf_args

    hps = {k: v for k, v in request["HyperParameters"].items() if k != "ddp_backend"}  # smddp: a library question
    path = tmp / "hyperparameters.json"
    path.write_text(json.dumps(hps))
    cuda, bf16 = _attempt_host(request["ResourceConfig"]["InstanceType"])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(toolkit_env, "hyperparameters_file_dir", str(path))
        patch.setattr(hf_args, "_cuda_info", lambda: (cuda, bf16))
        patch.setattr(hf_args, "_auto_workers", lambda has_cuda: 4 if has_cuda else 0)
        patch.setattr(training_args, "is_torch_bf16_gpu_available", lambda: bf16)
        patch.setattr(training_args, "is_torch_tf32_available", lambda: bf16)
        decoded = toolkit_env.read_hyperparameters()
        _, user = toolkit_mapping.split_by_criteria(decoded, keys=toolkit_params.SAGEMAKER_HYPERPARAMETERS,
                                                    prefix=toolkit_params.SAGEMAKER_PREFIX)
        environ = {"SAGEMAKER_BASE_DIR": str(tmp / "job"), **({"SM_CHANNEL_VALIDATION": "/v"} if validation else {})}
        try:
            hf_args.parse_args(toolkit_mapping.to_cmd_args(user), environ=environ)
        except Exception as err:  # noqa: BLE001 - any refusal of the job's parser counts
            return f"{type(err).__name__}: {str(err)[:300]}"
    return ""


@pytest.mark.slow
def test_the_sweep_of_hostile_specs_through_prepare(aws_account, monkeypatch, tmp_path):
    pytest.importorskip("transformers")
    monkeypatch.setenv("PIPELINE_SETTINGS", json.dumps(SWEEP_SETTINGS))
    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path / "job"))
    stand_in_state_machine(monkeypatch)
    bases = {**EXAMPLES, "every-field": every_field_spec()}
    _put_data(bases)
    counts = {"specs": 0, "accepted": 0, "refused": 0, "exceptions": 0, "accepted-but-refused-later": 0}
    per_class: dict[str, int] = {}
    wrong: list[str] = []
    judged: dict[str, str] = {}
    started = time.process_time()
    for base_name, base in bases.items():
        for cls, spec in _mutations(base):
            counts["specs"] += 1
            per_class[cls] = per_class.get(cls, 0) + 1
            try:
                state = handlers.prepare({"spec": spec})
            except (SpecError, PreflightError):
                counts["refused"] += 1
                continue
            except Exception as err:  # noqa: BLE001 - the finding
                counts["exceptions"] += 1
                wrong.append(f"{base_name} {cls}: {type(err).__name__}: {err}")
                continue
            counts["accepted"] += 1
            run = planned.from_json(state["run"])  # as start_training reads the state
            for attempt in range(run.max_attempts):
                sent = job_requests.training_request(run, PLAIN, attempt)
                validation = run.spec.data.validation is not None
                key = json.dumps([sent["HyperParameters"], _attempt_host(sent["ResourceConfig"]["InstanceType"]),
                                  validation], sort_keys=True)
                if key not in judged:  # the same arguments on the same kind of host: one parse
                    judged[key] = _job_refuses(sent, validation, tmp_path)
                refused = judged[key]
                if refused:
                    counts["accepted-but-refused-later"] += 1
                    wrong.append(f"{base_name} {cls} attempt {attempt}: accepted; the job refuses: {refused}; "
                                 f"hyperparameters {spec.get('hyperparameters')}")
                    break
    print(f"\nhostile spec sweep (issue 36): {counts}; per class {per_class}; {len(judged)} distinct parses; "
          f"{time.process_time() - started:.1f} s CPU")
    assert counts["specs"] >= 2000, counts
    assert not wrong, f"{counts}\n" + "\n".join(wrong[:10])



# --- security 5: load_best_model_at_end under FSDP (torch DCP's pickled .metadata, outside the verification) ----
def test_s5_load_best_model_at_end_under_fsdp_is_refused_naming_the_field():
    spec = {**SUMMARIZATION, "hyperparameters": {**SUMMARIZATION.get("hyperparameters", {}),
                                                 "load_best_model_at_end": True}}
    problems = verdict(spec)
    named = about(problems, "hyperparameters.load_best_model_at_end") + about(problems, "hyperparameters")
    assert any("not supported under FSDP" in p for p in named), problems
    assert not [p for p in about(verdict(SUMMARIZATION), "hyperparameters") if "FSDP" in p]


def test_s5_the_job_s_parser_refuses_the_same(tmp_path, monkeypatch):
    from hftrain import args as hp

    monkeypatch.setenv("SAGEMAKER_BASE_DIR", str(tmp_path))
    with pytest.raises(hp.ArgumentError, match="not supported under FSDP"):
        hp.parse_args(["--task", "summarization", "--fsdp", "full_shard auto_wrap", "--load_best_model_at_end",
                       "true", "--eval_strategy", "steps", "--save_strategy", "steps"])
