"""Fine-tuning of Hugging Face models under the SageMaker training-container contract.

`train.py` is the entry point; each package here owns one concept: `run` (the whole run: `runner.TrainingRun` owns
its phases; the Trainer subclass, callbacks, goodput and progress lines), `checkpoint` (spot-safe checkpoints and the
resume decision), `data` (raw rows, sharding, batching, packing, the tokenized cache), `parallel` (process group,
FSDP, NCCL, bandwidth), `stall` (the stall watchdog), `scoring` (metrics and trivial baselines), `tasks` (one module
per task); `smenv` (SageMaker environment) and `args` (hyperparameters) sit beside them.
"""

__all__ = ["__version__"]
__version__ = "1.0.0"
