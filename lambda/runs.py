"""The Prepare step's logic: spec -> validated, defaulted, pre-flighted run plan (no job is started)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import code_policy
import naming
import spend
from errors import PreflightError, SpecError
from planning import plan_run
from preflight import job_name_problems, request_problems, static_problems, storage_problems, subnet_problems
from run_spec import parse_spec
from settings import Settings


def prepare_run(
    raw: Any,
    settings: Settings,
    *,
    run_id: str | None = None,
    execution: dict[str, Any] | None = None,
    source: dict[str, Any] | None = None,
    s3: Any = None,
    sagemaker: Any = None,
    ec2: Any = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """SpecError for a malformed spec; PreflightError listing every environment/data problem; else the run.

    `run_id` (optional) must look like `<spec name>-<yyyymmddHHMMSS>-<4 hex>`: runctl names the execution
    after it. Without `s3` / `sagemaker` / `ec2` clients the storage, job-name and EFA subnet checks are skipped (pure use).
    """
    spec = parse_spec(raw, settings)
    if run_id is not None:
        match = naming.RUN_ID_RE.match(run_id) if isinstance(run_id, str) else None
        if not match or match["name"] != spec["name"]:
            raise SpecError([f"run_id: expected {spec['name']}-<yyyymmddHHMMSS>-<4 hex digits>, got {run_id!r}"])
    else:
        run_id = naming.run_id_for(spec["name"], execution, now)
    exec_id = next((v for k, v in (execution or {}).items() if k.lower() == "id"), None)
    run = plan_run(spec, settings, run_id, source=source, execution_arn=exec_id, created_at=now)
    problems = static_problems(spec, settings) + request_problems(run, settings)
    problems += code_policy.spec_problems(spec, settings) + spend.run_cost_problems(run, settings)
    if s3 is not None:
        problems += storage_problems(spec, settings, s3)
    if sagemaker is not None:
        problems += job_name_problems(run, sagemaker)
    if ec2 is not None and not problems:  # one more API call only for runs that could otherwise start
        problems += subnet_problems(run, settings, ec2)
    if problems:
        raise PreflightError(problems)
    return run
