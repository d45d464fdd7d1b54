"""Fine-tuning of Hugging Face models under the SageMaker training-container contract.

`train.py` is the entry point; the modules here each own one concern:
`smenv` (SageMaker environment), `args` (hyperparameters), `data` (loading inputs), `sharding`
(who trains on what), `checkpoints` (spot-safe checkpoints), `callbacks` (log lines, SIGTERM),
`metrics_qa` (SQuAD scoring), `tasks` (per-task preprocessing and metrics), `runner` (the whole run: its
start-up phases in `run_startup`, the Trainer and outputs in `run_training`, with `model_loading` and `raw_data`).
"""

__all__ = ["__version__"]
__version__ = "1.0.0"
