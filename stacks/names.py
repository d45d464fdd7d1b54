"""Fixed names of the environment's principals and resources.

Policies in one stack name principals and resources of another (the key policy in the storage stack names the
pipeline's roles; bucket policies name the run submitters and Finish): fixed names make those ARNs literal, so
no stack depends on another's outputs and no policy needs a wildcard where a name is known.
"""

from __future__ import annotations

from stacks.settings.environment import EnvironmentConfig

# Every Lambda handler of the pipeline (lambda/handlers.py); each runs as its own role.
HANDLERS = ("trigger", "prepare", "start_processing", "start_training", "check_job", "plan_fallback", "finish",
            "notify_failure", "stop_run_jobs")
# Log groups SageMaker writes job logs into (one per account and region; see config manage_sagemaker_log_groups).
SAGEMAKER_LOG_GROUPS = ("/aws/sagemaker/TrainingJobs", "/aws/sagemaker/ProcessingJobs")


def function_name(config: EnvironmentConfig, handler: str) -> str:
    return f"{config.prefix}-{handler.replace('_', '-')}"


def function_role_name(config: EnvironmentConfig, handler: str) -> str:
    return f"{config.prefix}-fn-{handler.replace('_', '-')}"


def sagemaker_role_name(config: EnvironmentConfig) -> str:
    return f"{config.prefix}-sagemaker-execution"


def run_submitter_role_name(config: EnvironmentConfig) -> str:
    return f"{config.prefix}-run-submitter"


def dataset_uploader_role_name(config: EnvironmentConfig) -> str:
    return f"{config.prefix}-dataset-uploader"


def code_deployment_role_name(config: EnvironmentConfig) -> str:
    return f"{config.prefix}-code-deployment"


def tracking_server_name(config: EnvironmentConfig) -> str:
    return f"{config.prefix}-mlflow"


def tracking_server_arn(config: EnvironmentConfig) -> str:
    """Literal (a fixed name): the roles and the endpoint policy name exactly this server."""
    return f"arn:aws:sagemaker:{config.region}:{config.account}:mlflow-tracking-server/{tracking_server_name(config)}"


def role_arn(config: EnvironmentConfig, name: str) -> str:
    return f"arn:aws:iam::{config.account}:role/{name}"


def state_machine_names(config: EnvironmentConfig) -> tuple[str, str]:
    return (f"{config.prefix}-fine-tune", f"{config.prefix}-tokenizer")


def state_machine_arn(config: EnvironmentConfig, name: str) -> str:
    return f"arn:aws:states:{config.region}:{config.account}:stateMachine:{name}"


def topic_name(config: EnvironmentConfig) -> str:
    return f"{config.prefix}-runs"


def topic_arn(config: EnvironmentConfig) -> str:
    return f"arn:aws:sns:{config.region}:{config.account}:{topic_name(config)}"


def states_log_group(config: EnvironmentConfig) -> str:
    return f"/aws/vendedlogs/states/{config.prefix}-pipelines"


def flow_log_group(config: EnvironmentConfig) -> str:
    return f"/{config.prefix}/vpc-flow-logs"


def function_log_group(config: EnvironmentConfig, handler: str) -> str:
    return f"/aws/lambda/{function_name(config, handler)}"


def code_deployment_log_group(config: EnvironmentConfig) -> str:
    return f"/{config.prefix}/code-deployment"


def project_log_groups(config: EnvironmentConfig) -> list[str]:
    """Every log group the project key encrypts."""
    groups = [states_log_group(config), flow_log_group(config), code_deployment_log_group(config),
              *(function_log_group(config, h) for h in HANDLERS)]
    if config.manage_sagemaker_log_groups:
        groups += list(SAGEMAKER_LOG_GROUPS)
    return groups


def log_group_arn(config: EnvironmentConfig, name: str) -> str:
    return f"arn:aws:logs:{config.region}:{config.account}:log-group:{name}"
