"""The checkout's import graph: no circles and no import that runs up a floor.

Every product module's imports are read with `ast` (module-level, function-local and `if TYPE_CHECKING:` imports
alike: a circle hidden behind a deferred import is still two concepts tangled), resolved to the checkout's own
modules (pyproject.toml's package-dir: `hfsm_lambda` is lambda/, `hftrain` and `tokenizer_mr` live in training_code/,
...), and checked against the floors:

- no cycle between any two of the checkout's modules;
- `local_mode` imports nothing from `runctl` (runctl drives local mode, not the other way round);
- the training code (training_code/: hftrain, tokenizer_mr, the entry scripts) imports none of lambda/, stacks/,
  local_mode/ or runctl/: it ships to the containers alone;
- lambda/ imports only the standard library, boto3/botocore, itself (and the wire-format package `contract` where the
  checkout has one): what the Lambda runtime provides.

`from package import name` counts as an import of `package.name` when that is a module of the checkout, else of
`package`. Importing `a.b.c` is counted as an edge to `a.b.c` only, not to the package `__init__`s it passes through.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# top-level package -> its folder (pyproject.toml's [tool.setuptools.package-dir]); `contract` where present
PACKAGES = {
    "hfsm_lambda": "lambda", "hftrain": "training_code/hftrain", "tokenizer_mr": "training_code/tokenizer_mr",
    "contract": "training_code/contract", "stacks": "stacks", "local_mode": "local_mode", "runctl": "runctl",
    "cloud_assembly": "cloud_assembly", "pipeline_runs": "pipeline_runs",
    "tools": "tools", "benchmarks": "benchmarks",
}
# single-file modules: the training jobs' entry scripts and the CDK app
SCRIPTS = {"train": "training_code/train.py", "tokenizer_map": "training_code/tokenizer_map.py",
           "tokenizer_reduce": "training_code/tokenizer_reduce.py", "app": "app.py"}
TRAINING = ("hftrain", "tokenizer_mr", "train", "tokenizer_map", "tokenizer_reduce")
LAMBDA_MAY_IMPORT = {"boto3", "botocore"}


def product_modules(repo: Path = REPO) -> dict[str, Path]:
    """Dotted module name -> file, for every Python module of the checkout's packages (native/ build helpers
    included: they are modules of tokenizer_mr like any other)."""
    modules = {name: repo / path for name, path in SCRIPTS.items() if (repo / path).is_file()}
    for package, folder in PACKAGES.items():
        root = repo / folder
        if not (root / "__init__.py").is_file():
            continue
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            if any(part.startswith(".") or part == "__pycache__" or part == "build" for part in parts):
                continue
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


def resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The checkout's module an imported dotted name lands in (the longest prefix that is a module), or None."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return None


def import_graph(modules: dict[str, Path]) -> dict[str, dict[str, int]]:
    """module -> {the checkout's module it imports: line of the first such import}."""
    graph: dict[str, dict[str, int]] = {}
    for module, path in modules.items():
        edges: dict[str, int] = {}
        for target, line in imports_of(module, path, modules):
            if target != module:
                edges.setdefault(target, line)
        graph[module] = edges
    return graph


def imports_of(module: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[str, int]]:
    """(the checkout's module, line) for every import in the file, at any depth (functions, TYPE_CHECKING blocks,
    try:), resolved by the rule in the module docstring."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if target := resolve(alias.name, modules):
                    yield target, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".")
                base = base[:len(base) - node.level + (1 if is_package else 0)]
                prefix = ".".join(base + ([node.module] if node.module else []))
            else:
                prefix = node.module or ""
            for alias in node.names:
                target = f"{prefix}.{alias.name}"
                if target in modules:
                    yield target, node.lineno
                elif owner := resolve(prefix, modules):
                    yield owner, node.lineno


_MODULES = product_modules()
GRAPH = import_graph(_MODULES)


def external_roots(module: str, path: Path) -> set[str]:
    """The top-level names of what the module imports from outside the checkout (absolute imports only)."""
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            roots |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            roots.add(node.module.split(".")[0])
    return roots


def find_cycles(graph: dict[str, dict[str, int]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10 * len(graph) + 100))

    def visit(node: str) -> None:
        index[node] = low[node] = counter[0]
        counter[0] += 1
        stack.append(node)
        on_stack.add(node)
        for target in graph.get(node, {}):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _top(module: str) -> str:
    return module.split(".")[0]


def _crossings(source_roots: tuple[str, ...], forbidden: tuple[str, ...]) -> list[str]:
    return [f"{module} ({_MODULES[module].relative_to(REPO)}:{line}) imports {target}"
            for module, edges in sorted(GRAPH.items()) if _top(module) in source_roots
            for target, line in sorted(edges.items()) if _top(target) in forbidden]


def test_the_graph_sees_the_whole_checkout():
    """The walk finds every product package and real edges (a resolver that found nothing would pass vacuously)."""
    assert {"hfsm_lambda.handlers", "hftrain.run.runner", "tokenizer_mr.bpe", "local_mode.session", "runctl.cli",
            "stacks.pipeline_stack", "train"} <= set(_MODULES)
    assert "hfsm_lambda.spec.strict_json" in GRAPH["hfsm_lambda.handlers"] or any(
        _top(target) == "hfsm_lambda" for target in GRAPH["hfsm_lambda.handlers"])
    assert any(_top(target) == "hftrain" for target in GRAPH["train"])


def test_no_import_circles():
    cycles = find_cycles(GRAPH)
    described = []
    for component in cycles:
        members = set(component)
        described.append(" <-> ".join(component) + ": " + "; ".join(
            f"{module}:{line} -> {target}" for module in component
            for target, line in sorted(GRAPH[module].items()) if target in members))
    assert not cycles, "import circles:\n" + "\n".join(described)


def test_local_mode_does_not_import_runctl():
    assert not _crossings(("local_mode",), ("runctl",))


def test_what_local_mode_and_runctl_share_sits_below_both():
    """cdk.out's reader and the run readers serve both: neither imports either of its users."""
    assert not _crossings(("cloud_assembly", "pipeline_runs"), ("local_mode", "runctl"))


def test_training_code_imports_nothing_from_the_pipeline_side():
    assert not _crossings(TRAINING, ("hfsm_lambda", "stacks", "local_mode", "runctl", "tools", "app"))


def test_lambda_imports_only_the_standard_library_boto_and_itself():
    own = {"hfsm_lambda", "contract"}
    wrong = []
    for module, path in sorted(_MODULES.items()):
        if _top(module) != "hfsm_lambda":
            continue
        for root in sorted(external_roots(module, path) - own - LAMBDA_MAY_IMPORT):
            if root not in sys.stdlib_module_names and root != "__future__":
                wrong.append(f"{module} imports {root}")
    assert not wrong
    assert not _crossings(("hfsm_lambda",), tuple((set(PACKAGES) | set(SCRIPTS)) - own))


@pytest.mark.parametrize("case", ["cycle", "floor"])
def test_the_checks_can_fail(case, tmp_path):
    """The same walk over a made-up checkout with a circle hidden in a function and a TYPE_CHECKING import up a
    floor finds both."""
    (tmp_path / "local_mode").mkdir()
    (tmp_path / "runctl").mkdir()
    (tmp_path / "local_mode" / "__init__.py").write_text("")
    (tmp_path / "runctl" / "__init__.py").write_text("")
    (tmp_path / "local_mode" / "a.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from runctl import core\n"
        "def f():\n    from . import b\n")
    (tmp_path / "local_mode" / "b.py").write_text("from local_mode.a import f\n")
    (tmp_path / "runctl" / "core.py").write_text("")
    graph = import_graph(product_modules(tmp_path))
    if case == "cycle":
        assert find_cycles(graph) == [["local_mode.a", "local_mode.b"]]
    else:
        assert "runctl.core" in graph["local_mode.a"]
