"""Fine-tuning entry point (`sagemaker_program = "train.py"`).

The sagemaker-training toolkit runs it with the job's hyperparameters as `--key value` arguments, through
torchrun when torch_distributed is enabled. Example outside SageMaker:

    SAGEMAKER_BASE_DIR=/tmp/job python train.py --task text-classification --model_name_or_path ./tiny \
        --train_path data/train.jsonl --max_steps 20

See docs/training.md for the hyperparameters, data layouts, checkpoints and distribution.
"""

from __future__ import annotations

import os
import sys

# hftrain is found next to this file: the toolkit and torchrun run it as a script, so its folder is on the path.
if __name__ == "__main__":
    # The imports below may hang before the stall watchdog exists: watched from here (hftrain/stall/import_watch.py).
    from hftrain.stall import import_watch, injection

    import_watch.start(sys.argv[1:])
    injection.at_phase(injection.mine(), "imports")  # local mode's injected hang (never set by the pipeline)
if __name__ == "__main__" and os.environ.get("RANK", "0") == "0":
    # The imports below and joining the process group take a while (tens of seconds on a busy machine): say so
    # first, as the first of the `[setup]` lines (hftrain/run/progress.py), so the job's start is not silent.
    from contract.progress_lines import setup_line

    print(setup_line("train.py started: importing torch and transformers, then joining the other processes"),
          flush=True)
    # MLflow (hftrain/tracking), when the job's environment names a server: its worker imports mlflow and finds
    # the run on a thread of its own while torch and transformers import here. Not in a recovery supervisor: its
    # workers are forked and a thread does not survive a fork (each worker's callback starts its own).
    from hftrain.recovery.supervisor import wanted as _supervised

    if not _supervised(sys.argv[1:]):
        from hftrain.tracking.worker import start_early

        start_early()

from hftrain.run.runner import main  # noqa: E402

if __name__ == "__main__":
    from hftrain.recovery.supervisor import supervise, wanted

    # under torchrun with in_job_restarts > 0: this process supervises a forked worker and restarts it in place
    # after a failure on healthy instances (hftrain/recovery/supervisor.py)
    sys.exit(supervise(sys.argv[1:]) if wanted(sys.argv[1:]) else main())
