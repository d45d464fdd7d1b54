"""The Lambda code asset: lambda/ (the package `hfsm_lambda`) plus the training code's hyperparameter schema and
rules and its tokenizer rules, and the wire-format package `contract` (training_code/contract/), bundled at synth.

The Lambdas check a run spec against training_code's own `hyperparameters.json`, `hftrain/hp_rules.py` and
`tokenizer_mr/tokenizer_rules.py` (lambda/training_contract.py, `FILES`), and read and write the formats the training
code shares with them through its package `contract` (`PACKAGES`, a top-level folder of the asset). None is committed under lambda/: CDK's
local bundling copies them into the asset at synth, in this process (no Docker: the image is never pulled because
`try_bundle` always bundles). The asset hash is the hash of the bundle's OUTPUT, so a change to any of these
training_code files changes it and a deploy ships the new copy (the default, SOURCE, would hash lambda/ alone and
keep the old one).
"""

from __future__ import annotations

import shutil
from pathlib import Path

import aws_cdk as cdk
import jsii
from aws_cdk import aws_lambda as lambda_

import hfsm_lambda
from hfsm_lambda.training_contract import FILES, PACKAGES

LAMBDA_DIR = Path(hfsm_lambda.__file__).resolve().parent  # lambda/ of this checkout
TRAINING_CODE = LAMBDA_DIR.parent / "training_code"
IGNORE = ("__pycache__", "*.pyc", "*.md")  # not shipped: no bytecode (read-only /var/task), no notes


@jsii.implements(cdk.ILocalBundling)
class LambdaBundler:
    """Local bundling: `stage` in this process, never Docker. lambda/ and, next to its modules, the training code's
    files named by training_contract.FILES, in the folder hfsm_lambda/; beside it the training code's packages
    named by training_contract.PACKAGES."""

    def __init__(self, training_code: Path = TRAINING_CODE) -> None:
        self.training_code = training_code

    def try_bundle(self, output_dir: str, *_options: object, **_named: object) -> bool:
        stage(Path(output_dir), self.training_code)
        return True


def stage(out: Path, training_code: Path = TRAINING_CODE) -> None:
    """Writes the asset's files into `out` (the bundler's output; benchmarks/bench_lambda.py measures the same):
    lambda/ as the package folder `hfsm_lambda/` (the handlers' module path), the training code's files in it, and
    the training code's PACKAGES as folders beside it (the Lambda runtime puts the asset's root on the path)."""
    package = out / hfsm_lambda.__name__
    shutil.copytree(LAMBDA_DIR, package, ignore=shutil.ignore_patterns(*IGNORE), dirs_exist_ok=True)
    for name, relative in FILES.items():
        source = training_code / relative
        if not source.is_file():
            raise FileNotFoundError(f"the Lambda asset needs {source} (training_code's {relative}); for the "
                                    "schema run: cd training_code && python -m hftrain.args --write")
        shutil.copyfile(source, package / name)
    for name in PACKAGES:
        source = training_code / name
        if not (source / "__init__.py").is_file():
            raise FileNotFoundError(f"the Lambda asset needs the package {source} (training_code's {name}/)")
        shutil.copytree(source, out / name, ignore=shutil.ignore_patterns(*IGNORE), dirs_exist_ok=True)


def lambda_code(training_code: Path = TRAINING_CODE) -> lambda_.Code:
    """The asset every pipeline Lambda runs: standard library + boto3 (in the runtime), nothing to install."""
    return lambda_.Code.from_asset(
        str(LAMBDA_DIR), asset_hash_type=cdk.AssetHashType.OUTPUT,
        bundling=cdk.BundlingOptions(image=cdk.DockerImage.from_registry("unused-local-bundling"),
                                     local=LambdaBundler(training_code)))
