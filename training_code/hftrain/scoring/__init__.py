"""How a run is scored: the tasks' metrics (classification accuracy and macro F1, SQuAD scoring and post-processing,
ROUGE) and their trivial baselines. The tasks import these; nothing here imports a task."""
