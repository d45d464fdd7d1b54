"""The Lambda asset's modules (lambda/ of this checkout), imported the way the Lambda runtime does.

`lambda` is a Python keyword, so lambda/ is not a package: its modules are top-level names. runctl uses them for
the names and patterns it shares with the pipeline (naming) and for `runctl plan` (the same code Prepare runs).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

LAMBDA_DIR = Path(__file__).resolve().parents[1] / "lambda"


def lambda_module(name: str) -> ModuleType:
    if not LAMBDA_DIR.is_dir():
        raise SystemExit(f"{LAMBDA_DIR} not found: runctl runs from a checkout of the repository")
    if str(LAMBDA_DIR) not in sys.path:
        sys.path.insert(0, str(LAMBDA_DIR))
    return importlib.import_module(name)
