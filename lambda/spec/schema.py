"""The kinds a run spec field can be, each able to check a value, describe itself as JSON Schema and as a docs row.

run_spec.py declares the fields with these kinds; nothing here knows a field name. A check returns the
resolved value (defaults filled in), `INVALID` after recording a problem, or `ABSENT` for an optional field that
stays out of the resolved spec. Patterns are written in the subset of regex syntax that Python's `re` and
ECMAScript read alike (no `\\d`, `\\w`, `\\s`, `$`), matched against the whole string.

The kinds live in schema_base.py (the markers, problems, context, defaults and `Kind`),
schema_scalars.py and schema_containers.py; this module is the one the declarations import.
"""

from __future__ import annotations

from hfsm_lambda.spec.schema_base import (
           ABSENT,
           INVALID,
           MAX_PROBLEMS,
           Context,
           Derived,
           Kind,
           Problems,
           Setting,
           describe,
           valid,
)
from hfsm_lambda.spec.schema_containers import JsonObject, List, Map, Obj
from hfsm_lambda.spec.schema_scalars import Bool, Const, Either, Enum, Int, IntOrWord, Num, Str

__all__ = ["ABSENT", "INVALID", "MAX_PROBLEMS", "Bool", "Const", "Context", "Derived", "Either", "Enum", "Int",
           "IntOrWord", "JsonObject", "Kind", "List", "Map", "Num", "Obj", "Problems", "Setting", "Str", "describe",
           "valid"]
