"""The Lambda asset's pure modules (lambda/), for the declarations the stacks share with the Lambdas.

`lambda` is a Python keyword, so lambda/ is not an importable package: its modules are imported top-level, the
way the Lambda runtime does (as runctl/plan.py and the tests do).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

LAMBDA_DIR = Path(__file__).resolve().parents[1] / "lambda"


def lambda_module(name: str) -> ModuleType:
    if str(LAMBDA_DIR) not in sys.path:
        sys.path.insert(0, str(LAMBDA_DIR))
    return importlib.import_module(name)
