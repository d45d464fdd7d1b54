"""Recovery in place: the training processes restarted on the same instances, inside the same SageMaker job."""
