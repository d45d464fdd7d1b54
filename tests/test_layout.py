"""The test tree: test folders mirror the product's packages (tests/<package>/<sub-package>/), what tests share lives
in the test kit (tests/testkit/, imported as `testkit`), and no test module imports another (issue 32)."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent
REPO = TESTS.parent
# tests/<folder> -> the product folder it mirrors; the others hold tests across parts or of the tooling
MIRRORS = {"lambda": "lambda", "hftrain": "training_code/hftrain", "local_mode": "local_mode", "stacks": "stacks",
           "runctl": "runctl", "tokenizer_mr": "training_code/tokenizer_mr", "contract": "training_code/contract",
           "cloud_assembly": "cloud_assembly", "pipeline_runs": "pipeline_runs", "tools": "tools"}
ACROSS = {"integration", "e2e", "benchmarks", "testkit"}


def all_test_modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts and p.name.startswith("test_"))


def imports_of_test_modules(source: str, test_names: set[str]) -> list[str]:
    """Every import in `source` (at any depth: module level, in a function, under TYPE_CHECKING) of a test module,
    a conftest, the package `tests`, or anything relative."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                found.append(f"line {node.lineno}: relative import from {'.' * node.level}{node.module or ''}")
                continue
            names = [node.module or ""]
        else:
            continue
        for name in names:
            head = name.split(".")[0]
            if head in test_names or head in ("conftest", "tests"):
                found.append(f"line {node.lineno}: import of {name}")
    return found


def test_the_check_finds_every_kind_of_import_of_a_test_module() -> None:
    source = ("import os\nfrom testkit.lambdas import SPEC\nfrom test_a import x\n\ndef f():\n    import test_b\n"
              "    from tests.lambda_ import y\n    from . import z\n    import conftest\n")
    assert imports_of_test_modules(source, {"test_a", "test_b"}) == [
        "line 3: import of test_a", "line 6: import of test_b", "line 7: import of tests.lambda_",
        "line 8: relative import from .", "line 9: import of conftest"]


def test_no_test_module_imports_another() -> None:
    modules = all_test_modules()
    names = {p.stem for p in modules}
    checked = [*modules, *TESTS.rglob("conftest.py"), *(TESTS / "testkit").rglob("*.py")]
    offenders = {str(p.relative_to(REPO)): found for p in checked if "__pycache__" not in p.parts
                 for found in [imports_of_test_modules(p.read_text(), names)] if found}
    assert offenders == {}, "shared helpers go in tests/testkit/, fixtures in a conftest.py"
    assert len(modules) > 100  # the walk found the suite


def test_test_folders_mirror_the_product_packages() -> None:
    tops = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert tops <= set(MIRRORS) | ACROSS, tops - set(MIRRORS) - ACROSS
    for top, product in MIRRORS.items():
        for folder in (TESTS / top).rglob("*"):
            if folder.is_dir() and folder.name != "__pycache__":
                relative = folder.relative_to(TESTS / top)
                assert (REPO / product / relative / "__init__.py").exists(), (
                    f"tests/{top}/{relative} mirrors no package {product}/{relative}")
