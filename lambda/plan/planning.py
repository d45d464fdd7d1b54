"""Plan a run from a resolved spec: S3 URIs, job names and the settings of every attempt. Pure.

Prepare reads one way: run_spec.parse_spec -> plan_run (here) -> job_requests.build_requests -> preflight.check.
The plan is typed (plan/run.py `Run`, over the typed spec of spec/typed.py); later steps read it (`run.attempts`);
nothing calls back into planning.
"""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Any

from contract import summary as run_summary
from hfsm_lambda import naming
from hfsm_lambda.errors import SpecError
from hfsm_lambda.plan.run import Attempt, JobNames, Run, RunUris
from hfsm_lambda.s3_layout import CHECKPOINTS_PREFIX, MODELS_PREFIX, OUTPUTS_PREFIX
from hfsm_lambda.settings import Settings
from hfsm_lambda.spec.typed import RunSpec


def _attempt(spec: RunSpec, attempt: int, job_name: str) -> Attempt:
    """Compute settings of one training attempt.

    Attempt 0 uses `compute` and `spot`; attempt k >= 1 applies `fallback.options[k-1]` (the last option
    again when there are more attempts than options) over them; without options every attempt is a retry
    of the first one (new job name, same checkpoint).
    """
    instance_type, spot = spec.compute.instance_type, spec.spot.enabled
    options = spec.fallback.options
    if attempt >= 1 and options:
        option = options[min(attempt, len(options)) - 1]
        instance_type = instance_type if option.instance_type is None else option.instance_type
        spot = spot if option.spot is None else option.spot
    return Attempt(attempt=attempt, job_name=job_name, instance_type=instance_type,
                   instance_count=spec.compute.instance_count, spot=spot)


def run_uris(settings: Settings, run_id: str) -> dict[str, str]:
    bucket = settings.artifacts_bucket
    outputs = f"s3://{bucket}/{OUTPUTS_PREFIX}{run_id}/"
    return {
        "checkpoint": f"s3://{bucket}/{CHECKPOINTS_PREFIX}{run_id}/",
        "model_output": f"s3://{bucket}/{MODELS_PREFIX}{run_id}/",
        "outputs": outputs,
        "tokenizer_counts": f"{outputs}tokenizer/counts/",
        "tokenizer": f"{outputs}tokenizer/tokenizer/",
        "summary": f"{outputs}{run_summary.FILE_NAME}",
        "metrics": f"{outputs}{run_summary.METRICS_FILE_NAME}",
    }


def plan_run(
    spec: RunSpec,
    settings: Settings,
    *,
    run_id: Any = None,
    execution: dict[str, Any] | None = None,
    source: dict[str, Any] | None = None,
    created_at: datetime | None = None,
) -> Run:
    """The `run` object that travels in the state machine's state as `$.run` (see docs/run_spec.md).

    `run_id` (runctl names the execution after it) must be `<spec name>-<yyyymmddHHMMSS>-<16 hex>`; without
    it the run id comes from the execution (`$$.Execution`), else from 64 random bits.
    """
    if run_id is not None:
        match = naming.RUN_ID_RE.fullmatch(run_id) if isinstance(run_id, str) else None
        if not match or match["name"] != spec.name:
            raise SpecError([f"run_id: expected {spec.name}-<yyyymmddHHMMSS>-<16 hex digits>, got "
                             f"{str(run_id)[:80]!r}"])
    else:
        run_id = naming.run_id_for(spec.name, execution, created_at)
    execution_arn = next((v for k, v in (execution or {}).items() if k.lower() == "id"), None)
    max_attempts = spec.fallback.max_attempts
    project = settings.name_prefix  # job names: <project>-<env>-<run_id>-<stage><attempt>
    train_names = tuple(naming.job_name(project, run_id, "train", i) for i in range(max_attempts))
    return Run(
        run_id=run_id,
        spec=spec,
        source=source,
        execution_arn=execution_arn,
        created_at=(created_at or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
        tokenizer_stage=spec.tokenizer is not None,
        max_attempts=max_attempts,
        uris=RunUris(**run_uris(settings, run_id)),
        job_names=JobNames(
            tokenizer_map=naming.job_name(project, run_id, "tokenizer_map"),
            tokenizer_reduce=naming.job_name(project, run_id, "tokenizer_reduce"),
            train=train_names,
        ),
        attempts=tuple(_attempt(spec, i, train_names[i]) for i in range(max_attempts)),
        stall_board_token=secrets.token_hex(16),
    )
