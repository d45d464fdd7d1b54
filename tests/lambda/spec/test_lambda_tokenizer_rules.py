"""The tokenizer rules are declared once, in training_code/tokenizer_mr/tokenizer_rules.py: the Lambdas take them
from there (lambda/training_contract.py) and keep no copy of their own to drift."""

from __future__ import annotations

import ast
import sys
from pathlib import Path
from typing import TypeGuard

from hfsm_lambda.spec import run_spec
from hfsm_lambda.training_contract import tokenizer_rules

REPO = Path(__file__).resolve().parents[3]
LAMBDA = REPO / "lambda"
RULES_FILE = REPO / "training_code" / "tokenizer_mr" / "tokenizer_rules.py"
PUBLIC = {name for name in vars(tokenizer_rules) if not name.startswith("_") and name.isupper()}


def declared_token_lists() -> set[frozenset[str]]:
    """Every tuple of names the rules declare (types, styles, each type's defaults, each style's needs)."""
    groups = [tokenizer_rules.TOKENIZER_TYPES, tokenizer_rules.STYLES, *tokenizer_rules.DEFAULT_SPECIAL_TOKENS.values(),
              *tokenizer_rules.STYLE_SPECIAL_TOKENS.values()]
    return {frozenset(group) for group in groups if len(group) > 1}


def literal_copies(source: str) -> list[str]:
    """Where `source` re-declares the rules: a tuple/list/set literal of the rules' token names, a module-level
    literal assigned to one of the rules' names, or a function of the rules' names."""
    tree = ast.parse(source)
    return _copied_names_and_functions(tree) + _copied_assignments(tree)


def _rule_functions() -> set[str]:
    """The public functions tokenizer_rules declares itself (not those it imports)."""
    return {name for name, value in vars(tokenizer_rules).items() if callable(value) and not name.startswith("_")
            and getattr(value, "__module__", None) == tokenizer_rules.__name__}


def _is_string_literal_collection(node: ast.AST) -> TypeGuard[ast.Tuple | ast.List | ast.Set]:
    return isinstance(node, (ast.Tuple, ast.List, ast.Set)) and bool(node.elts) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts)


def _copied_names_and_functions(tree: ast.Module) -> list[str]:
    """Anywhere in the tree: literals of the rules' token names, and functions named as the rules' functions."""
    found, declared, functions = [], declared_token_lists(), _rule_functions()
    for node in ast.walk(tree):
        if _is_string_literal_collection(node):
            if frozenset(e.value for e in node.elts) in declared:  # type: ignore[attr-defined]
                found.append(f"line {node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in functions:
            found.append(f"line {node.lineno}: def {node.name}")
    return found


def _copied_assignments(tree: ast.Module) -> list[str]:
    """At module level: a literal assigned to one of the rules' public names."""
    found = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id in PUBLIC for t in node.targets):
            try:
                ast.literal_eval(node.value)
            except ValueError:
                continue
            found.append(f"line {node.lineno}: {ast.unparse(node)[:80]}")
    return found


def test_no_lambda_module_redeclares_a_tokenizer_rule():
    copies = {path.name: found for path in sorted(LAMBDA.rglob("*.py")) if (found := literal_copies(path.read_text()))}
    assert not copies, f"take these from training_contract.tokenizer_rules instead: {copies}"


def test_the_scan_finds_the_copies_run_spec_used_to_keep():
    """The scan can fail: the declarations lambda/spec/run_spec.py held before tokenizer_rules existed are each found."""
    old = '''
TOKENIZER_TYPES = ("bpe", "wordpiece")
DEFAULT_SPECIAL_TOKENS = {
    "bpe": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    "wordpiece": ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
}
WORDPIECE_REQUIRED_TOKENS = ("[CLS]", "[SEP]", "[UNK]")
def byte_level_alphabet():
    return frozenset()
'''
    found = literal_copies(old)
    assert len(found) == 7, found  # 2 tuples + 2 lists + the 2 literal assignments + the function
    assert any("'[CLS]', '[SEP]', '[UNK]'" in f for f in found), found
    assert any("def byte_level_alphabet" in f for f in found), found


def test_run_spec_takes_its_tokenizer_values_from_the_rules():
    assert run_spec.TOKENIZER_TYPES is tokenizer_rules.TOKENIZER_TYPES
    assert run_spec.WORDPIECE_REQUIRED_TOKENS is tokenizer_rules.STYLE_SPECIAL_TOKENS["bert"]
    # the resolved spec holds JSON lists: the same tokens, in the same order
    assert {k: list(v) for k, v in tokenizer_rules.DEFAULT_SPECIAL_TOKENS.items()} == run_spec.DEFAULT_SPECIAL_TOKENS
    # wordpiece exports with the bert style (settings.TokenizerSettings.resolved_style), the type bert needs
    assert tokenizer_rules.STYLE_TOKENIZER_TYPE["bert"] == "wordpiece"
    vocab = run_spec.SPEC.fields["tokenizer"].fields["vocab_size"]
    assert vocab.low >= 1 and vocab.high <= tokenizer_rules.MAX_VOCAB_SIZE  # the pipeline's range lies within the jobs'


def test_the_rules_module_is_standard_library_only_and_stands_alone():
    """The Lambda asset loads it as a top-level module by file path: no third-party import, nothing relative or
    from its package."""
    for node in ast.walk(ast.parse(RULES_FILE.read_text())):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0 and node.module, ast.unparse(node)
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        for name in names:
            assert name.split(".")[0] in sys.stdlib_module_names or name == "__future__", name
