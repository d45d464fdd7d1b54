"""The run spec: its declaration (fields, kinds, rules), strict JSON parsing, the hyperparameter rules Prepare applies, and the spec file reader."""
