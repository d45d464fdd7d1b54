"""The stall watchdog in every rank: heartbeats on a board, hooks in the training loop, the verdict, and injected faults for the local mode."""
