"""The Prepare step's logic: spec -> validated, defaulted, pre-flighted run plan (no job is started)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import naming
from errors import PreflightError
from planning import plan_run
from preflight import request_problems, static_problems, storage_problems
from run_spec import parse_spec
from settings import Settings


def prepare_run(
    raw: Any,
    settings: Settings,
    *,
    execution: dict[str, Any] | None = None,
    source: dict[str, Any] | None = None,
    s3: Any = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """SpecError for a malformed spec; PreflightError listing every environment/data problem; else the run.

    Without an `s3` client the storage checks are skipped (pure use: tests, local tools).
    """
    spec = parse_spec(raw, settings)
    run_id = naming.run_id_for(spec["name"], execution, now)
    exec_id = next((v for k, v in (execution or {}).items() if k.lower() == "id"), None)
    run = plan_run(spec, settings, run_id, source=source, execution_arn=exec_id, created_at=now)
    problems = static_problems(spec, settings) + request_problems(run, settings)
    if s3 is not None:
        problems += storage_problems(spec, settings, s3)
    if problems:
        raise PreflightError(problems)
    return run
