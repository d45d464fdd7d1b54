"""The synthesized Lambda asset (stacks/assets/lambda_asset.py): lambda/ plus the training code's hyperparameter schema and
rules and its tokenizer rules, copied at synth, and the wire-format package `contract` beside it; its handlers
validate a run spec from the asset alone; its hash follows the copied files."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import aws_cdk as cdk
import pytest
from testkit.lambdas import settings_dict

import hfsm_lambda
from hfsm_lambda import HANDLER_MODULE, training_contract
from stacks.assets.lambda_asset import TRAINING_CODE, lambda_code

REPO = Path(__file__).resolve().parents[2]
PACKAGE = hfsm_lambda.__name__  # the asset's one folder
SPEC = REPO / "examples" / "text-classification.json"
TOKENIZER_SPEC = REPO / "examples" / "tokenizer-text-classification.json"
# Run in a fresh interpreter the way the Lambda runtime runs the asset: its directory (/var/task) first on the path,
# here as the working directory of `-c`; -E -s: no PYTHONPATH, no user site.
IN_ASSET = """
import json, sys
from hfsm_lambda import errors
from hfsm_lambda import handlers
from hfsm_lambda.spec import run_spec
from hfsm_lambda import settings
from hfsm_lambda import training_contract
from hfsm_lambda.watch import durability, stalls
spec = json.load(open(sys.argv[1]))
run = run_spec.parse_spec(spec, settings.load_settings())
refused = []
for hp in ({"learning_rate": -1, "no_such_name": 1}, {"fp16": True, "bf16": True}):
    try:
        run_spec.parse_spec({**spec, "hyperparameters": hp}, settings.load_settings())
    except errors.SpecError as exc:
        refused.append(str(exc))
tok_spec = json.load(open(sys.argv[2]))
tok_run = run_spec.parse_spec(tok_spec, settings.load_settings())
tok_refused = []
for tok in ({"type": "wordpiece", "special_tokens": ["[PAD]", "[UNK]", "[SEP]", "[MASK]"]},
            {"type": "bpe", "vocab_size": 200}):
    try:
        run_spec.parse_spec({**tok_spec, "tokenizer": {**tok_spec["tokenizer"], **tok}}, settings.load_settings())
    except errors.SpecError as exc:
        tok_refused.append(str(exc))
files = {name: getattr(module, "__file__", None) or "" for name, module in sys.modules.items()}
print(json.dumps({"task": run["task"], "refused": refused, "files": files,
                  "schema": str(training_contract.SCHEMA_FILE), "tasks": list(run_spec.TASKS),
                  "tokenizer": tok_run["tokenizer"], "tokenizer_refused": tok_refused}))
"""


def synthesize(tmp_path: Path, training_code: Path = TRAINING_CODE) -> Path:
    """The asset directory lambda_code() stages in a bare stack of a fresh app (its own cdk.out)."""
    outdir = Path(tempfile.mkdtemp(dir=tmp_path))
    stack = cdk.Stack(cdk.App(outdir=str(outdir)), "Asset")
    key = lambda_code(training_code).bind(stack).s3_location.object_key
    return outdir / f"asset.{key.removesuffix('.zip')}"


def test_the_asset_holds_the_training_codes_files_byte_for_byte(tmp_path):
    assert {"training_hyperparameters.json", "hp_rules.py", "tokenizer_rules.py"} <= set(training_contract.FILES)
    asset = synthesize(tmp_path)
    # the handlers' package and the training code's packages it imports (the wire formats), nothing else
    assert {p.name for p in asset.iterdir()} == {PACKAGE, *training_contract.PACKAGES}
    for name in training_contract.PACKAGES:
        source = {p.relative_to(TRAINING_CODE / name) for p in (TRAINING_CODE / name).rglob("*.py")}
        assert source == {p.relative_to(asset / name) for p in (asset / name).rglob("*")} and source, name
        assert all((asset / name / p).read_bytes() == (TRAINING_CODE / name / p).read_bytes() for p in source)
    for name, relative in training_contract.FILES.items():
        assert (asset / PACKAGE / name).read_bytes() == (TRAINING_CODE / relative).read_bytes(), name
    shipped = {p.name for p in (asset / PACKAGE).iterdir()}
    assert {p.name for p in (REPO / "lambda").glob("*.py")} <= shipped
    assert {p.relative_to(REPO / "lambda") for p in (REPO / "lambda").rglob("*.py")} <= {
        p.relative_to(asset / PACKAGE) for p in (asset / PACKAGE).rglob("*.py")}
    assert not any(n.endswith((".pyc", ".md")) or n == "__pycache__" for n in shipped)


def test_the_handlers_validate_a_run_spec_from_the_asset_alone(tmp_path):
    asset = synthesize(tmp_path)
    env = {"PIPELINE_SETTINGS": json.dumps(settings_dict()), "AWS_DEFAULT_REGION": "us-east-1"}
    result = subprocess.run([sys.executable, "-E", "-s", "-c", IN_ASSET, str(SPEC), str(TOKENIZER_SPEC)],
                            cwd=asset, env=env, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert out["task"] == json.loads(SPEC.read_text())["task"]
    assert out["tasks"] == json.loads((TRAINING_CODE / "hyperparameters.json").read_text())["task"]["choices"]
    package = asset / PACKAGE
    assert Path(out["schema"]) == package / "training_hyperparameters.json"
    assert Path(out["files"][f"{PACKAGE}.hp_rules"]) == package / "hp_rules.py"
    assert Path(out["files"][f"{PACKAGE}.tokenizer_rules"]) == package / "tokenizer_rules.py"
    for name in ("handlers", "spec.hyperparameters", "spec.run_spec", "training_contract"):
        assert Path(out["files"][f"{PACKAGE}.{name}"]) == package.joinpath(*name.split(".")).with_suffix(".py"), name
    for name in ("contract.checkpoint_marker", "contract.heartbeat", "contract.run_history"):  # the wire formats
        assert Path(out["files"][name]) == asset.joinpath(*name.split(".")).with_suffix(".py"), name
    from_checkout = [f for f in out["files"].values() if f.startswith((str(REPO / "lambda"), str(TRAINING_CODE)))]
    assert not from_checkout
    # the schema (unknown name), hp_rules' bounds (learning_rate) and rules (fp16 with bf16) all answered
    names, rule = out["refused"]
    assert "hyperparameters.no_such_name: unknown hyperparameter" in names, names
    assert "hyperparameters.learning_rate: must be >= 0" in names, names
    assert "fp16" in rule and "bf16" in rule, rule
    # the tokenizer rules: the shipped example passes as written, a wordpiece without [CLS] and a bpe vocabulary
    # below the byte-level alphabet are refused with the tokenizer jobs' own reasons
    as_written = json.loads(TOKENIZER_SPEC.read_text())["tokenizer"]
    assert {key: out["tokenizer"].get(key) for key in as_written} == as_written
    no_cls, small = out["tokenizer_refused"]
    assert "tokenizer.special_tokens: wordpiece needs [CLS] (BERT style)" in no_cls, no_cls
    assert ("tokenizer.vocab_size: 200 is smaller than the 256-symbol byte-level alphabet plus the special tokens "
            "(261); use at least 261") in small, small


@pytest.fixture
def training_copy(tmp_path: Path) -> Path:
    """A copy of the training_code files the asset takes, at their training_code/ paths, to edit."""
    copy = tmp_path / "training_code"
    for relative in training_contract.FILES.values():
        (copy / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(TRAINING_CODE / relative, copy / relative)
    for name in training_contract.PACKAGES:
        shutil.copytree(TRAINING_CODE / name, copy / name, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def test_the_asset_hash_changes_with_the_schema_and_with_the_rules(tmp_path, training_copy):
    """A deploy ships a new asset only when its hash changes: the hash must cover the copied files, not only
    lambda/ (CDK's default for a bundled asset hashes the source directory alone)."""
    same = synthesize(tmp_path, training_copy).name
    assert synthesize(tmp_path, training_copy).name == same == synthesize(tmp_path).name  # deterministic
    schema = training_copy / "hyperparameters.json"
    edited = json.loads(schema.read_text())
    edited["learning_rate"]["help"] += " (edited)"
    schema.write_text(json.dumps(edited, indent=2))
    after_schema = synthesize(tmp_path, training_copy)
    assert after_schema.name != same
    assert "(edited)" in (after_schema / PACKAGE / "training_hyperparameters.json").read_text()
    rules = training_copy / "hftrain" / "hp_rules.py"
    rules.write_text(rules.read_text() + "\n# edited\n")
    after_rules = synthesize(tmp_path, training_copy)
    assert after_rules.name not in (same, after_schema.name)
    assert (after_rules / PACKAGE / "hp_rules.py").read_text().endswith("# edited\n")
    tokenizer_rules = training_copy / "tokenizer_mr" / "tokenizer_rules.py"
    tokenizer_rules.write_text(tokenizer_rules.read_text() + "\n# edited\n")
    after_tokenizer = synthesize(tmp_path, training_copy)
    assert after_tokenizer.name not in (same, after_schema.name, after_rules.name)
    assert (after_tokenizer / PACKAGE / "tokenizer_rules.py").read_text().endswith("# edited\n")


def test_a_missing_training_code_file_stops_the_synth_naming_it(tmp_path, training_copy):
    (training_copy / "hftrain" / "hp_rules.py").unlink()
    with pytest.raises(Exception, match=r"the Lambda asset needs .*hp_rules\.py"):
        synthesize(tmp_path, training_copy)


def test_the_asset_hash_changes_with_the_wire_formats_and_a_missing_package_stops_the_synth(tmp_path, training_copy):
    same = synthesize(tmp_path, training_copy).name
    heartbeat = training_copy / "contract" / "heartbeat.py"
    heartbeat.write_text(heartbeat.read_text() + "\n# edited\n")
    after = synthesize(tmp_path, training_copy)
    assert after.name != same and (after / "contract" / "heartbeat.py").read_text().endswith("# edited\n")
    shutil.rmtree(training_copy / "contract")
    with pytest.raises(Exception, match=r"the Lambda asset needs the package .*contract"):
        synthesize(tmp_path, training_copy)


@pytest.mark.slow
def test_every_pipeline_function_of_the_app_runs_the_bundled_asset(dev_outdir):
    """The app's functions (what `make synth` writes and local mode runs) take the asset lambda_code() stages."""
    from cloud_assembly.reader import CloudAssembly

    assembly = CloudAssembly(dev_outdir)
    code_dirs = {assembly.asset_path(props["Code"]["S3Key"])
                 for stack in assembly.stacks for res in stack.template["Resources"].values()
                 if res["Type"] == "AWS::Lambda::Function"
                 and (props := res["Properties"])["Handler"].startswith(f"{HANDLER_MODULE}.")}
    assert len(code_dirs) == 1, code_dirs
    asset = code_dirs.pop()
    for name, relative in training_contract.FILES.items():
        assert (asset / PACKAGE / name).read_bytes() == (TRAINING_CODE / relative).read_bytes(), name
