"""A run's life after Prepare: its claim, the state between states, job outcomes and fallbacks, the verdict, the summary, messages and the model registry."""
