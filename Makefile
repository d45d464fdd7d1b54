# Two commands do all set-up on a fresh machine: `make demo` (local end-to-end run) and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
ENV ?= dev
CDK := node_modules/.bin/cdk
export JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION := 1
export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PIP_DISABLE_PIP_VERSION_CHECK := 1

.PHONY: setup synth synth-if-changed test test-fast lint docs demo bench clean mlflow

# Set-up is stamped on the requirement files: it re-runs only when a pin changes.
# The tokenizer's native merge loop is installed from its source folder: a change to it re-installs.
# Last, the checkout's own packages (pyproject.toml: hfsm_lambda = lambda/, hftrain, stacks, ...), editable: every
# part is imported by its package name, from anywhere, with no PYTHONPATH.
$(VENV)/.stamp: requirements.txt requirements-dev.txt training_code/requirements.txt \
		training_code/requirements-processing.txt $(wildcard training_code/tokenizer_mr/native/*.*) \
		$(wildcard training_code/tokenizer_mr/native/tokenizer_mr_native/*.py) pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip==25.3
	$(PY) -m pip install -q -r requirements-dev.txt
	$(PY) -m pip install -q --no-deps --no-build-isolation -e .
	touch $@

# checkov in a venv of its own: its dependency pins conflict with the project's (requirements-checkov.txt).
.venv-checkov/.stamp: requirements-checkov.txt
	test -x .venv-checkov/bin/python || $(PYTHON) -m venv .venv-checkov
	.venv-checkov/bin/python -m pip install -q --upgrade pip==25.3
	.venv-checkov/bin/python -m pip install -q -r requirements-checkov.txt
	touch $@

# The MLflow tracking server of local mode in a venv of its own (requirements-mlflow.txt says why).
.venv-mlflow/.stamp: requirements-mlflow.txt
	test -x .venv-mlflow/bin/python || $(PYTHON) -m venv .venv-mlflow
	.venv-mlflow/bin/python -m pip install -q --upgrade pip==25.3
	.venv-mlflow/bin/python -m pip install -q -r requirements-mlflow.txt
	touch $@

node_modules/.stamp: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

setup: $(VENV)/.stamp .venv-checkov/.stamp .venv-mlflow/.stamp node_modules/.stamp

# Synthesizes every stack of one environment into cdk.out/ with no AWS credentials (cdk-nag runs in synth).
# Into $(SYNTH_OUT).new first: the previous cdk.out/ stays until the new synth succeeded. The digest of the synth's
# inputs, taken before it starts, is recorded in the new folder (tools/synth_inputs.py) for synth-if-changed.
# Synth needs the venv and the CDK CLI, not checkov's venv.
SYNTH_OUT ?= cdk.out
synth: $(VENV)/.stamp node_modules/.stamp
	rm -rf $(SYNTH_OUT).new
	inputs=$$($(PY) -m tools.synth_inputs $(ENV)) && \
	env -u AWS_PROFILE -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN \
	  PATH=$(CURDIR)/$(VENV)/bin:$$PATH $(CDK) synth --no-notices --quiet -c env=$(ENV) -o $(SYNTH_OUT).new && \
	  $(PY) -m tools.synth_inputs $(ENV) --write $(SYNTH_OUT).new --digest "$$inputs" \
	  || { rm -rf $(SYNTH_OUT).new; echo "make synth ENV=$(ENV) failed: $(SYNTH_OUT)/ is unchanged" >&2; exit 1; }
	rm -rf $(SYNTH_OUT) && mv $(SYNTH_OUT).new $(SYNTH_OUT)

# synth, unless $(SYNTH_OUT)/ already is the synth of ENV from the current inputs (any change to app.py, cdk.json,
# stacks/, lambda/, training_code/, the pins or the installed libraries synthesizes again: tools/synth_inputs.py).
synth-if-changed: $(VENV)/.stamp node_modules/.stamp
	@if $(PY) -m tools.synth_inputs $(ENV) --check $(SYNTH_OUT); then \
	  echo "$(SYNTH_OUT)/ is the synth of ENV=$(ENV) from the current inputs: synth skipped"; \
	else $(MAKE) --no-print-directory synth ENV=$(ENV); fi

lint: setup
	$(VENV)/bin/ruff check .

# Every generated doc and schema, from its one declaration (the tests fail while any is stale):
# training_code/hyperparameters.json, docs/training.md's hyperparameter tables, docs/run_spec.md,
# docs/run-spec.schema.json and CONTRACTS.md's settings and state tables. The generators are build-time tools
# (tools/), in neither the Lambda asset nor the training code bundle.
docs: $(VENV)/.stamp
	$(PY) -m hftrain.args --write
	$(PY) -m tools.hp_docs --write
	$(PY) -m tools.spec_docs --write

# The whole suite, slow tests included (CI runs this), on every core (pytest-xdist; TEST_WORKERS=0 runs it in one
# process). `--dist loadgroup` is in pyproject's addopts: the tests that share a fixture instance share a worker.
TEST_WORKERS ?= auto
test: setup lint
	HYPOTHESIS_PROFILE=ci $(VENV)/bin/pytest -q -m "not timing" -n $(TEST_WORKERS)

# The fast subset for the edit-test loop.
test-fast: setup
	$(VENV)/bin/pytest -q -m "not slow and not timing" -n $(TEST_WORKERS)

# Real runs checked against the goodput model within 1% of their billed time: on a quiet machine only.
test-timing: setup
	$(VENV)/bin/pytest -q -m timing -n 1

# The demo needs the venv, the MLflow server's venv (its run is tracked) and the CDK CLI (not checkov's venv), and
# synthesizes only when an input changed.
demo: $(VENV)/.stamp .venv-mlflow/.stamp node_modules/.stamp
	$(MAKE) --no-print-directory synth-if-changed ENV=dev
	$(PY) -m local_mode demo

# Local mode's MLflow tracking server (.local-runs/mlflow/) in the foreground, for a browser: the runs logged so far.
mlflow: $(VENV)/.stamp .venv-mlflow/.stamp
	$(PY) -m local_mode mlflow

# The benchmarks import the project's packages (local_mode, lambda/ via their own paths) from the repo root.
bench: setup
	for b in benchmarks/bench_*.py; do $(PY) $$b || exit 1; done

clean:
	rm -rf cdk.out cdk.out.new build .local-runs .pytest_cache  # .whl/ and .cache/ keep downloads and the demo's generated inputs (rm them to refetch)
