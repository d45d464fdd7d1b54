"""The goodput ledger: where every billed instance-second of a run went, from the jobs' status transitions and logs."""
