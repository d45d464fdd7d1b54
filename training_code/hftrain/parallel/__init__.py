"""Processes working together: process-group helpers, FSDP, NCCL transport and the bandwidth probe."""
