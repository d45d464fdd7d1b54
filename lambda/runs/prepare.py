"""The Prepare step's logic, read in one direction: parse -> plan -> build every request once -> check.

The spec is parsed once, here, into the typed spec (spec/typed.py); what Prepare returns is the typed plan
(plan/run.py), which the handler writes to the state as JSON (`run.to_json`)."""

from __future__ import annotations

import dataclasses
from datetime import datetime
from typing import Any

from hfsm_lambda.data import preflight as data_preflight
from hfsm_lambda.errors import PreflightError, SpecError
from hfsm_lambda.plan import environment_limits, job_requests, planning, preflight
from hfsm_lambda.plan.run import Run
from hfsm_lambda.settings import Settings
from hfsm_lambda.spec import run_spec, typed


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
    stepfunctions: Any = None,
    now: datetime | None = None,
) -> Run:
    """SpecError for a malformed spec; PreflightError listing every environment/data problem; else the run.

    Without `s3` / `sagemaker` / `ec2` / `stepfunctions` clients the storage, job-name, EFA subnet and concurrent-run
    checks are skipped (pure use).
    """
    try:
        spec = typed.from_json(run_spec.parse_spec(raw, settings))
    except SpecError as err:  # every phase's problems, the environment's limits too (issue 36)
        raise SpecError(environment_limits.with_spec_problems(err.problems, raw, settings),
                        omitted=err.omitted) from None
    run = planning.plan_run(spec, settings, run_id=run_id, execution=execution, source=source, created_at=now)
    requests = job_requests.build_requests(run, settings)
    problems = preflight.check(run, requests, settings, s3=s3, sagemaker=sagemaker, ec2=ec2,
                               stepfunctions=stepfunctions)
    if problems:
        raise PreflightError(problems)
    if s3 is not None:  # every object accounted for: what the jobs will skip, named in the run and its summary
        run = dataclasses.replace(run, data_skipped=tuple(data_preflight.skipped(spec, settings, s3)))
    return run
