"""The AWS services local mode emulates in-process: moto set up from the synthesized app, Lambda invocations each with their own environment, CloudWatch Logs, clients for job threads."""
