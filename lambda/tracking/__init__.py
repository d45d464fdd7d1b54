"""MLflow tracking from the Lambdas (Finish): its REST API, SigV4-signed for SageMaker (standard library + boto3)."""
