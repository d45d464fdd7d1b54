"""The goodput simulator behind benchmarks/bench_goodput.py: sourced fleet costs (profiles), interruptions as they
come (events), the policies compared (policies), the Monte Carlo run (simulate), the auto interval as the training
code estimates it (interval), the replay of a measured local run and its per-part cross-check (replay), and the
printed table (table)."""
