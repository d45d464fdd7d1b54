"""The pipeline's Lambda code, imported as the package `hfsm_lambda`.

`lambda` is a Python keyword, so the folder is installed under this name (pyproject.toml's package-dir; `make setup`
installs the checkout in editable mode), and the Lambda asset ships it as the folder `hfsm_lambda/` (handlers
`hfsm_lambda.handlers.<function>`): the same name in a checkout, in the asset and in local mode. Standard library and
boto3 only (what the Lambda runtime provides).
"""

# The module every pipeline Lambda's handler is in: `<HANDLER_MODULE>.<function>` (the stacks and runctl build it).
HANDLER_MODULE = f"{__name__}.handlers"
