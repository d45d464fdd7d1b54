"""runctl: start, watch and stop fine-tuning runs through the fine-tune state machine (the API path).

    python -m runctl submit SPEC.json [--name NAME]
    python -m runctl status RUN_ID_OR_EXECUTION_ARN
    python -m runctl stop RUN_ID_OR_EXECUTION_ARN
"""
