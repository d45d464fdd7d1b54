"""How a run is scored: the tasks' metrics (SQuAD scoring and post-processing) and their trivial baselines."""
