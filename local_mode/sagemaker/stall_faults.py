"""The stall faults `python -m local_mode run --inject-stall` injects, in the training code's own grammar.

The training code reads them (training_code/hftrain/stall/injection.py, standard library only, loaded here from
its file so that the CLI refuses a malformed fault before anything starts and says it as the job would act).
"""

from __future__ import annotations

import importlib.util
import sys
from functools import lru_cache
from pathlib import Path
from types import ModuleType

SOURCE = Path(__file__).resolve().parents[2] / "training_code" / "hftrain" / "stall" / "injection.py"


@lru_cache(maxsize=1)
def _grammar() -> ModuleType:
    spec = importlib.util.spec_from_file_location("local_mode_stall_injection", SOURCE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def describe_stall(fault: str) -> str:
    """What the fault does, in words; ValueError (naming the grammar) when it is malformed."""
    return _grammar().parse(fault).describe()
