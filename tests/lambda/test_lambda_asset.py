"""The Lambda code asset: standard library + boto3 only, handler signatures, the hyperparameter schema copy."""

from __future__ import annotations

import ast
import inspect
import json
import sys
from pathlib import Path

import errors
import handlers
import messages
import pytest

REPO = Path(__file__).resolve().parents[2]
LAMBDA = REPO / "lambda"
HANDLERS = ("trigger", "prepare", "start_processing", "start_training", "check_job", "plan_fallback", "finish",
            "notify_failure")


def test_modules_import_only_the_standard_library_boto3_and_each_other():
    local = {p.stem for p in LAMBDA.glob("*.py")}
    allowed = set(sys.stdlib_module_names) | {"boto3", "botocore"} | local
    for path in LAMBDA.glob("*.py"):
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


def test_hyperparameter_schema_is_a_copy_of_the_training_codes():
    source = REPO / "training_code" / "hyperparameters.json"
    if not source.exists():
        pytest.skip("training_code/hyperparameters.json does not exist yet")
    copy = LAMBDA / "training_hyperparameters.json"
    assert json.loads(copy.read_text()) == json.loads(source.read_text()), (
        "lambda/training_hyperparameters.json is stale: cp training_code/hyperparameters.json "
        "lambda/training_hyperparameters.json")


def test_hyperparameter_rules_are_a_copy_of_the_training_codes():
    """One declaration of the rules: Prepare runs the very file the training code enforces."""
    source = (REPO / "training_code" / "hftrain" / "hp_rules.py").read_bytes()
    assert (LAMBDA / "hp_rules.py").read_bytes() == source, (
        "lambda/hp_rules.py is stale: cp training_code/hftrain/hp_rules.py lambda/hp_rules.py")


def test_no_pattern_accepts_a_trailing_newline():
    """Patterns are matched on the whole string (`fullmatch`): no `.match(`, no `$` anchor (it allows a final '\\n')."""
    for path in LAMBDA.glob("*.py"):
        tree = ast.parse(path.read_text())
        assert ".match(" not in path.read_text(), path.name
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "re" and node.args
                    and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                assert "$" not in node.args[0].value, f"{path.name}: {node.args[0].value!r}"


def test_asset_is_small():
    size = sum(p.stat().st_size for p in LAMBDA.iterdir() if p.is_file() and p.suffix in (".py", ".json"))
    assert size < 512 * 1024
