"""A pipeline run read from AWS (Step Functions, SageMaker, CloudWatch Logs) with boto3 clients: its status, the
recent runs, its jobs and their logs, and the record a local run keeps of them. The same calls read a deployed
environment or local mode's emulator.

Below both of its users: runctl (which prints what is read here) and local mode (which keeps a run's record for
`runctl --local` before its emulator goes).
"""
