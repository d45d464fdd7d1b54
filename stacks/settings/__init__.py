"""An environment's settings: cdk.json context read into one validated, typed object, and the Lambdas' settings derived from it."""
