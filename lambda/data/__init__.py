"""The data pre-flight: a bounded sample of every S3 channel read the way the training code reads it, and its column and value checks."""
