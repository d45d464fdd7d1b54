"""The local SageMaker: training and processing jobs run on this machine through the real toolkit, with SageMaker's channel, checkpoint and spot semantics."""
