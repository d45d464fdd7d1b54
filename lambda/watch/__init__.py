"""Watching a running job from outside: checkpoint durability, stalls the job cannot report, and jobs left behind."""
