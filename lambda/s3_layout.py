"""The buckets' prefixes (CONTRACTS.md "S3 layout"), declared once: the Lambdas build their URIs with them and the
stacks scope the roles, the lifecycle rules and the upload trigger to them (stacks/storage_stack.py)."""

from __future__ import annotations

# artifacts bucket
CODE_PREFIX = "code/"  # sourcedir.tar.gz + runproc.sh, content-addressed
CHECKPOINTS_PREFIX = "checkpoints/"  # checkpoints/<run_id>/ (the jobs' CheckpointConfig)
MODELS_PREFIX = "models/"  # models/<run_id>/ (the jobs' output)
OUTPUTS_PREFIX = "outputs/"  # outputs/<run_id>/ (summary, tokenizer stage)
TENSORBOARD_PREFIX = "tensorboard/"  # tensorboard/<run_id>/<job>/ (the jobs' TensorBoardOutputConfig)
MLFLOW_PREFIX = "mlflow/"  # the MLflow tracking server's artifact store (stacks/tracking_server.py)
REGISTRY_PREFIX = "registry/"  # frozen copies of registered model artifacts (runs/registry.py)
CLAIMS_PREFIX = "claims/"  # one object per run id, written once by Prepare (runs/claims.py)
REFUSED_PREFIX = "refused/"  # refused/<run_id>/: what the training code refused, moved out of checkpoints/ (runs/set_aside.py)
# data bucket
RUNS_PREFIX = "runs/"  # run specs: an upload of runs/<name>.json starts a run
