"""Builds the CDK app for one environment: storage, network and pipeline stacks, with cdk-nag applied."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import aws_cdk as cdk
from cdk_nag import AwsSolutionsChecks

from stacks.assets.image_uris import resolve_images
from stacks.nag import acknowledge_findings
from stacks.network_stack import NetworkStack
from stacks.pipeline_stack import PipelineStack
from stacks.sagemaker_role import job_image_repository_arns
from stacks.settings.environment import EnvironmentConfig, load_config
from stacks.storage_stack import StorageStack

REPO_ROOT = Path(__file__).resolve().parents[1]
CDK_JSON = REPO_ROOT / "cdk.json"


class ProjectApp:
    """The stacks of one environment, kept as attributes for tests."""

    def __init__(self, app: cdk.App, config: EnvironmentConfig, *, acknowledge: bool = True) -> None:
        self.app = app
        self.config = config
        env = cdk.Environment(account=config.account, region=config.region)
        # Pinned zones answer CDK's availability-zone lookup, so synth needs no AWS credentials.
        app.node.set_context(f"availability-zones:account={config.account}:region={config.region}",
                             list(config.availability_zones))
        self.images = resolve_images(config)
        self.storage = StorageStack(app, f"{config.prefix}-storage", config=config, env=env,
                                    description=f"{config.prefix}: KMS key and S3 buckets")
        self.network = NetworkStack(app, f"{config.prefix}-network", config=config, env=env,
                                    key=self.storage.key, ecr_repository_arns=job_image_repository_arns(self.images),
                                    description=f"{config.prefix}: VPC, endpoints, EFA security group, FSx")
        fs = self.network.file_system
        self.pipeline = PipelineStack(
            app, f"{config.prefix}-pipeline", config=config, env=env, images=self.images, key=self.storage.key,
            data_bucket=self.storage.data_bucket, artifacts_bucket=self.storage.artifacts_bucket,
            vpc=self.network.vpc, training_subnets=self.network.training_subnets,
            training_security_group=self.network.training_security_group,
            fsx_file_system_id=fs.file_system_id if fs else None, fsx_mount_name=self.network.fsx_mount_name,
            fsx_subnet=self.network.fsx_subnet,
            description=f"{config.prefix}: roles, Lambdas, state machines, triggers, model registry")
        for stack in (self.storage, self.network, self.pipeline):
            for k, v in {"project": config.project, "environment": config.name, **config.tags}.items():
                cdk.Tags.of(stack).add(k, v)
            if acknowledge:  # False only for tests/infra: every finding, to match against the acknowledgements
                acknowledge_findings(stack, config)
        cdk.Validations.of(app).add_plugins(AwsSolutionsChecks(app, verbose=True))


def cdk_json_context() -> dict[str, Any]:
    """The context block of cdk.json (what the CDK CLI passes to the app)."""
    return json.loads(CDK_JSON.read_text())["context"]


def build_app(context: dict[str, Any] | None = None, env_name: str | None = None,
              outdir: str | None = None, *, acknowledge: bool = True) -> ProjectApp:
    """`context` defaults to what the CDK CLI passed, else cdk.json's; `env_name` to context `env`, then dev."""
    app = cdk.App(context=context, outdir=outdir) if context is not None else cdk.App(outdir=outdir)
    if app.node.try_get_context("environments") is None:  # run as `python app.py`, not through the CLI
        for key, value in cdk_json_context().items():
            if app.node.try_get_context(key) is None:
                app.node.set_context(key, value)
    name = env_name or app.node.try_get_context("env") or "dev"
    raw = {"project": app.node.try_get_context("project") or "hfsm",
           "environments": app.node.try_get_context("environments")}
    return ProjectApp(app, load_config(raw, name), acknowledge=acknowledge)
