"""One declaration per wire format (issue 32): each format's literals (line prefixes, file names, summary keys,
interval bounds) appear only in the package `contract` (training_code/contract/), never in a second copy in the
product folders. Docstrings may name them (prose, not a declaration); every other string constant, f-string part
included, and every bound assigned to a name may not."""

from __future__ import annotations

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CONTRACT = REPO / "training_code" / "contract"
PRODUCT = ("lambda", "training_code", "local_mode", "runctl", "stacks", "benchmarks", "app.py")

# (format, literal): a string constant that starts with the literal writes or reads a line of the format (prose
# that names the format, "no GOODPUT report in ...", does not)
PREFIXES = [
    ("goodput_line", "GOODPUT "),
    ("progress_lines", "PROGRESS "),
    ("progress_lines", "METRIC "),
    ("progress_lines", "[train]"),
    ("progress_lines", "[eval]"),
    ("progress_lines", "[setup]"),
    ("stall_records", "stall watchdog: rank "),
]
# (format, literal): a string constant holding the literal anywhere is a second declaration of the format
CONTAINS = [
    ("goodput_line", "GOODPUT {"),
    ("goodput_line", "GOODPUT \\{"),  # a regex of the line
    ("progress_lines", "PROGRESS global_step"),
    ("progress_lines", "samples/s="),
    ("progress_lines", "[-+0-9.eE]"),  # a MetricDefinitions value regex
    ("heartbeat", "_heartbeat.json"),
    ("stall_records", "_stalls.json"),
    ("stall_records", "stall watchdog: rank "),
    ("stall_records", "stall watchdog: (from outside"),
    ("run_history", "_progress.json"),
    ("run_history", "_history.json"),
    ("checkpoint_marker", "_complete.<"),
    ("summary", "summary.json"),
    ("summary", "registered_model_etag"),
    ("summary", "registered_model_uri"),
    ("intervals", "[5, 60]"),
]
# (format, literal): a string constant that is exactly the literal (shorter ones that other words contain)
EXACT = [
    ("checkpoint_marker", "_complete."),
    ("checkpoint_marker", "checkpoint-"),
    ("stall_records", "_stalls"),
    ("goodput_line", "save_begin"),
    ("refused_names", ".unverified-"),
    ("refused_names", ".refused-"),
    ("refused_names", "_tokenized"),
]
BOUND_NAME = re.compile(r"(MIN|MAX)_MINUTES$")
BOUNDS = {5, 60}


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring constants of the module, its classes and functions."""
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
                    and isinstance(first.value.value, str):
                found.add(id(first.value))
    return found


def violations(source: str, where: str) -> list[str]:
    """Every wire-format literal `source` declares, as 'where:line: format literal'."""
    tree = ast.parse(source)
    docs = _docstrings(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            hits = [(f, lit) for f, lit in PREFIXES if node.value.startswith(lit)]
            hits += [(f, lit) for f, lit in CONTAINS if lit in node.value and (f, lit) not in hits]
            hits += [(f, lit) for f, lit in EXACT if node.value == lit]
            out += [f"{where}:{node.lineno}: {f} {lit!r} in {node.value[:60]!r}" for f, lit in hits]
        if isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
            value = node.value
            if isinstance(value, ast.Constant) and isinstance(value.value, int | float) \
                    and not isinstance(value.value, bool) and value.value in BOUNDS \
                    and any(BOUND_NAME.search(n) for n in names):
                out.append(f"{where}:{node.lineno}: intervals bound {value.value} assigned to {names}")
    return out


def _product_files() -> list[Path]:
    files = []
    for part in PRODUCT:
        path = REPO / part
        files += [path] if path.is_file() else sorted(path.rglob("*.py"))
    return [f for f in files if CONTRACT not in f.parents and "__pycache__" not in f.parts]


def test_wire_format_literals_appear_only_in_the_contract_package():
    found = [v for f in _product_files() for v in violations(f.read_text(), str(f.relative_to(REPO)))]
    assert not found, "declare these in training_code/contract/ and use them from there:\n" + "\n".join(found)


def test_the_contract_declares_every_literal_the_check_looks_for():
    """The list above is what the contract declares: every literal is in its format's module (so a renamed
    constant or a moved format is noticed here, not silently unchecked)."""
    spelled = {"[5, 60]": "CHECKPOINT_MAX_MINUTES = 60", "GOODPUT \\{": "GOODPUT ", "PROGRESS ": "PROGRESS global",
               "stall watchdog: rank ": "rank ", "stall watchdog: (from outside": "(from outside"}
    for module, literal in PREFIXES + CONTAINS + EXACT:
        text = (CONTRACT / f"{module}.py").read_text()
        assert literal in text or spelled.get(literal, literal) in text, (module, literal)


def test_the_check_finds_a_literal_put_back():
    """The check can fail: each literal, as a product module would write it, is found."""
    literals = [lit for _, lit in PREFIXES + CONTAINS + EXACT]
    source = "\n".join([f"X{i} = {lit + ' x'!r}" for i, lit in enumerate(literals[:-len(EXACT)])] + [
        f"Y{i} = {lit!r}" for i, (_, lit) in enumerate(EXACT)] + [
        'line = f"GOODPUT {record}"', "MIN_MINUTES = 5", "MAX_MINUTES: float = 60",
        'reason = f"no GOODPUT report in {stream}"',
        'def f():\n    """GOODPUT lines in a docstring are prose."""\n    return 1'])
    found = violations(source, "put_back.py")
    assert {int(v.split(":")[1]) for v in found} == set(range(1, len(literals) + 4)), found
    assert not any("prose" in v or "no GOODPUT" in v for v in found)


def test_the_product_files_are_scanned():
    names = {f.relative_to(REPO).as_posix() for f in _product_files()}
    assert {"lambda/handlers.py", "training_code/hftrain/run/goodput.py", "local_mode/sagemaker/training_job.py",
            "runctl/core.py", "stacks/state_machines.py"} <= names
    assert not any(n.startswith("training_code/contract/") for n in names)
