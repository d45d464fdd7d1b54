"""Build-time tools: the generators of the checkout's generated docs and schemas (`make docs` runs them all; the
tests fail while any output is stale). Not part of any runtime: the Lambda asset and the training code bundle do not
carry this package."""
