"""The Lambda code asset: standard library + boto3 only, handler signatures; the training code's hyperparameter
schema and rules read from training_code/ in a checkout (tests/lambda/test_lambda_bundle.py: copied into the
synthesized asset)."""

from __future__ import annotations

import ast
import inspect
import subprocess
import sys
from pathlib import Path

from hfsm_lambda import errors, handlers, training_contract
from hfsm_lambda.runs import messages

REPO = Path(__file__).resolve().parents[2]
LAMBDA = REPO / "lambda"
HANDLERS = ("trigger", "prepare", "start_processing", "start_training", "check_job", "plan_fallback", "finish",
            "notify_failure")


def test_modules_import_only_the_standard_library_boto3_and_each_other():
    """...and the training code's packages the asset carries (training_contract.PACKAGES: the wire formats)."""
    allowed = set(sys.stdlib_module_names) | {"boto3", "botocore", "hfsm_lambda", *training_contract.PACKAGES}
    for path in LAMBDA.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for name in names:
                assert name.split(".")[0] in allowed, f"{path.name} imports {name}"


def test_handlers_have_the_lambda_signature():
    for name in HANDLERS:
        params = list(inspect.signature(getattr(handlers, name)).parameters)
        assert params == ["event", "context"], name


def test_error_names_the_other_parts_match_on_are_raised_classes():
    """Step Functions retries and catches on a Lambda error's `errorType`, the raised class's `__name__`, and the
    notification hints are keyed on it: every such name the state machines retry on and the hints list (other
    than Step Functions' own `States.*` and the state machines' own `*JobFailed`) is a PipelineError class, and
    every concrete class has a hint."""
    from stacks.state_machines import THROTTLING_ERRORS

    classes = {c.__name__ for c in vars(errors).values()
               if isinstance(c, type) and issubclass(c, errors.PipelineError) and c.__module__ == errors.__name__}
    concrete = classes - {"PipelineError", "ProblemsError"}
    hinted = {n for n in messages.HINTS if not n.startswith("States.") and not n.endswith("JobFailed")}
    assert set(THROTTLING_ERRORS) <= concrete
    assert hinted <= concrete, hinted - concrete
    assert concrete - {"JobConflictError"} <= hinted, concrete - hinted  # a conflict gets the default hint


def test_no_pattern_accepts_a_trailing_newline():
    """Patterns are matched on the whole string (`fullmatch`): no `.match(`, no `$` anchor (it allows a final '\\n')."""
    for path in LAMBDA.rglob("*.py"):
        tree = ast.parse(path.read_text())
        assert ".match(" not in path.read_text(), path.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "re" and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                assert "$" not in node.args[0].value, f"{path.name}: {node.args[0].value!r}"


def test_asset_is_small():
    size = sum(p.stat().st_size for p in LAMBDA.rglob("*") if p.is_file() and p.suffix in (".py", ".json"))
    assert size < 512 * 1024


def test_a_checkout_reads_the_training_codes_own_files_and_holds_no_copy():
    """lambda/ commits no copy (nothing to go stale): a checkout reads training_code/ itself. A stray copy in lambda/
    would win over training_code's (the asset's place comes first), so there must be none."""
    assert training_contract.SCHEMA_FILE == REPO / "training_code" / "hyperparameters.json"
    assert Path(training_contract.hp_rules.__file__) == REPO / "training_code" / "hftrain" / "hp_rules.py"
    assert sys.modules["hftrain.hp_rules"] is training_contract.hp_rules
    tokenizer_rules = REPO / "training_code" / "tokenizer_mr" / "tokenizer_rules.py"
    assert Path(training_contract.tokenizer_rules.__file__) == tokenizer_rules
    assert sys.modules["tokenizer_mr.tokenizer_rules"] is training_contract.tokenizer_rules
    strays = [name for name in training_contract.FILES if (LAMBDA / name).exists()]
    assert not strays, f"remove {strays} from lambda/: the asset bundler copies them from training_code/ at synth"


def test_without_the_asset_copies_or_a_checkout_the_error_says_where_it_looked(tmp_path):
    package = tmp_path / "task" / "hfsm_lambda"
    package.mkdir(parents=True)
    for name in ("__init__.py", "training_contract.py"):
        (package / name).write_bytes((LAMBDA / name).read_bytes())
    # -S: no site-packages, so no installed checkout either; the asset folder is the working directory of -c.
    # Importing the module finds nothing yet (nothing is loaded at import time); the first use looks.
    result = subprocess.run([sys.executable, "-S", "-E", "-c", "import hfsm_lambda.training_contract as t\n"
                             "print('imported', flush=True)\nt.SCHEMA_FILE"],
                            cwd=package.parent, capture_output=True, text=True)
    assert result.stdout == "imported\n", result.stderr
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("hfsm_lambda.training_contract.MissingTrainingContract: training_hyperparameters.json "
                           "is neither in the Lambda asset"), result.stderr
    assert "make synth" in last and "the package hftrain is not installed" in last


def test_the_durability_watchdog_reads_the_training_codes_marker_names():
    """One declaration of the checkpoint and marker names (contract/checkpoint_marker.py): the watchdog finds in S3
    exactly what the training code writes."""
    from contract import checkpoint_marker
    from contract.checkpoint_marker import MARKER_FORMAT, checkpoint_name, marker_name
    from hfsm_lambda.watch import durability

    assert durability.MARKER_FORMAT == MARKER_FORMAT == checkpoint_marker.MARKER_FORMAT
    key = f"{checkpoint_name(7)}/{marker_name('algo-2')}"
    assert durability.MARKER_RE.fullmatch(key).groups() == ("7", "algo-2")
    assert durability.MARKER_RE is checkpoint_marker.MARKER_KEY_RE


def test_the_training_contract_loads_nothing_when_imported():
    """SCHEMA_FILE and the rules modules are found on first use, not at import (a module `__getattr__`)."""
    code = ("import sys, hfsm_lambda.training_contract as t\n"
            "assert 'hftrain.hp_rules' not in sys.modules and 'tokenizer_mr.tokenizer_rules' not in sys.modules\n"
            "assert t.hp_rules is sys.modules['hftrain.hp_rules']\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
