"""MLflow tracking of a training run: a TrainerCallback (callback.py) over a background client (worker.py)."""
